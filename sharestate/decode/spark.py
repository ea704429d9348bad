"""Spark wrappers of the decoder: DataFrame of exported Kafka rows -> decoded DataFrames.

Decoding runs in `mapInArrow` (whole Arrow batches per Python call, see
`sharestate.decode.arrow`); there is no row-at-a-time Python UDF on this path. Share-state
rows first go through the JVM fast tier when the session has it (`sharestate.jvm`,
`DecodeShareState`): it decodes the shapes it is sure of and flags every other row, and only
the flagged rows go through Python, so quarantine reasons still come from one place. (A scalar
`arrow_udf` returning a struct measured slower here: Spark queues the other columns and then
copies the struct's fields out.) Rows that cannot be decoded come out in a quarantine
DataFrame with their bytes and reason, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Final

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type
from pyspark.sql.types import DataType

from sharestate import jvm
from sharestate.decode.arrow import decode_group_arrays, decode_share_state_arrays
from sharestate.decode.columns import (
    DECODE_INPUT_FIELDS,
    GROUP_RESULT_FIELDS,
    NEEDS_REFERENCE_FIELD,
    SHARE_STATE_RESULT_FIELDS,
)
from sharestate.decode.tables import (
    decode_batches,
    is_passthrough,
    output_schema,
)
from sharestate.kafka.records import REASON_KINDS, group_layouts, share_state_layouts
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC

#: The input columns the decode step reads, in order, and the types the JVM tier takes.
_INPUT_COLUMNS: Final = tuple(f.name for f in DECODE_INPUT_FIELDS)
_JVM_INPUT_TYPES: Final = tuple(from_arrow_type(f.type) for f in DECODE_INPUT_FIELDS)
_NEEDS_REFERENCE: Final = NEEDS_REFERENCE_FIELD.name


@dataclass(frozen=True)
class Decoded:
    """Decoded rows and quarantined rows of one export. Both are filters of `all_rows`, the
    decoder's output: persist that one to decode once however many tables are written."""

    records: DataFrame
    quarantine: DataFrame
    all_rows: DataFrame
    #: False when the JVM tier decoded: such rows kept in memory (after a shuffle) ran a local
    #: driver out of heap on large exports; `sharestate.job.pipeline` caches them on disk only.
    worth_caching: bool = True
    #: The JVM tier's hand-over of the rows it flags to the Python decoder: unpersist it with
    #: the cached rows.
    tee: jvm.Tee | None = None


def _reason_kind(reason: Column) -> Column:
    """The reason's leading words from `REASON_KINDS` (e.g. `truncated`), to group rows by."""
    kind: Column = F.lit("other")
    for word in reversed(REASON_KINDS):
        kind = F.when(reason.startswith(word), F.lit(word)).otherwise(kind)
    return kind


def spark_type(fields: list[pa.Field]) -> DataType:
    """The Spark struct type of a list of Arrow fields."""
    converted: DataType = from_arrow_type(pa.struct(fields))
    return converted


#: A JVM fast tier: selected input rows -> (its output: the output schema plus
#: `needs_reference`; the input rows it flags `needs_reference`, for Python to decode; the
#: tee that hands those over).
FastTier = Callable[[DataFrame, pa.Schema], tuple[DataFrame, DataFrame, jvm.Tee]]


def _decode(
    df: DataFrame,
    expected_topic: str,
    source: str,
    decode: Callable[[pa.Array, pa.Array], pa.StructArray],
    result_fields: list[pa.Field],
    keep_bytes: Callable[[pa.StructArray], pa.Array] | None = None,
    fast_tier: FastTier | None = None,
) -> Decoded:
    """Decode rows of `expected_topic`; quarantine failures and rows of any other topic.
    With a `fast_tier`, only the rows it flags `needs_reference` go through Python."""
    right_topic = F.coalesce(F.col("topic") == F.lit(expected_topic), F.lit(False))
    arrow_schema = output_schema(result_fields)
    body = partial(decode_batches, decode, keep_bytes, arrow_schema)
    selected = df.filter(right_topic).select(*_INPUT_COLUMNS)
    tee = None
    if fast_tier is None:
        all_rows = selected.mapInArrow(body, from_arrow_schema(arrow_schema))
    else:
        # The JVM's own rows, and the rows it flags through the Python decoder (the JVM pass
        # hands them over, see DecodeShareState.tiers). One pass with a scalar Arrow UDF
        # filling in the flagged rows measured no faster on local[2]: Spark then sends every
        # row (mostly nulls) through Python and back.
        tiered, flagged, tee = fast_tier(selected, arrow_schema)
        # Only the Python decoder fails rows: the JVM tier flags what it cannot decode. Its
        # rows say so with a literal null error, so Spark drops the JVM tier from the plan
        # of the quarantine (a filter on the error) instead of decoding every row to find
        # none there.
        jvm_rows = (
            tiered.filter(~F.col(_NEEDS_REFERENCE))
            .drop(_NEEDS_REFERENCE)
            .withColumn("decode_error", F.lit(None).cast("string"))
        )
        all_rows = jvm_rows.unionByName(flagged.mapInArrow(body, from_arrow_schema(arrow_schema)))
    reason = F.concat(
        F.lit("wrong topic: row is from topic "),
        F.coalesce(F.col("topic"), F.lit("<null>")),
        F.lit(f", but this input must hold {expected_topic}"),
    )
    wrong_topic = df.filter(~right_topic).select(
        F.lit(source).alias("source"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.col("timestamp").alias("source_timestamp"),
        "key",
        "value",
        reason.alias("reason"),
        F.lit("wrong topic").alias("reason_kind"),
    )
    ok = F.col("decode_error").isNull()
    records = all_rows.filter(ok).drop("decode_error")
    if keep_bytes is None:
        records = records.drop("key", "value")
    quarantine = all_rows.filter(~ok).select(
        F.lit(source).alias("source"),
        "source_partition",
        "source_offset",
        "source_timestamp",
        "key",
        "value",
        F.col("decode_error").alias("reason"),
        _reason_kind(F.col("decode_error")).alias("reason_kind"),
    )
    return Decoded(
        records,
        quarantine.unionByName(wrong_topic),
        all_rows,
        worth_caching=fast_tier is None,
        tee=tee,
    )


def _jvm_share_state(
    layouts: tuple[str, ...], rows: DataFrame, arrow_schema: pa.Schema
) -> tuple[DataFrame, DataFrame, jvm.Tee]:
    """The JVM fast tier (`sharestate.jvm.DecodeShareState`) over selected rows: its output
    with the `needs_reference` flag, the flagged input rows, and the tee between them."""
    schema = from_arrow_schema(arrow_schema.append(NEEDS_REFERENCE_FIELD))
    spark, csv = rows.sparkSession, ",".join(layouts)
    # Both tiers from one call: they share one RDD of the input, so the deduplication
    # shuffle, which adaptive execution runs when the plan becomes an RDD, runs once.
    (tiered, flagged), tee = jvm.call_teed(
        spark, "DecodeShareState", "tiers", rows, csv, schema.json()
    )
    return tiered, flagged, tee


def _jvm_reason_not(df: DataFrame) -> str | None:
    """Why the JVM tier cannot decode `df` in this session, or None when it can."""
    if not jvm.available(df.sparkSession):
        return jvm.MISSING
    types = {f.name: f.dataType for f in df.schema.fields}
    for name, expected in zip(_INPUT_COLUMNS, _JVM_INPUT_TYPES, strict=True):
        if types.get(name) != expected:
            got = types[name].simpleString() if name in types else "missing"
            return f"input column {name} is {got}, the JVM tier takes {expected.simpleString()}"
    return None


def _use_jvm(df: DataFrame, engine: str) -> bool:
    return jvm.choose(engine, "decode", _jvm_reason_not(df))


def decode_share_state(df: DataFrame, kafka_version: str = "auto", engine: str = "auto") -> Decoded:
    """Decode an export of `__share_group_state` (Kafka-record schema, already validated).

    `engine`: "auto" uses the JVM fast tier when the session has it, "jvm" requires it, and
    "python" decodes every row in Python. All give the same rows."""
    layouts = share_state_layouts(kafka_version)
    decode = partial(decode_share_state_arrays, layouts=layouts)
    fast_tier = partial(_jvm_share_state, layouts) if _use_jvm(df, engine) else None
    return _decode(
        df,
        SHARE_STATE_TOPIC,
        "share_state",
        decode,
        SHARE_STATE_RESULT_FIELDS,
        fast_tier=fast_tier,
    )


def decode_consumer_offsets(df: DataFrame, kafka_version: str = "auto") -> Decoded:
    """Decode an export of `__consumer_offsets`: share-group records fully; records of other
    types are classified and passed through with their key and value bytes."""
    decode = partial(decode_group_arrays, layouts=group_layouts(kafka_version))
    return _decode(
        df, CONSUMER_OFFSETS_TOPIC, "consumer_offsets", decode, GROUP_RESULT_FIELDS, is_passthrough
    )
