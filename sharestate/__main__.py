"""`python -m sharestate ...` is the `sharestate` command."""

from __future__ import annotations

import sys

from sharestate.job.cli import main

sys.exit(main())
