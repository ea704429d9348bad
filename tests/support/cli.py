"""The `sharestate` command as a user runs it: `python -m sharestate`, a process of its own."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT


def run_sharestate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `python -m sharestate ARGS` from the checkout; its exit code, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "sharestate", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
