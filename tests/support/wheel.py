"""The package's wheel, built offline for the tests that install or inspect it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def build_wheel(project_dir: Path, into: Path) -> Path:
    """The wheel of `project_dir`, built offline with the virtualenv's setuptools (the
    backend `python -m build` and `uv build` call) from a copy of what setuptools reads (so
    nothing is written into the checkout), into `into`/dist; return its path."""
    source = into / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(project_dir / name, source / name)
    shutil.copytree(
        project_dir / "sharestate",
        source / "sharestate",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            str(source),
            "-w",
            str(into / "dist"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (into / "dist").glob("sharestate-*.whl")
    return wheel
