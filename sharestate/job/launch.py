"""What the entry points (the `sharestate` command, `jobs/replay_share_state.py` under
spark-submit) set up around a run, and nothing else does: logging, the session spark-submit
hands over, the console, one-line errors.

Library code (`sharestate.job.main`, `compute`) changes none of this: a notebook keeps its
own logging, session and console. Spark's modules load on first use: `sharestate sample`
runs without them.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, NoReturn

from sharestate.errors import RunFailed, UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG_FORMAT: Final = "%(asctime)s %(name)s %(message)s"

#: Delta Lake's session settings: without them a Delta write fails with
#: DELTA_CONFIGURE_SPARK_SESSION_WITH_EXTENSION_AND_CATALOG after the run has done its work.
DELTA_SESSION_SETTINGS: Final = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
DELTA_EXTENSION_CLASS: Final = DELTA_SESSION_SETTINGS["spark.sql.extensions"]

#: Set on the session spark-submit hands over unless the submitter set them: the job's own
#: log lines, not Spark's INFO lines nor a progress bar drawn over them. `--conf
#: spark.log.level=INFO` brings Spark's lines back.
SUBMIT_DEFAULTS: Final = {
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
}

#: Spark loggers whose console lines are noise for the job's users, and the level that keeps
#: what matters: a block the JVM fast paths hand over twice ("already exists", harmless), the
#: plan-truncation note, a released local checkpoint, and executors' stack traces of a task
#: that failed. The failure itself still reaches the run as an exception: one line when it
#: is an input's fault, else a traceback with the executor's cause.
QUIET_LOGGERS: Final = {
    "org.apache.spark.storage.BlockManager": "ERROR",
    "org.apache.spark.util.SparkStringUtils": "ERROR",
    "org.apache.spark.scheduler.TaskSetManager": "ERROR",
    "org.apache.spark.executor.Executor": "FATAL",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter": "FATAL",
    # The release of each local checkpoint a run made says its lineage is gone (by design).
    "org.apache.spark.rdd.MapPartitionsRDD": "ERROR",
    # A Kafka client retrying an address prints a warning per attempt.
    "org.apache.kafka": "ERROR",
    # Each input's stream says that adaptive execution does not apply to it (it does not
    # need it: a stream's batch is only written as it is).
    "org.apache.spark.sql.execution.streaming.runtime.ResolveWriteToStream": "ERROR",
}


def configure_logging() -> None:
    """The `sharestate` logger at INFO on stderr, as every entry point prints it."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    logging.getLogger("sharestate").setLevel(logging.INFO)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def session_defaults(conf: Mapping[str, str], delta_loadable: bool) -> dict[str, str]:
    """The settings an entry point adds to the session it builds: SUBMIT_DEFAULTS and, when
    Delta's classes are on the classpath, Delta's session settings, each only where
    `conf` (what the submitter set) has none."""
    wanted = dict(SUBMIT_DEFAULTS)
    if delta_loadable:
        wanted.update(DELTA_SESSION_SETTINGS)
    added = {key: value for key, value in wanted.items() if key not in conf}
    extensions = conf.get("spark.sql.extensions")
    if delta_loadable and extensions is not None:
        listed = [name.strip() for name in extensions.split(",") if name.strip()]
        if DELTA_EXTENSION_CLASS not in listed:  # the submitter's extensions, and Delta's
            added["spark.sql.extensions"] = ",".join([*listed, DELTA_EXTENSION_CLASS])
    return added


def _class_loadable(class_name: str) -> bool:
    from pyspark import SparkContext

    jvm: Any = SparkContext._jvm
    try:
        return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(class_name))
    except Exception:  # no JVM handle: nothing to add for it
        return False


def submitted_session(app_name: str) -> SparkSession:
    """The session for a run under spark-submit: what spark-submit configured (master, jars,
    `--conf`, properties files), plus `session_defaults` for what it left unset."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    SparkContext._ensure_initialized()  # the JVM spark-submit started, with its --jars
    submitted = dict(SparkConf().getAll())
    builder = SparkSession.builder.appName(app_name)
    for key, value in session_defaults(submitted, _class_loadable(DELTA_EXTENSION_CLASS)).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def remote_url(given: str | None) -> str | None:
    """The Spark Connect server a run goes to: `--remote`, else the SPARK_REMOTE variable
    (as PySpark itself reads it); None: a session of this process."""
    return given or os.environ.get("SPARK_REMOTE") or None


def platform_session_expected() -> bool:
    """Whether the process runs where the platform gives the session (a Databricks
    runtime: classic clusters and serverless alike), which `getOrCreate` returns."""
    return "DATABRICKS_RUNTIME_VERSION" in os.environ


def remote_session(url: str | None) -> SparkSession:
    """The session of the Spark Connect server at `url` (`sc://HOST:PORT`, or `local[N]`
    for one PySpark starts in this process); with None, the one the platform gives
    (`SparkSession.builder.getOrCreate()`). Nothing is set on it: its settings are the
    server's."""
    from pyspark.sql import SparkSession

    if url is None:
        return SparkSession.builder.getOrCreate()
    return SparkSession.builder.remote(url).getOrCreate()


def quiet_console(spark: SparkSession) -> None:
    """Raise QUIET_LOGGERS to their levels in the driver's log4j (what reaches the console);
    a Spark Connect server's log is its own."""
    from sharestate.backend import backend

    jvm: Any = backend(spark).jvm
    if jvm is None:
        return
    try:
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        levels = jvm.org.apache.logging.log4j.Level
        for name, level in QUIET_LOGGERS.items():
            configurator.setLevel(name, levels.toLevel(level))
    except Exception:  # another logging backend: its own configuration applies
        logging.getLogger("sharestate").debug("could not quiet Spark's loggers", exc_info=True)


def run_guarded(prog: str, work: Callable[[], int | None]) -> int:
    """Run `work` and return its exit code (None: 0); a `UsageError` is one line on stderr
    and exit code 2, a `RunFailed` one line and exit code 1 with the whole trace in a log
    file the line names."""
    try:
        code = work()
    except UsageError as err:
        print(f"{prog}: error: {err}", file=sys.stderr, flush=True)
        return 2
    except RunFailed as err:
        trace = _trace_file(err)
        kept = f" (the trace: {trace})" if trace else ""
        print(f"{prog}: error: {err}{kept}", file=sys.stderr, flush=True)
        return 1
    return code or 0


def _trace_file(err: BaseException) -> str | None:
    """Write `err`'s traceback, causes included, to a new file in the temporary folder."""
    import tempfile
    import traceback

    try:
        handle, path = tempfile.mkstemp(prefix="sharestate-failure-", suffix=".log")
        with os.fdopen(handle, "w") as log:
            traceback.print_exception(err, file=log)
    except OSError:
        return None
    return path


#: What a driver JVM that ran out of memory leaves in the Python process: its error, or
#: (when it died of it) a connection that no longer answers.
_OUT_OF_MEMORY_MARKS: Final = ("java.lang.OutOfMemoryError", "GC overhead limit exceeded")
_DRIVER_GONE_MARKS: Final = ("Answer from Java side is empty", "Error while sending or receiving")


def out_of_memory_cause(err: BaseException) -> str | None:
    """What ran out, if `err` (or an exception it came from) says the Spark driver ran out of
    memory or died as a driver does of it; None for any other failure."""
    seen: set[int] = set()
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    for failure in chain:
        for line in str(failure).splitlines():
            if any(mark in line for mark in _OUT_OF_MEMORY_MARKS):
                found = line.strip()
                start = found.find("java.lang.OutOfMemoryError")
                return found[start:] if start >= 0 else found
    for failure in chain:
        gone = type(failure).__name__ in {"Py4JNetworkError", "ConnectionRefusedError"}
        if gone or any(mark in str(failure) for mark in _DRIVER_GONE_MARKS):
            return "the Spark driver JVM stopped answering, as it does when it runs out of memory"
    return None


def input_bytes(paths: list[str]) -> int | None:
    """The bytes of the files under local `paths` (None when one is not local)."""
    total = 0
    for path in paths:
        if "://" in path and not path.startswith("file:"):
            return None
        folder = path.removeprefix("file:")
        if os.path.isfile(folder):
            total += os.path.getsize(folder)
            continue
        for root, _, files in os.walk(folder):
            total += sum(os.path.getsize(os.path.join(root, name)) for name in files)
    return total


def out_of_memory_message(cause: str, inputs: list[str], driver_memory: str | None) -> str:
    """The one line a run that ran out of memory ends with: what ran out, the inputs' size,
    the setting to raise."""
    size = input_bytes(inputs)
    read = f" reading {size / 2**20:,.0f} MiB of exports" if size is not None else ""
    memory = f" (now {driver_memory})" if driver_memory else ""
    return (
        f"the run ran out of memory{read}: {cause}. Raise spark.driver.memory{memory}: "
        "in a --spark-conf file or conf/spark-local.conf for the console command, "
        "--driver-memory for spark-submit, the server's or cluster's setting for a session "
        "given to the job"
    )


def exit_process(code: int) -> NoReturn:
    """End the process with `code` once its exit handlers ran and its output is flushed,
    without the interpreter's teardown: the native thread pools of delta-rs and Arrow can
    abort it after a run that succeeded ("terminate called without an active exception",
    exit -6; delta-rs issue 2184), which a scheduler reads as a failed run. A Spark driver
    JVM the process started ends when its stdin closes, as after a normal exit."""
    try:
        atexit._run_exitfuncs()
        logging.shutdown()
    finally:
        for stream in (sys.stdout, sys.stderr):
            # Closed, or a broken pipe: nothing more can be said.
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
