"""Reading the exports: a folder of Parquet files, a Delta table, or (`kafka://HOST:PORT`)
the live topic read in batch through Spark's Kafka source.

Whatever the source, it must have the schema Spark's Kafka source produces; anything else
is an `InputSchemaError` that names the missing or mistyped columns. Exports may repeat
rows (at-least-once): `count_rows` counts them and `deduplicate` drops them.

Spark's Kafka source (the consumer-based offset reader the job needs for internal topics)
polls an unreachable address, or a topic the cluster lacks, without end: `wait_for_topic`
asks the cluster for the topic first, from this process (`sharestate.io.brokers`, with the
optional confluent-kafka), within a deadline (--kafka-timeout), so that a wrong address
costs that deadline and one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import urlparse

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sharestate.backend import refused
from sharestate.errors import InputError, InputSchemaError, MissingTopicError, SparkSetupError
from sharestate.io.files import (
    DELTA_MISSING,
    detect_format,
    first_line,
    folder_hint,
    is_missing_source,
    session_settings,
    unreadable_input_error,
)

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
#: Columns of an --end-offsets table: a topic (`topic_id` and/or `topic`), partition, end offset.
END_OFFSET_COLUMNS: Final = ("topic_id", "topic", "partition", "end_offset")
#: What identifies an exported row: exports may repeat rows (at-least-once).
ROW_IDENTITY: Final = ("topic", "partition", "offset")
#: Spark's default (Admin-based) Kafka offset reader leaves internal topics out of `subscribe`
#: and `assign` (ConsumerStrategy.retrieveAllPartitions drops TopicDescription.isInternal), so a
#: read of __share_group_state or __consumer_offsets silently returns no rows. The consumer-based
#: reader this setting selects reads them (checked against a Kafka 4.4.0 broker, Spark 4.2.0).
KAFKA_OFFSET_FETCHING_CONF: Final = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
#: How long a kafka:// input's broker has to answer when the caller gives no --kafka-timeout.
KAFKA_TIMEOUT_SECONDS: Final = 60.0


@dataclass(frozen=True)
class RowCounts:
    """An export's rows, and how many repeat an earlier row's identity (ROW_IDENTITY)."""

    read: int
    duplicates: int


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


def kafka_bootstrap(uri: str) -> str:
    """The bootstrap servers of a `kafka://HOST:PORT[,HOST:PORT...]` input."""
    parsed = urlparse(uri)
    if not parsed.netloc:
        raise InputError(f"{uri}: expected kafka://HOST:PORT[,HOST:PORT...]")
    return parsed.netloc


def wait_for_topic(spark: SparkSession, uri: str, topic: str, timeout_seconds: float) -> None:
    """Return when the cluster of the `kafka://` input `uri` describes `topic`; else an
    `InputError` naming the address, after at most `timeout_seconds` (--kafka-timeout).
    Asked from this process (`sharestate.io.brokers`: no JVM, so a Spark Connect session
    asks the same way)."""
    from sharestate.io.brokers import (
        BrokerError,
        KafkaClientMissingError,
        KafkaUnreachableError,
        UnknownTopicError,
        topic_partitions,
    )

    bootstrap = kafka_bootstrap(uri)
    try:
        topic_partitions(bootstrap, topic, timeout_seconds)
    except UnknownTopicError:
        raise MissingTopicError(
            f"{uri}: the Kafka cluster at {bootstrap} has no topic {topic}"
        ) from None
    except KafkaUnreachableError:
        raise InputError(
            f"{uri}: no Kafka broker answered at {bootstrap} within "
            f"{timeout_seconds:g} s (--kafka-timeout); check the address and that the "
            "broker is up and reachable from here"
        ) from None
    except KafkaClientMissingError as err:
        raise InputError(f"{uri}: {err}") from None
    except BrokerError as err:
        raise InputError(f"{uri}: cannot reach topic {topic} at {bootstrap}: {err}") from None


def _read_kafka(spark: SparkSession, uri: str, topic: str, timeout_seconds: float) -> DataFrame:
    bootstrap = kafka_bootstrap(uri)
    wait_for_topic(spark, uri, topic, timeout_seconds)
    # Spark reads the setting when the offsets are fetched, i.e. at each action; the read is
    # therefore materialised here, under the setting, which also pins one snapshot of the topic
    # ("latest" would otherwise be re-resolved by every action of the run).
    needed = f"{uri}: Spark's Kafka source reads an internal topic only with"
    with session_settings(spark, {KAFKA_OFFSET_FETCHING_CONF: "true"}, required=needed):
        try:
            rows = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                # Exports must not see aborted transactional offset commits.
                .option("kafka.isolation.level", "read_committed")
                .option("includeHeaders", "true")
                .load()
            )
            return rows.localCheckpoint(eager=True)
        except AnalysisException as err:
            if refused(err):
                raise SparkSetupError(
                    f"{uri}: this session refuses local checkpoints ({first_line(err)}), "
                    "which pin one read of the topic for the whole run; export the topic to "
                    "a table (Parquet or Delta) and give its path"
                ) from None
            raise InputError(
                f"{uri}: cannot read topic {topic} through Spark's Kafka source: {err}"
            ) from None


def read_export(
    spark: SparkSession,
    path: str,
    *,
    what: str,
    topic: str,
    input_format: str = "auto",
    kafka_timeout_seconds: float = KAFKA_TIMEOUT_SECONDS,
) -> Export:
    """Read one export (`what` names it in messages, e.g. '--share-state'); a kafka:// one
    after at most `kafka_timeout_seconds` waiting for its broker."""
    if is_kafka_uri(path):
        rows = _read_kafka(spark, path, topic, kafka_timeout_seconds)
        return Export(check_schema(rows, what, path), "kafka", path)
    fmt = detect_format(spark, path, what) if input_format == "auto" else input_format
    df = load_table(spark, path, fmt, what)
    return Export(check_schema(df, what, path), fmt, path)


def load_table(spark: SparkSession, path: str, fmt: str, what: str) -> DataFrame:
    """The table at `path`, resolved now so that a bad path fails here, naming the option."""
    try:
        df = spark.read.format(fmt).load(path)
        df.schema  # noqa: B018 - force resolution
    except Exception as err:
        if fmt == "delta" and is_missing_source(err, "delta"):
            raise SparkSetupError(f"{what} {path} is a Delta table. {DELTA_MISSING}") from None
        unreadable = unreadable_input_error(err, {what: path})
        if unreadable is not None:
            raise InputError(f"{unreadable}{folder_hint(spark, path)}") from None
        if not isinstance(err, AnalysisException):
            raise
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        hint = folder_hint(spark, path) if "UNABLE_TO_INFER_SCHEMA" in first_line else ""
        raise InputError(f"{what} {path}: cannot be read as {fmt}: {first_line}{hint}") from None
    return df


def read_end_offsets(spark: SparkSession, path: str, input_format: str = "auto") -> DataFrame:
    """The --end-offsets table (Parquet or Delta): topic_id (Kafka's printed form) and/or
    topic (name), partition, end_offset. Returns all four columns (a missing topic column is
    null) with partition int and end_offset long."""
    what = "--end-offsets"
    if is_kafka_uri(path):
        raise InputError(f"{what} {path}: expected a Parquet folder or a Delta table")
    fmt = detect_format(spark, path, what) if input_format == "auto" else input_format
    df = load_table(spark, path, fmt, what)
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


def count_rows(df: DataFrame) -> RowCounts:
    """Count `df`'s rows and its duplicates exactly, without moving the rows: each (topic,
    partition) gets one bitmap of offsets per range of 32,768 (Spark's `bitmap_*` functions),
    so only a few thousand small groups are shuffled, where counting distinct identities
    would shuffle every row's. Rows with a null offset count as one identity per (topic,
    partition), as `dropDuplicates` has them."""
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
