"""An HDFS mini-cluster for the tests of exports and outputs on a remote file system.

Hadoop's own `MiniDFSCluster` (`hadoop-client-minicluster`, fetched at set-up into
`.test-jars/` in the release of the Hadoop client pyspark ships), started in a JVM of its
own by `tests/support/hdfs/MiniHdfs.java`, compiled here with the JDK's `javac` on first use:
a real name node and data node on loopback, which Spark reaches through `hdfs://` as it
would a cluster's.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pyspark

from tests.support.paths import ROOT

TEST_JARS: Final = ROOT / ".test-jars"
SOURCE: Final = ROOT / "tests" / "support" / "hdfs" / "MiniHdfs.java"
START_TIMEOUT_S: Final = 120.0
READY: Final = "HDFS ready at "


def minicluster_jar() -> Path | None:
    """The mini-cluster jar set-up fetched, if it did."""
    found = sorted(TEST_JARS.glob("hadoop-client-minicluster-*.jar"))
    return found[-1] if found else None


def _class_path(jar: Path) -> str:
    pyspark_jars = Path(pyspark.__file__).parent / "jars"
    return os.pathsep.join([str(jar), f"{pyspark_jars}/*"])


def _compiled(jar: Path) -> Path:
    """The launcher's classes, compiled again when its source is newer."""
    classes = TEST_JARS / "hdfs-classes"
    built = classes / "MiniHdfs.class"
    if not built.exists() or built.stat().st_mtime < SOURCE.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-cp", _class_path(jar), "-d", str(classes), str(SOURCE)],
            check=True,
            capture_output=True,
            text=True,
        )
    return classes


@contextmanager
def mini_hdfs() -> Iterator[str]:
    """A running mini-cluster's URL (`hdfs://localhost:PORT`), stopped after."""
    jar = minicluster_jar()
    assert jar is not None, "no HDFS mini-cluster jar in .test-jars/: run `make setup`"
    classes = _compiled(jar)
    base = Path(tempfile.mkdtemp(prefix="sharestate-hdfs-"))
    log = (base / "hdfs.log").open("w+")
    child = subprocess.Popen(
        [
            "java",
            "-Xmx1g",
            "-cp",
            os.pathsep.join([str(classes), _class_path(jar)]),
            "MiniHdfs",
            str(base / "data"),
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], START_TIMEOUT_S)
        line = child.stdout.readline() if ready else ""
        if not line.startswith(READY):
            log.seek(0)
            raise RuntimeError(f"the HDFS mini-cluster did not start: {line}{log.read()[-3000:]}")
        yield line[len(READY) :].strip()
    finally:
        child.kill()
        child.wait(timeout=30)
        log.close()
        shutil.rmtree(base, ignore_errors=True)
