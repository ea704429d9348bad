"""What a run that will read and write checks first, in the Spark session it was given, so
that a cluster set up wrong costs one line (exit 2) and writes nothing: the executors'
Python, and the brokers of `kafka://` inputs.

(The options and `--output` are checked before Spark starts: `JobConfig.validate_for_run`.)
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, Final

from pyspark.sql import SparkSession

from sharestate.backend import backend
from sharestate.errors import SparkSetupError
from sharestate.io.exports import is_kafka_uri, wait_for_topic
from sharestate.job.config import JobConfig
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC

#: What the executors' Python must import: the decode and the replay run in
#: `mapInArrow` (pyarrow, numpy), and pyspark's Arrow conversions need pandas.
EXECUTOR_MODULES: Final = ("pyarrow", "numpy", "pandas")
#: How a failure to start the executors' Python shows in Spark's error.
_CANNOT_START: Final = ("Cannot run program", "different version", "No module named 'pyspark'")


def check_executor_python(spark: SparkSession) -> None:
    """One tiny Spark job (a task per default partition) in which each executor's Python
    says what of EXECUTOR_MODULES and this package it cannot import: the decode would
    otherwise die in its first task with a worker traceback. None on a local master whose
    workers run this interpreter, when it has them all."""

    # Pickled by value (a nested function), so it runs where this package is missing too.
    def probe(_: Iterable[Any]) -> Iterator[tuple[str, str, str, tuple[str, ...]]]:
        import importlib
        import platform
        import socket
        import sys

        missing = []
        for module in ("pyarrow", "numpy", "pandas", "sharestate"):
            try:
                importlib.import_module(module)
            except Exception:  # not installed, or broken: either way unusable
                missing.append(module)
        yield socket.gethostname(), sys.executable, platform.python_version(), tuple(missing)

    # Spark Connect: no RDDs; its server runs the Python it was set up with.
    if backend(spark).jvm is None:
        return
    context = spark.sparkContext
    if _workers_are_this_python(context):
        return
    tasks = max(1, context.defaultParallelism)
    try:
        found = set(context.parallelize(range(tasks), tasks).mapPartitions(probe).collect())
    except Exception as err:
        cannot_start = _python_failure(context.pythonExec, err)
        if cannot_start is None:
            raise
        raise SparkSetupError(cannot_start) from None
    missing_anywhere = {module for *_, missing in found for module in missing}
    lacking = [m for m in (*EXECUTOR_MODULES, "sharestate") if m in missing_anywhere]
    if not lacking:
        return
    host, executable, version, _ = sorted(row for row in found if row[3])[0]
    package = (
        " (this package: pass dist/sharestate.zip with --py-files)"
        if "sharestate" in lacking
        else ""
    )
    raise SparkSetupError(
        f"the executors' Python {executable} ({version}, on {host}) cannot import "
        f"{', '.join(lacking)}{package}: the job needs {', '.join(EXECUTOR_MODULES)} there; "
        "install them, or point spark.pyspark.python (PYSPARK_PYTHON) at a Python that has them"
    )


def _workers_are_this_python(context: Any) -> bool:
    """A local master whose workers run this very interpreter, which imports everything the
    probe would look for: the probe would only start Python workers to say so."""
    executable = context.pythonExec
    if not str(context.master).startswith("local") or not executable:
        return False
    if os.path.realpath(executable) != os.path.realpath(sys.executable):
        return False
    modules = (*EXECUTOR_MODULES, "sharestate")
    return all(importlib.util.find_spec(module) is not None for module in modules)


def _python_failure(executable: str | None, err: Exception) -> str | None:
    """The probe's failure as one line when the executors could not start their Python."""
    for line in str(err).splitlines():
        if any(sign in line for sign in _CANNOT_START):
            return f"the executors cannot run their Python ({executable}): {line.strip()}"
    return None


def wait_for_brokers(spark: SparkSession, config: JobConfig) -> None:
    """Each `kafka://` input's broker answers within --kafka-timeout, or one line naming
    the address (Spark's Kafka source would retry it without end)."""
    for path, topic in (
        (config.share_state, SHARE_STATE_TOPIC),
        (config.consumer_offsets, CONSUMER_OFFSETS_TOPIC),
    ):
        if path and is_kafka_uri(path):
            wait_for_topic(spark, path, topic, config.kafka_timeout_seconds)


def check_before_work(spark: SparkSession, config: JobConfig) -> None:
    """Every check of the session, cheapest first; the first problem stops the run."""
    check_executor_python(spark)
    wait_for_brokers(spark, config)
