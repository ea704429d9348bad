"""Misuse of the options is refused before any work (before Spark starts): one line, exit
code 2, nothing written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from sharestate.job import JobConfig, cli
from sharestate.job.config import local_output_problem
from sharestate.sample.exports import SampleSpec, write_sample
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sample")
    write_sample(root, SampleSpec(records=200))
    return root


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`sharestate replay ARGS` exits 2 with one line, quickly (no Spark started)."""
    started = time.monotonic()
    assert cli.main(["replay", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("sharestate: error: "), err
    assert time.monotonic() - started < 10, "refused before any work"
    return err


def test_output_misuse_is_refused_and_nothing_is_written(
    sample: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    share_state = str(sample / "share_state")
    before = _listing(sample)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder\n")

    err = refused(capsys, "--share-state", share_state, "--output", str(a_file))
    assert f"--output {a_file} is an existing file" in err
    assert a_file.read_text() == "not a folder\n"
    err = refused(capsys, "--share-state", share_state, "--output", str(a_file / "out"))
    assert f"cannot be created: {a_file} is a file" in err

    err = refused(capsys, "--share-state", share_state, "--output", share_state)
    assert "is the same folder as --share-state" in err
    inside = sample / "share_state" / "out"
    err = refused(capsys, "--share-state", share_state, "--output", str(inside))
    assert f"--output {inside} is inside --share-state {share_state}" in err
    # Spelled another way (a trailing slash, a `..`), the same folder.
    other_spelling = f"{sample}/share_state/../consumer_offsets/"
    err = refused(
        capsys,
        *("--share-state", share_state, "--consumer-offsets", str(sample / "consumer_offsets")),
        *("--output", other_spelling),
    )
    assert "is the same folder as --consumer-offsets" in err
    err = refused(capsys, "--share-state", share_state, "--output", str(sample))
    assert f"--share-state {share_state} is inside --output {sample}" in err
    err = refused(
        capsys,
        *("--share-state", share_state, "--end-offsets", str(tmp_path / "out" / "ends")),
        *("--output", str(tmp_path / "out")),
    )
    assert "--end-offsets" in err and "is inside --output" in err
    # The same checks for an incremental run, and a symbolic link is the folder it names.
    link = tmp_path / "link"
    link.symlink_to(sample / "share_state")
    err = refused(
        capsys, "--share-state", share_state, "--output", str(link), "--mode", "incremental"
    )
    assert "is the same folder as --share-state" in err
    assert _listing(sample) == before
    assert not (tmp_path / "out").exists()


def _python_path(folder: Path) -> str:
    """A PYTHONPATH folder with copies of this checkout's package, pyspark and py4j (their
    Python files), for a Python run by another user: the checkout and the virtualenv may be
    in a folder that user cannot enter."""
    import py4j
    import pyspark

    folder.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "jars", "tests", "*.pyc")
    for module in (pyspark, py4j):
        shutil.copytree(Path(module.__file__).parent, folder / module.__name__, ignore=skip)
    shutil.copytree(ROOT / "sharestate", folder / "sharestate", ignore=skip)
    for copied in folder.rglob("*"):
        copied.chmod(0o755 if copied.is_dir() else 0o644)
    return str(folder)


def test_an_output_this_user_cannot_write_is_refused(tmp_path: Path) -> None:
    """Checked as an unprivileged user when the tests run as root (root writes through any
    folder's permissions), with the system's Python 3."""
    shared = Path(tempfile.mkdtemp(prefix="sharestate-misuse-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        locked = shared / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        fresh = shared / "fresh"
        fresh.mkdir()
        fresh.chmod(0o777)
        script = textwrap.dedent(
            f"""
            from sharestate.job.config import local_output_problem
            print(local_output_problem({str(locked / "out")!r}))
            print(local_output_problem({str(locked)!r}))
            print(local_output_problem({str(fresh / "out")!r}))
            """
        )
        as_root = os.geteuid() == 0
        python = shutil.which("python3", path="/usr/bin:/bin") if as_root else sys.executable
        assert python is not None
        result = subprocess.run(
            [python, "-c", script],
            capture_output=True,
            text=True,
            check=False,
            cwd=shared,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": _python_path(shared / "path")},
            user="nobody" if as_root else None,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            f"--output {locked / 'out'} cannot be created: {locked} is not writable by this user",
            f"--output {locked}: the folder is not writable by this user",
            "None",
        ]
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert local_output_problem(str(tmp_path / "new" / "out")) is None


def test_an_unknown_kafka_release_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["--share-state", "x", "--output", str(tmp_path / "o"), "--kafka-version", "9.9"]
    err = refused(capsys, *args)
    assert "--kafka-version 9.9: not a Kafka release this job knows" in err
    assert "(4.0, 4.1, 4.2, 4.3, 4.4)" in err
    assert JobConfig(share_state="x", kafka_version="4.1.2").kafka_version == "4.1.2"


def test_kafka_timeout_is_a_span(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert JobConfig(share_state="kafka://x:9092").kafka_timeout_seconds == 60.0
    assert JobConfig(share_state="x", kafka_timeout="2m").kafka_timeout_seconds == 120.0
    err = refused(
        capsys, "--share-state", "x", "--output", str(tmp_path / "o"), "--kafka-timeout", "soon"
    )
    assert "--kafka-timeout 'soon': expected a number and a unit" in err
