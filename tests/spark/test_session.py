"""The local session's driver JVM, as `local_session` starts it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sharestate.job.session import CLASS_ARCHIVE
from tests.support.paths import ROOT


def _class_counters(spark: SparkSession) -> dict[str, int]:
    """The driver JVM's class-loading counters (jcmd's PerfCounter.print)."""
    jvm: Any = spark.sparkContext._jvm
    jcmd = Path(str(jvm.System.getProperty("java.home")), "bin", "jcmd")
    printed = subprocess.run(
        [str(jcmd), str(jvm.ProcessHandle.current().pid()), "PerfCounter.print"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pairs = (line.split("=", 1) for line in printed.splitlines() if line.startswith("java.cls."))
    return {name: int(value) for name, value in pairs}


@pytest.mark.spark
def test_the_driver_maps_most_of_its_classes_from_the_set_up_archive(spark: SparkSession) -> None:
    archive = ROOT / ".jars" / CLASS_ARCHIVE
    assert archive.is_file(), f"{archive}: `make setup` writes it"
    assert f"-XX:SharedArchiveFile={archive.resolve()}" in spark.conf.get(
        "spark.driver.extraJavaOptions", ""
    )
    spark.range(10).selectExpr("sum(id)").collect()
    counters = _class_counters(spark)
    # Classes mapped from an archive. Java's own holds about 1,300 (a session without the
    # set-up's maps some 1,240); with it a new session maps over 13,000. The classes loaded
    # from class files are no measure: the session's own generated classes count there.
    assert counters["java.cls.sharedLoadedClasses"] > 5_000, counters
