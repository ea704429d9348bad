"""What the Spark session a run was given offers, asked in one place.

A classic session is this process's Py4J gateway to the driver JVM: the JVM fast paths
(`sharestate.jvm`), Hadoop's FileSystem and the freeing of a local checkpoint's blocks are
there. A Spark Connect session (Databricks serverless and standard access mode, Spark 4's
`spark.api.mode=connect`, `SparkSession.builder.remote(...)`) offers the DataFrame and SQL
API only, and a serverless one refuses caching and most settings too. Every part of the job
runs on the DataFrame and SQL API; what the JVM or this process's file system adds is an
accelerator, chosen here and nowhere else (`Backend`), never a requirement.

`Backend.local_files` says whether a local path (no scheme, or `file:`) names the same file
for this process and for Spark: a classic session's driver is this process; a Connect
server started here (`remote("local[...]")`) or listening on this host's loopback address
shares its file system. Elsewhere a local-looking path (a Databricks `/Volumes/...` path
seen from a laptop) is one only Spark reads and writes, through its own sources.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlparse

from pyspark.sql import SparkSession

log = logging.getLogger("sharestate")

#: Error conditions with which a session refuses a call it would otherwise run: caching
#: and settings on Databricks serverless, a static setting anywhere.
REFUSALS: Final = (
    "NOT_SUPPORTED_WITH_SERVERLESS",
    "CONFIG_NOT_AVAILABLE",
    "CANNOT_MODIFY_CONFIG",
    "CANNOT_MODIFY_STATIC_CONFIG",
)
#: Connect servers whose file system is this process's: started here, or on this host.
_LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
#: Set to 0 to treat a loopback Connect server's local paths as another machine's (the
#: paths a remote server gives: Spark reads and writes them, this process does not).
LOCAL_FILES_VARIABLE: Final = "SHARESTATE_LOCAL_FILES"


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no Py4J, no RDDs, no JVM handles)."""
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # pyspark without its Connect client: classic only
        return False
    return isinstance(spark, ConnectSession)


def _classic_jvm(spark: SparkSession) -> Any | None:
    """The Py4J view of a classic session's driver JVM."""
    try:
        context = spark.sparkContext
    except Exception:  # a session that refuses it
        return None
    return getattr(context, "_jvm", None)


def _connect_host(spark: Any) -> str | None:
    try:
        return str(spark.client.host)
    except Exception:  # an unknown client: its host is not known
        return None


@dataclass(frozen=True)
class Backend:
    """What a session offers this run (`backend(spark)`)."""

    #: A Spark Connect session.
    connect: bool
    #: The Py4J view of the driver JVM (classic sessions only).
    jvm: Any | None
    #: The JVM's JavaSparkContext (classic sessions only): its Hadoop configuration.
    java_context: Any | None
    #: A local path is the same file for this process and for Spark.
    local_files: bool

    @property
    def kind(self) -> str:
        return "Spark Connect" if self.connect else "classic"

    def is_local(self, path: str) -> bool:
        """Whether `path` is a local path this process reads and writes itself (through
        `os`, delta-rs), the same one Spark sees."""
        return self.local_files and urlparse(path).scheme in ("", "file")

    def hadoop_file_system(self, path: str) -> tuple[Any, Any] | None:
        """Hadoop's FileSystem for `path` and a factory of its Path objects; None without
        a JVM handle."""
        if self.jvm is None or self.java_context is None:
            return None
        make_path = self.jvm.org.apache.hadoop.fs.Path
        hadoop_conf = self.java_context.hadoopConfiguration()
        return make_path(path).getFileSystem(hadoop_conf), make_path


def backend(spark: SparkSession) -> Backend:
    """What `spark` offers (cheap: no Spark job, no round trip)."""
    if is_connect(spark):
        host = _connect_host(spark)
        shared = host in _LOOPBACK_HOSTS
        if os.environ.get(LOCAL_FILES_VARIABLE) == "0":
            shared = False
        return Backend(connect=True, jvm=None, java_context=None, local_files=shared)
    jvm = _classic_jvm(spark)
    java_context = spark.sparkContext._jsc if jvm is not None else None
    return Backend(connect=False, jvm=jvm, java_context=java_context, local_files=True)


def error_condition(err: BaseException) -> str | None:
    """The error condition (class) Spark gave `err`, if any."""
    for method in ("getCondition", "getErrorClass"):
        getter = getattr(err, method, None)
        if getter is None:
            continue
        try:
            condition = getter()
        except Exception:  # an exception without one
            condition = None
        if condition:
            return str(condition)
    text = str(err)
    return next((refusal for refusal in REFUSALS if refusal in text), None)


def refused(err: BaseException) -> bool:
    """Whether `err` is the session refusing a call (caching, a setting), not a failure of
    the work: the run then goes on another way."""
    condition = error_condition(err)
    return condition is not None and condition.split(".")[0] in REFUSALS


_said: set[str] = set()
_said_lock = threading.Lock()


def say_once(key: str, message: str, *args: object) -> None:
    """Log `message` at warning level the first time this process meets `key`: what a
    session cannot do is said once, not at every call."""
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    log.warning(message, *args)
