"""`python -m sharestate.jvm OUT.java`: renders the row contract as Java (scripts/build_jvm.sh);
`python -m sharestate.jvm --json` prints it."""

from __future__ import annotations

import sys

from sharestate.jvm.contract import main

sys.exit(main(sys.argv[1:]))
