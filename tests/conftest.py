"""Shared fixtures: one Spark session for the whole run, paths to test data.

`SHARESTATE_SESSION` says which session the tests get: `classic` (default: a local[2]
session of this process, with the JVM jar), `connect` (a client of a local Spark Connect
server in a process of its own, with Spark's default settings and no JVM jar: only the
tests marked `connect` run), `serverless` (the same, with caching and settings refused as
Databricks serverless refuses them: only the tests marked `serverless` run).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import GOLDEN, ROOT

#: `make test-slow` sets it: the tests marked `slow` run only then.
SLOW = os.environ.get("SHARESTATE_SLOW") == "1"
#: Which session the tests run on (the module's docstring).
SESSION = os.environ.get("SHARESTATE_SESSION", "classic")
SESSIONS = ("classic", "connect", "serverless")
if SESSION not in SESSIONS:
    raise pytest.UsageError(f"SHARESTATE_SESSION={SESSION!r}: expected one of {SESSIONS}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A `slow` test (a slower variant of one `make test` runs) is skipped, saying where it
    runs, unless SHARESTATE_SLOW=1. On a Connect session only the tests marked for it are
    collected (the others run on the classic session)."""
    if SESSION != "classic":
        wanted = [item for item in items if SESSION in item.keywords]
        config.hook.pytest_deselected(items=[item for item in items if item not in wanted])
        items[:] = wanted
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow variant: runs in `make test-slow`")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The session SHARESTATE_SESSION names: classic, a local[2] session with the Delta
    and Kafka jars set-up put in .jars/ (and the JVM jar); else a Spark Connect client."""
    if SESSION != "classic":
        yield from _connect_session()
        return
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


def _connect_session() -> Iterator[object]:
    from pyspark.sql import SparkSession

    from tests.support.connect_server import ConnectServer

    server = ConnectServer(driver_memory="2g")
    os.environ["SHARESTATE_TEST_REMOTE"] = server.url
    session = SparkSession.builder.remote(server.url).getOrCreate()
    if SESSION == "serverless":
        from tests.support.serverless import refuse_like_serverless

        refuse_like_serverless()
    try:
        yield session
    finally:
        session.stop()
        server.stop()


@pytest.fixture(scope="session")
def session_kind() -> str:
    """classic, connect or serverless (SHARESTATE_SESSION)."""
    return SESSION


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
