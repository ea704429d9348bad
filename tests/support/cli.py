"""The `sharestate` command as a user runs it: `python -m sharestate`, a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import ROOT


def run_sharestate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run `python -m sharestate ARGS` from the checkout; its exit code, stdout and stderr.
    The process chooses its own session: PySpark's mark of a Spark Connect client (the
    tests' process on a Connect run) is not passed on."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"}
    return subprocess.run(
        [sys.executable, "-m", "sharestate", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )


def start_sharestate(*args: str) -> subprocess.Popen[str]:
    """`python -m sharestate ARGS` started, not waited for (stdout and stderr piped)."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"}
    return subprocess.Popen(
        [sys.executable, "-m", "sharestate", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=env,
    )
