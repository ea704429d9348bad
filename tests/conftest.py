"""Shared fixtures: one local Spark session for the whole run, paths to test data."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import GOLDEN, ROOT

#: `make test-slow` sets it: the tests marked `slow` run only then.
SLOW = os.environ.get("SHARESTATE_SLOW") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A `slow` test (a slower variant of one `make test` runs) is skipped, saying where it
    runs, unless SHARESTATE_SLOW=1."""
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow variant: runs in `make test-slow`")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] session with the Delta and Kafka jars set-up put in .jars/."""
    os.environ["SPARK_TESTING"] = "1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from sharestate.job.session import local_session, spark_conf_files

    session = local_session(
        app_name="sharestate-tests",
        conf_file=spark_conf_files(ROOT),
        conf={
            "spark.master": "local[2]",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.driver.memory": "2g",
            # One session runs every test: an operator that sorts or aggregates takes a
            # memory page at its first row, sized from the heap (32 MiB here), and a plan of
            # many small ones (an incremental run's, interpreted) held enough of them at
            # once that a later test's broadcast found no memory. Small pages suit the
            # tests' small data.
            "spark.buffer.pageSize": "4m",
        },
        jars_dir=ROOT / ".jars",
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _forget_delta_logs() -> Iterator[None]:
    """After each test, Spark's Delta forgets the tables it read. It keeps every table's log
    and latest snapshot (their query plans with them) for an hour, and the tests make a few
    hundred tables under temporary folders: kept, they filled the one session's heap."""
    yield
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None and context._jvm is not None:
        context._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    return GOLDEN
