"""The only module that touches storage: reading exports, writing tables.

An export is a folder of Parquet files, a Delta table, or (`kafka://HOST:PORT`) the live
topic read in batch through Spark's Kafka source. Whatever the source, it must have the
schema Spark's Kafka source produces; anything else is an `InputSchemaError` that names the
missing or mistyped columns.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
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


def detect_format(spark: SparkSession, path: str) -> str:
    """`delta` when the path holds a `_delta_log/`, else `parquet`."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        local = parsed.path if parsed.scheme == "file" else path
        if not os.path.exists(local):
            raise InputError(f"{path}: no such file or directory")
        return "delta" if os.path.isdir(os.path.join(local, "_delta_log")) else "parquet"
    # Remote file systems: ask Hadoop through the JVM (classic Spark), else try Delta.
    try:
        context = spark.sparkContext
        jvm, jsc = context._jvm, context._jsc
        if jvm is None or jsc is None:
            raise RuntimeError("no JVM")
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path.rstrip("/") + "/_delta_log")
        fs = hadoop_path.getFileSystem(jsc.hadoopConfiguration())
        return "delta" if fs.exists(hadoop_path) else "parquet"
    except Exception:  # Spark Connect has no JVM handle
        try:
            spark.read.format("delta").load(path).schema  # noqa: B018 - probe only
            return "delta"
        except AnalysisException:
            return "parquet"


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
    fmt = detect_format(spark, path) if input_format == "auto" else input_format
    df = _load(spark, path, fmt, what)
    return Export(check_schema(df, what, path), fmt, path)


def _load(spark: SparkSession, path: str, fmt: str, what: str) -> DataFrame:
    """The table at `path`, resolved now so that a bad path fails here, naming the option."""
    try:
        df = spark.read.format(fmt).load(path)
        df.schema  # noqa: B018 - force resolution
    except Exception as err:
        if fmt == "delta" and _is_missing_source(err, "delta"):
            raise SparkSetupError(f"{what} {path} is a Delta table. {_DELTA_MISSING}") from None
        if not isinstance(err, AnalysisException):
            raise
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"{what} {path}: cannot be read as {fmt}: {first_line}") from None
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
    fmt = detect_format(spark, path) if input_format == "auto" else input_format
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
) -> Written:
    """Replace the table at `path` (or, with `replace_where`, the Delta rows matching it; or,
    with `append`, add the rows to the Delta table), and say how many rows it wrote.

    Readers never see a half-written table: a Delta write is one atomic commit (and the
    previous version stays readable by time travel); Parquet is written beside the table
    and swapped in by two renames.

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
    _write_parquet_swapped(df, path)
    # Counting a Parquet table reads its files' footers only.
    return Written(df.sparkSession.read.parquet(path).count(), None)


def _write_parquet_swapped(df: DataFrame, path: str) -> None:
    spark = df.sparkSession
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    staged = jvm.org.apache.hadoop.fs.Path(path.rstrip("/") + ".sharestate-new")
    retired = jvm.org.apache.hadoop.fs.Path(path.rstrip("/") + ".sharestate-old")
    fs.delete(staged, True)
    df.write.mode("overwrite").parquet(staged.toString())
    fs.delete(retired, True)
    if fs.exists(hadoop_path) and not fs.rename(hadoop_path, retired):
        raise InputError(f"{path}: cannot move the previous table aside")
    if not fs.rename(staged, hadoop_path):
        fs.rename(retired, hadoop_path)
        raise InputError(f"{path}: cannot move the new table into place")
    fs.delete(retired, True)


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


def _last_commit(spark: SparkSession, path: str) -> tuple[int, dict[str, str]]:
    """The latest commit of the Delta table at `path`: its version and operation metrics."""
    if urlparse(path).scheme == "":  # delta.`path` wants an absolute path
        path = os.path.abspath(path)
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0]
    return int(row["version"]), dict(row["operationMetrics"] or {})
