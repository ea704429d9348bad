"""The only module that touches storage: reading exports, writing tables.

An export is a folder of Parquet files, a Delta table, or (`kafka://HOST:PORT`) the live
topic read in batch through Spark's Kafka source. Whatever the source, it must have the
schema Spark's Kafka source produces; anything else is an `InputSchemaError` that names the
missing or mistyped columns.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sharestate.errors import InputError, InputSchemaError, SparkSetupError

#: Column -> accepted types (the first is the contract's; integer widths are widened).
REQUIRED_COLUMNS: Final[dict[str, tuple[type[T.DataType], ...]]] = {
    "key": (T.BinaryType,),
    "value": (T.BinaryType,),
    "topic": (T.StringType,),
    "partition": (T.IntegerType, T.ShortType, T.ByteType),
    "offset": (T.LongType, T.IntegerType),
    "timestamp": (T.TimestampType, T.TimestampNTZType),
}
_CAST_TO: Final = {
    "partition": T.IntegerType(),
    "offset": T.LongType(),
    "timestamp": T.TimestampType(),
}
KAFKA_SCHEME: Final = "kafka"


@dataclass(frozen=True)
class Export:
    """An export read and checked: its rows, deduplicated, and what was found on the way."""

    rows: DataFrame
    format: str
    path: str
    #: `--mode incremental`: the rows an earlier run processed (not read again).
    already_processed: DataFrame | None = None
    #: `count_rows(rows)`, once counted.
    counts: RowCounts | None = None


def is_kafka_uri(path: str) -> bool:
    return urlparse(path).scheme == KAFKA_SCHEME


class _Folders:
    """What the input checks ask of a file system: whether a path exists, and a folder's
    entries. Local paths through `os`, others through Hadoop's FileSystem (classic Spark);
    with neither (Spark Connect and a remote path) `usable` is False."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        parsed = urlparse(path)
        self.local = parsed.scheme in ("", "file")
        self._fs: Any = None
        self._path: Any = None
        if not self.local:
            try:
                self._fs, self._path = _hadoop(spark, path)
            except Exception:  # Spark Connect has no JVM handle
                self._fs = None

    @property
    def usable(self) -> bool:
        return self.local or self._fs is not None

    def exists(self, path: str) -> bool:
        if self.local:
            return os.path.exists(_local_path(path))
        return bool(self._fs.exists(self._path(path)))

    def folders(self, path: str) -> list[str]:
        """The sub-folders of `path`, as paths, sorted."""
        if self.local:
            local = _local_path(path)
            if not os.path.isdir(local):
                return []
            return sorted(
                os.path.join(path, name)
                for name in os.listdir(local)
                if os.path.isdir(os.path.join(local, name))
            )
        statuses = self._fs.listStatus(self._path(path))
        return sorted(str(status.getPath()) for status in statuses if status.isDirectory())

    def files(self, path: str) -> list[str]:
        """The names of the files directly in `path`."""
        if self.local:
            local = _local_path(path)
            return [n for n in os.listdir(local) if os.path.isfile(os.path.join(local, n))]
        statuses = self._fs.listStatus(self._path(path))
        return [status.getPath().getName() for status in statuses if status.isFile()]


def _local_path(path: str) -> str:
    """A local path or `file:` URI as a path `os` takes."""
    parsed = urlparse(path)
    return parsed.path if parsed.scheme == "file" else path


def _parent(path: str) -> str | None:
    trimmed = path.rstrip("/")
    parsed = urlparse(trimmed)
    head, _, tail = trimmed.rpartition("/")
    if not tail or not head or (parsed.scheme and head.endswith(":/")) or head.endswith("//"):
        return None
    return head


def _enclosing_delta_table(folders: _Folders, path: str) -> str | None:
    """The Delta table `path` lies inside (its data files or `_delta_log`), if any."""
    current = path.rstrip("/")
    if current.endswith("/_delta_log"):
        return _parent(current)
    parent = _parent(current)
    while parent is not None:
        if folders.exists(parent + "/_delta_log"):
            return parent
        parent = _parent(parent)
    return None


def detect_format(spark: SparkSession, path: str, what: str = "") -> str:
    """`delta` when the path holds a `_delta_log/`, else `parquet`. A path inside a Delta
    table is an `InputError` naming the table: its Parquet files include ones the table no
    longer holds, so read as a folder of Parquet they would give wrong rows."""
    named = f"{what} " if what else ""
    folders = _Folders(spark, path)
    if folders.usable:
        if not folders.exists(path):
            raise InputError(f"{named}{path}: no such file or directory")
        if folders.exists(path.rstrip("/") + "/_delta_log"):
            return "delta"
        table = _enclosing_delta_table(folders, path)
        if table is not None:
            raise InputError(
                f"{named}{path} is inside the Delta table {table}: give the table's own path "
                f"({table}); its files alone include rows the table has removed"
            )
        return "parquet"
    try:  # No file-system handle: ask Delta itself.
        spark.read.format("delta").load(path).schema  # noqa: B018 - probe only
        return "delta"
    except AnalysisException:
        return "parquet"


def _folder_hint(spark: SparkSession, path: str) -> str:
    """For a folder with no data of its own: the tables in its sub-folders, to point at."""
    folders = _Folders(spark, path)
    if not folders.usable:
        return ""
    try:
        children = folders.folders(path)
        delta = [c for c in children if folders.exists(c + "/_delta_log")]
        parquet = [
            c
            for c in children
            if c not in delta and any(n.endswith(".parquet") for n in folders.files(c))
        ]
    except Exception:  # a hint only: never hide the error it explains
        return ""
    found = [f"{c} (Delta)" for c in delta] + [f"{c} (Parquet)" for c in parquet]
    if not found:
        return ""
    shown = ", ".join(found[:_HINTED_FOLDERS])
    more = f" and {len(found) - _HINTED_FOLDERS} more" if len(found) > _HINTED_FOLDERS else ""
    return f". Sub-folders hold tables: {shown}{more}; give the path of one of those"


#: How many sub-folders a hint names.
_HINTED_FOLDERS: Final = 3


#: Spark's error when a task, or the schema inference, cannot read one input file.
_FAILED_READ: Final = re.compile(
    r"\[FAILED_READ_FILE(?:\.\w+)?\] Encountered error while reading file (?P<file>\S+?)\.?(?:\s|$)"
)
_CAUSE: Final = re.compile(r"^Caused by: (?:[\w.$]+(?:Exception|Error): )?(?P<message>.*)$")


@dataclass(frozen=True)
class UnreadableFile:
    """An input file Spark failed to read, and why (the first underlying cause)."""

    file: str
    cause: str


def unreadable_file(err: BaseException) -> UnreadableFile | None:
    """The file named by Spark's FAILED_READ_FILE error in `err`, if that is what it is."""
    text = str(err)
    found = _FAILED_READ.search(text)
    if found is None:
        return None
    file = found.group("file")
    causes = [m.group("message").strip() for m in map(_CAUSE.match, text.splitlines()) if m]
    cause = causes[0] if causes else ""
    # Parquet's messages start with the file's name, which the error already gives.
    return UnreadableFile(file, "it" + cause[len(file) :] if cause.startswith(file) else cause)


def _comparable(path: str) -> str:
    return _local_path(path).rstrip("/") + "/"


def unreadable_input_error(
    err: BaseException, inputs: Mapping[str, str | None]
) -> InputError | None:
    """`err` as a one-line `InputError` when Spark failed to read a file of one of `inputs`
    (option -> path; a file under none of them is named on its own)."""
    unreadable = unreadable_file(err)
    if unreadable is None:
        return None
    owner = next(
        (
            f"{what} {path}: "
            for what, path in inputs.items()
            if path and _comparable(unreadable.file).startswith(_comparable(path))
        ),
        "",
    )
    cause = f": {unreadable.cause}" if unreadable.cause else ""
    return InputError(
        f"{owner}cannot read the file {unreadable.file}{cause}. Every file under the path is "
        "read as part of it: re-export or remove that file, or give a folder that holds "
        "the export alone"
    )


def check_schema(df: DataFrame, what: str, path: str) -> DataFrame:
    """Validate the Kafka-record schema and normalise integer widths; raise naming every
    missing or mistyped column."""
    types = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in REQUIRED_COLUMNS if c not in types]
    mistyped = [
        f"{c} is {types[c].simpleString()}, expected {REQUIRED_COLUMNS[c][0]().simpleString()}"
        for c in REQUIRED_COLUMNS
        if c in types and not isinstance(types[c], REQUIRED_COLUMNS[c])
    ]
    if missing or mistyped:
        problems = []
        if missing:
            problems.append("missing column(s) " + ", ".join(missing))
        if mistyped:
            problems.append("; ".join(mistyped))
        raise InputSchemaError(
            f"{what} {path} does not have the Kafka-record schema (key binary, value binary, "
            f"topic string, partition int, offset long, timestamp timestamp): {'; '.join(problems)}"
        )
    for column, target in _CAST_TO.items():
        if types[column] != target:
            df = df.withColumn(column, F.col(column).cast(target))
    return df


#: Spark's default (Admin-based) Kafka offset reader leaves internal topics out of `subscribe`
#: and `assign` (ConsumerStrategy.retrieveAllPartitions drops TopicDescription.isInternal), so a
#: read of __share_group_state or __consumer_offsets silently returns no rows. The consumer-based
#: reader this setting selects reads them (checked against a Kafka 4.4.0 broker, Spark 4.2.0).
KAFKA_OFFSET_FETCHING_CONF: Final = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"


def _read_kafka(spark: SparkSession, uri: str, topic: str) -> DataFrame:
    parsed = urlparse(uri)
    if not parsed.netloc:
        raise InputError(f"{uri}: expected kafka://HOST:PORT[,HOST:PORT...]")
    # Spark reads the setting when the offsets are fetched, i.e. at each action; the read is
    # therefore materialised here, under the setting, which also pins one snapshot of the topic
    # ("latest" would otherwise be re-resolved by every action of the run).
    previous = spark.conf.get(KAFKA_OFFSET_FETCHING_CONF, None)
    spark.conf.set(KAFKA_OFFSET_FETCHING_CONF, "true")
    try:
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", parsed.netloc)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            # Exports must not see aborted transactional offset commits.
            .option("kafka.isolation.level", "read_committed")
            .option("includeHeaders", "true")
            .load()
            .localCheckpoint(eager=True)
        )
    except AnalysisException as err:
        raise InputError(
            f"{uri}: cannot read topic {topic} through Spark's Kafka source: {err}"
        ) from None
    finally:
        if previous is None:
            spark.conf.unset(KAFKA_OFFSET_FETCHING_CONF)
        else:
            spark.conf.set(KAFKA_OFFSET_FETCHING_CONF, previous)


def read_export(
    spark: SparkSession, path: str, *, what: str, topic: str, input_format: str = "auto"
) -> Export:
    """Read one export (`what` names it in messages, e.g. '--share-state')."""
    if is_kafka_uri(path):
        return Export(check_schema(_read_kafka(spark, path, topic), what, path), "kafka", path)
    fmt = detect_format(spark, path, what) if input_format == "auto" else input_format
    df = _load(spark, path, fmt, what)
    return Export(check_schema(df, what, path), fmt, path)


@contextmanager
def unreadable_files_named(inputs: Mapping[str, str | None]) -> Iterator[None]:
    """Turn Spark's failure to read a file of one of `inputs` (option -> path), whichever
    action meets it, into a one-line `InputError` naming the file and the option."""
    try:
        yield
    except Exception as err:
        unreadable = unreadable_input_error(err, inputs)
        if unreadable is None:
            raise
        raise unreadable from None


def _load(spark: SparkSession, path: str, fmt: str, what: str) -> DataFrame:
    """The table at `path`, resolved now so that a bad path fails here, naming the option."""
    try:
        df = spark.read.format(fmt).load(path)
        df.schema  # noqa: B018 - force resolution
    except Exception as err:
        if fmt == "delta" and _is_missing_source(err, "delta"):
            raise SparkSetupError(f"{what} {path} is a Delta table. {_DELTA_MISSING}") from None
        unreadable = unreadable_input_error(err, {what: path})
        if unreadable is not None:
            raise InputError(f"{unreadable}{_folder_hint(spark, path)}") from None
        if not isinstance(err, AnalysisException):
            raise
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        hint = _folder_hint(spark, path) if "UNABLE_TO_INFER_SCHEMA" in first_line else ""
        raise InputError(f"{what} {path}: cannot be read as {fmt}: {first_line}{hint}") from None
    return df


#: Columns of an --end-offsets table: a topic (`topic_id` and/or `topic`), partition, end offset.
END_OFFSET_COLUMNS: Final = ("topic_id", "topic", "partition", "end_offset")


def read_end_offsets(spark: SparkSession, path: str, input_format: str = "auto") -> DataFrame:
    """The --end-offsets table (Parquet or Delta): topic_id (Kafka's printed form) and/or
    topic (name), partition, end_offset. Returns all four columns (a missing topic column is
    null) with partition int and end_offset long."""
    what = "--end-offsets"
    if is_kafka_uri(path):
        raise InputError(f"{what} {path}: expected a Parquet folder or a Delta table")
    fmt = detect_format(spark, path, what) if input_format == "auto" else input_format
    df = _load(spark, path, fmt, what)
    types = {f.name: f.dataType for f in df.schema.fields}
    problems = [f"missing column {c}" for c in ("partition", "end_offset") if c not in types]
    if "topic_id" not in types and "topic" not in types:
        problems.append("missing column topic_id or topic (one of them is needed)")
    integral = (T.IntegerType, T.LongType, T.ShortType, T.ByteType)
    for column in ("partition", "end_offset"):
        if column in types and not isinstance(types[column], integral):
            problems.append(f"{column} is {types[column].simpleString()}, expected an integer")
    for column in ("topic_id", "topic"):
        if column in types and not isinstance(types[column], T.StringType):
            problems.append(f"{column} is {types[column].simpleString()}, expected string")
    if problems:
        raise InputSchemaError(
            f"{what} {path} needs columns topic_id (or topic), partition, end_offset: "
            + "; ".join(problems)
        )
    return df.select(
        *[
            (F.col(c) if c in types else F.lit(None)).cast("string").alias(c)
            for c in ("topic_id", "topic")
        ],
        F.col("partition").cast("int").alias("partition"),
        F.col("end_offset").cast("long").alias("end_offset"),
    )


#: What identifies an exported row: exports may repeat rows (at-least-once).
ROW_IDENTITY: Final = ("topic", "partition", "offset")


@dataclass(frozen=True)
class RowCounts:
    """An export's rows, and how many repeat an earlier row's identity (ROW_IDENTITY)."""

    read: int
    duplicates: int


def count_rows(df: DataFrame) -> RowCounts:
    """Count `df`'s rows and its duplicates exactly, without moving the rows: each (topic,
    partition) gets one bitmap of offsets per range of 32,768 (Spark's `bitmap_*` functions),
    so only a few thousand small groups are shuffled (on 10M rows: 4 s, where counting
    distinct identities took 12 s). Rows with a null offset count as one identity per
    (topic, partition), as `dropDuplicates` has them."""
    bucket = F.expr("bitmap_bucket_number(offset)")
    groups = df.groupBy("topic", "partition", bucket.alias("offset_bucket")).agg(
        F.expr("bitmap_construct_agg(bitmap_bit_position(offset))").alias("offsets"),
        F.count(F.lit(1)).alias("rows"),
    )
    distinct_in_group = F.when(F.col("offset_bucket").isNull(), F.lit(1)).otherwise(
        F.expr("bitmap_count(offsets)")
    )
    totals = groups.agg(
        F.sum("rows").alias("read"), F.sum(distinct_in_group).alias("distinct")
    ).first()
    read = int(totals["read"] or 0) if totals else 0
    distinct = int(totals["distinct"] or 0) if totals else 0
    return RowCounts(read=read, duplicates=read - distinct)


def deduplicate(df: DataFrame, counts: RowCounts | None = None) -> DataFrame:
    """One row per (topic, partition, offset). With `counts` (`count_rows(df)`) showing no
    duplicates, `df` itself: the usual export then costs no shuffle of its rows."""
    if counts is not None and counts.duplicates == 0:
        return df
    return df.dropDuplicates(list(ROW_IDENTITY))


_DELTA_MISSING: Final = (
    "Delta Lake is not available in this Spark session: add the jar "
    "io.delta:delta-spark_4.2_2.13:4.4.0 (spark-submit --jars/--packages; `make setup` puts it "
    "in .jars/ for local runs), or use parquet"
)


def _is_missing_source(err: Exception, fmt: str) -> bool:
    text = str(err)
    return "DATA_SOURCE_NOT_FOUND" in text or f"Failed to find the data source: {fmt}" in text


@dataclass(frozen=True)
class Written:
    """What one `write_table` call wrote."""

    rows: int | None  # rows written (None: Delta kept no metrics for the commit)
    version: int | None  # the Delta commit it made; None for Parquet


def write_table(
    df: DataFrame,
    path: str,
    output_format: str,
    *,
    replace_where: str | None = None,
    append: bool = False,
    stats_columns: Sequence[str] | None = None,
    keep_previous: bool = False,
) -> Written:
    """Replace the table at `path` (or, with `replace_where`, the Delta rows matching it; or,
    with `append`, add the rows to the Delta table), and say how many rows it wrote.

    Readers never see a half-written table: a Delta write is one atomic commit (and the
    previous version stays readable by time travel); Parquet is written beside the table
    and swapped in by two renames. `keep_previous`: the previous Parquet table stays beside
    the new one until `keep_writes` drops it or `undo_writes` puts it back.

    `stats_columns`: a Delta table this write creates keeps file statistics on these
    columns only (`delta.dataSkippingStatsColumns`); Delta applies table properties given
    to a writer only when it creates the table, so an existing table keeps its own."""
    if append and replace_where is not None:
        raise ValueError("append and replace_where exclude each other")
    if output_format == "delta":
        writer = df.write.format("delta").mode("append" if append else "overwrite")
        if stats_columns:
            writer = writer.option("delta.dataSkippingStatsColumns", ",".join(stats_columns))
        if replace_where is not None:
            writer = writer.option("replaceWhere", replace_where)
        elif not append:
            writer = writer.option("overwriteSchema", "true")
        try:
            writer.save(path)
        except Exception as err:
            if _is_missing_source(err, "delta"):
                raise SparkSetupError(f"--output-format delta: {_DELTA_MISSING}") from None
            raise
        # The commit's own metrics: counting the DataFrame would compute it a second time.
        version, metrics = _last_commit(df.sparkSession, path)
        rows = metrics.get("numOutputRows")
        return Written(int(rows) if rows is not None else None, version)
    if replace_where is not None or append:
        raise ValueError("replace_where and append need a Delta table")
    _write_parquet_swapped(df, path, keep_previous)
    # Counting a Parquet table reads its files' footers only.
    return Written(df.sparkSession.read.parquet(path).count(), None)


def _hadoop(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """Hadoop's FileSystem for `path`, and a factory of its Path objects."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    make_path = jvm.org.apache.hadoop.fs.Path
    return make_path(path).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), make_path


def _previous_copy(path: str) -> str:
    """Where a Parquet table's previous version waits until the run that replaced it ends."""
    return path.rstrip("/") + ".sharestate-old"


def _write_parquet_swapped(df: DataFrame, path: str, keep_previous: bool) -> None:
    spark = df.sparkSession
    fs, make_path = _hadoop(spark, path)
    hadoop_path = make_path(path)
    staged = make_path(path.rstrip("/") + ".sharestate-new")
    retired = make_path(_previous_copy(path))
    fs.delete(staged, True)
    df.write.mode("overwrite").parquet(staged.toString())
    fs.delete(retired, True)
    if fs.exists(hadoop_path) and not fs.rename(hadoop_path, retired):
        raise InputError(f"{path}: cannot move the previous table aside")
    if not fs.rename(staged, hadoop_path):
        fs.rename(retired, hadoop_path)
        raise InputError(f"{path}: cannot move the new table into place")
    if not keep_previous:
        fs.delete(retired, True)


def keep_writes(spark: SparkSession, written: Mapping[str, Written], output_format: str) -> None:
    """A run that replaced the tables at `written`'s paths (`keep_previous`) has ended well:
    drop the previous Parquet tables kept for `undo_writes` (Delta keeps its versions)."""
    if output_format != "parquet":
        return
    for path in written:
        fs, make_path = _hadoop(spark, path)
        fs.delete(make_path(_previous_copy(path)), True)


def undo_writes(spark: SparkSession, written: Mapping[str, Written], output_format: str) -> None:
    """Put back the tables a failed run replaced (path -> what it wrote there): a Delta table
    is restored to the version before the run's commit (a new commit, so the run's own stays
    in the history), a Parquet table gets its previous files back; a table the run created
    is removed."""
    for path, wrote in reversed(list(written.items())):
        fs, make_path = _hadoop(spark, path)
        if output_format == "delta":
            if wrote.version is None:
                continue
            if wrote.version == 0:
                fs.delete(make_path(path), True)
                continue
            table = _delta_table(path)
            spark.sql(f"RESTORE TABLE {table} TO VERSION AS OF {wrote.version - 1}")
            continue
        previous = make_path(_previous_copy(path))
        fs.delete(make_path(path), True)
        if fs.exists(previous):
            fs.rename(previous, make_path(path))


def read_table(
    spark: SparkSession, path: str, output_format: str, version: int | None = None
) -> DataFrame | None:
    """A table the job wrote earlier (a Delta `version` of it), or None if there is none."""
    reader = spark.read.format(output_format)
    if version is not None:
        reader = reader.option("versionAsOf", version)
    try:
        return reader.load(path)
    except AnalysisException as err:
        if (
            "PATH_NOT_FOUND" in str(err)
            or "DELTA_TABLE_NOT_FOUND" in str(err)
            or ("is not a Delta table" in str(err))
        ):
            return None
        raise


def delta_version(spark: SparkSession, path: str) -> int:
    """The latest commit version of the Delta table at `path`."""
    return _last_commit(spark, path)[0]


def _delta_table(path: str) -> str:
    """The Delta table at `path` as SQL names it (delta.`path` wants an absolute path)."""
    return f"delta.`{os.path.abspath(path) if urlparse(path).scheme == '' else path}`"


def _last_commit(spark: SparkSession, path: str) -> tuple[int, dict[str, str]]:
    """The latest commit of the Delta table at `path`: its version and operation metrics."""
    row = spark.sql(f"DESCRIBE HISTORY {_delta_table(path)} LIMIT 1").collect()[0]
    return int(row["version"]), dict(row["operationMetrics"] or {})
