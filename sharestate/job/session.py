"""Building a local Spark session for the command line, `make run`, tests and the benchmark.

Library code never builds a session: it takes one. This module is for entry points that
run outside `spark-submit` and outside a notebook. Under `spark-submit` (or wherever a
session already exists) the existing session is used as it is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession

from sharestate.errors import InvalidConfigError
from sharestate.io.files import session_settings

#: Where set-up puts the Delta and Kafka-connector jars (see scripts/fetch_jars.sh).
DEFAULT_JARS_DIR = ".jars"
#: The local driver JVM's class-data-sharing archive, which set-up writes into the jars
#: folder (scripts/build_class_archive.py): the classes a run loads, mapped rather than
#: loaded, parsed and verified by every new process.
CLASS_ARCHIVE = "driver-classes.jsa"
#: The driver JVM's options for a process that makes one short run (`local_settings`): Java's
#: quick compiler only, leaving the cores to the run rather than to optimizing code it does
#: not run long enough to gain from.
SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
#: Settings for any run (cluster-safe), then settings for a local session only.
JOB_SPARK_CONF = "conf/spark-job.conf"
LOCAL_SPARK_CONF = "conf/spark-local.conf"
DEFAULT_SPARK_CONFS = (JOB_SPARK_CONF, LOCAL_SPARK_CONF)


#: The Spark SQL settings the job runs with on whatever session it is given (a notebook's, a
#: Spark Connect server's, Databricks'), for the run only (`job_settings`): the runtime
#: entries of conf/spark-job.conf (why each: docs/where-time-goes.md, Spark settings). A
#: session that refuses one keeps its own value (the log says so once).
JOB_SQL_SETTINGS: Final = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "32m",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


@contextmanager
def job_settings(spark: SparkSession) -> Iterator[None]:
    """JOB_SQL_SETTINGS on `spark` for the block, the session's own values back after; a
    setting the session has already costs nothing."""
    wanted = {
        key: value for key, value in JOB_SQL_SETTINGS.items() if _current(spark, key) != value
    }
    with session_settings(spark, wanted):
        yield


def _current(spark: SparkSession, key: str) -> str | None:
    try:
        return spark.conf.get(key, None)
    except Exception:  # a session that will not say: set it
        return None


def read_spark_defaults(path: str | Path) -> dict[str, str]:
    """Parse a `spark-defaults.conf`-style file: `key value` per line, `#` comments."""
    conf: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidConfigError(f"Spark config file {path}: no such file") from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise InvalidConfigError(f"{path}:{number}: expected 'key value', got {raw!r}")
        conf[parts[0]] = parts[1].strip()
    return conf


def spark_conf_files(root: str | Path = ".") -> list[Path]:
    """The repository's Spark settings files under `root` that exist, in the order they
    apply: conf/spark-job.conf (any run), then conf/spark-local.conf (local only)."""
    return [Path(root, name) for name in DEFAULT_SPARK_CONFS if Path(root, name).is_file()]


def under_spark_submit() -> bool:
    """True when a JVM was started for us (spark-submit, pyspark shell)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _jars_folder(jars_dir: str | Path | None) -> Path:
    return Path(jars_dir or os.environ.get("SHARESTATE_JARS", DEFAULT_JARS_DIR)).resolve()


def _jars(jars_dir: str | Path | None) -> list[Path]:
    return sorted(jar.resolve() for jar in _jars_folder(jars_dir).glob("*.jar"))


def jars_class_path(jars_dir: str | Path | None = None) -> dict[str, str]:
    """The jars in `jars_dir` on the driver's class path: the class path the class archive
    is written with and used with (its classes come from there)."""
    jars = _jars(jars_dir)
    return {"spark.driver.extraClassPath": os.pathsep.join(map(str, jars))} if jars else {}


def class_archive_settings(jars_dir: str | Path | None = None) -> dict[str, str]:
    """The driver settings that start a local session's JVM with the class archive set-up
    wrote into `jars_dir` (none where it wrote none). A JVM that finds its class path, a jar
    or itself changed since the archive was written runs without it."""
    # In the folder itself: a jar there may be a link to a file elsewhere.
    archive = _jars_folder(jars_dir) / CLASS_ARCHIVE
    class_path = jars_class_path(jars_dir)
    if not archive.is_file() or not class_path:
        return {}
    return {**class_path, "spark.driver.extraJavaOptions": f"-XX:SharedArchiveFile={archive}"}


def local_settings(
    *,
    app_name: str = "sharestate",
    conf: Mapping[str, str] | None = None,
    conf_file: str | Path | Sequence[str | Path] | None = None,
    jars_dir: str | Path | None = None,
    class_archive: bool = True,
    short_run: bool = False,
) -> dict[str, str]:
    """The settings `local_session` builds a new session with. `short_run`: the driver JVM
    gets SHORT_RUN_JAVA_OPTIONS unless the settings name driver JVM options of their own."""
    settings: dict[str, str] = {"spark.master": "local[*]", "spark.app.name": app_name}
    if conf_file is None:
        files: Sequence[str | Path] = spark_conf_files()
    elif isinstance(conf_file, str | Path):
        files = [conf_file]
    else:
        files = conf_file
    for file in files:
        settings.update(read_spark_defaults(file))
    settings.update(conf or {})
    if short_run:
        settings.setdefault("spark.driver.extraJavaOptions", SHORT_RUN_JAVA_OPTIONS)
    jars = _jars(jars_dir)
    if jars:
        settings["spark.jars"] = ",".join(map(str, jars))
    # A class path of the caller's own is not the archive's: the JVM would not use it.
    if class_archive and "spark.driver.extraClassPath" not in settings:
        for key, value in class_archive_settings(jars_dir).items():
            settings[key] = f"{value} {settings[key]}" if key in settings else value
    if any(j.name.startswith("delta-spark") for j in jars):
        settings.setdefault("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        settings.setdefault(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
    return settings


def local_session(
    *,
    app_name: str = "sharestate",
    conf: Mapping[str, str] | None = None,
    conf_file: str | Path | Sequence[str | Path] | None = None,
    jars_dir: str | Path | None = None,
    class_archive: bool = True,
    short_run: bool = False,
) -> SparkSession:
    """The active session if there is one; else a new local one configured from `conf_file`
    (one file or several, applied in order; default: `spark_conf_files()` of the working
    directory), `conf`, and the jars in `jars_dir`, its driver JVM started with the class
    archive set-up wrote there (`class_archive_settings`) unless `class_archive` is False or
    the settings name a driver class path of their own; with `short_run`, the JVM options
    of a process that makes one short run (`local_settings`)."""
    active = SparkSession.getActiveSession()
    if active is not None or under_spark_submit():
        return active or SparkSession.builder.getOrCreate()
    settings = local_settings(
        app_name=app_name,
        conf=conf,
        conf_file=conf_file,
        jars_dir=jars_dir,
        class_archive=class_archive,
        short_run=short_run,
    )
    # Python workers must run the interpreter that has this package and pyarrow.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
