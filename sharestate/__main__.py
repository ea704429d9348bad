"""`python -m sharestate ...` is the `sharestate` command."""

from __future__ import annotations

from sharestate.job.cli import run

run()
