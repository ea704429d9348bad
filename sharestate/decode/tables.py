"""The decoder over Arrow tables of exported Kafka rows: what `sharestate.decode.spark` does
per batch in Spark, on whole tables, without Spark (an increment is decoded on the driver:
`sharestate.job.driver_increment`). Both share `decode_batches`, so the rows and
quarantine reasons are the same."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.decode.arrow import decode_group_arrays, decode_share_state_arrays
from sharestate.decode.columns import (
    DECODE_INPUT_FIELDS,
    GROUP_RESULT_FIELDS,
    SHARE_STATE_RESULT_FIELDS,
    decoded_output_fields,
)
from sharestate.kafka.records import REASON_KINDS, group_layouts, share_state_layouts
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC

#: The columns of the quarantine table, in order.
QUARANTINE_COLUMNS: Final = (
    "source",
    "source_partition",
    "source_offset",
    "source_timestamp",
    "key",
    "value",
    "reason",
    "reason_kind",
)
_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")


def output_schema(result_fields: list[pa.Field]) -> pa.Schema:
    """What the decode step hands back (`decoded_output_fields`)."""
    return pa.schema(decoded_output_fields(result_fields))


def decode_batches(
    decode: Callable[[pa.Array, pa.Array], pa.StructArray],
    keep_bytes: Callable[[pa.StructArray], pa.Array] | None,
    schema: pa.Schema,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Source columns pass through, one decoded field per column; the bytes are kept where
    the row failed (and where `keep_bytes` says)."""
    for batch in batches:
        key, value = batch.column("key"), batch.column("value")
        decoded = decode(key, value)
        error = decoded.field("decode_error")
        needs_bytes = pc.is_valid(error)
        if keep_bytes is not None:
            needs_bytes = pc.or_(needs_bytes, keep_bytes(decoded))
        null_bytes = pa.scalar(None, pa.binary())
        columns = [
            batch.column("partition"),
            batch.column("offset"),
            batch.column("timestamp").cast(schema.field("source_timestamp").type),
            *[decoded.field(i) for i in range(decoded.type.num_fields - 1)],
            error,
            pc.if_else(needs_bytes, key, null_bytes),
            pc.if_else(needs_bytes, value, null_bytes),
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=schema)


def reason_kinds(reasons: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each reason's leading words from `REASON_KINDS` (the first that fits), else `other`."""
    kinds = pa.array(["other"] * len(reasons), pa.string())
    for word in reversed(REASON_KINDS):
        kinds = pc.if_else(pc.fill_null(pc.starts_with(reasons, word), False), word, kinds)
    return kinds.combine_chunks() if isinstance(kinds, pa.ChunkedArray) else kinds


@dataclass(frozen=True)
class DecodedTable:
    """The decoded rows and the quarantined rows (QUARANTINE_COLUMNS) of one export's rows."""

    records: pa.Table
    quarantine: pa.Table


def _decode_table(
    rows: pa.Table,
    expected_topic: str,
    source: str,
    decode: Callable[[pa.Array, pa.Array], pa.StructArray],
    result_fields: list[pa.Field],
    keep_bytes: Callable[[pa.StructArray], pa.Array] | None = None,
) -> DecodedTable:
    """`sharestate.decode.spark._decode` on an Arrow table of Kafka-record rows: rows of
    another topic (or none) are quarantined as `wrong topic`."""
    schema = output_schema(result_fields)
    right_topic = pc.fill_null(pc.equal(rows.column("topic"), expected_topic), False)
    selected = (
        rows.filter(right_topic)
        .select([f.name for f in DECODE_INPUT_FIELDS])
        .cast(pa.schema(DECODE_INPUT_FIELDS))
        .combine_chunks()
    )
    batches = list(decode_batches(decode, keep_bytes, schema, iter(selected.to_batches())))
    decoded = pa.Table.from_batches(batches, schema=schema)
    failed = pc.is_valid(decoded.column("decode_error"))
    records = decoded.filter(pc.invert(failed)).drop_columns(["decode_error"])
    if keep_bytes is None:
        records = records.drop_columns(["key", "value"])
    bad = decoded.filter(failed)
    reasons = bad.column("decode_error")
    quarantined = pa.table(
        {
            "source": pa.array([source] * bad.num_rows, pa.string()),
            "source_partition": bad.column("source_partition"),
            "source_offset": bad.column("source_offset"),
            "source_timestamp": bad.column("source_timestamp"),
            "key": bad.column("key"),
            "value": bad.column("value"),
            "reason": reasons,
            "reason_kind": reason_kinds(reasons),
        }
    )
    other = rows.filter(pc.invert(right_topic))
    topics = pc.fill_null(other.column("topic"), "<null>")
    wrong = pa.table(
        {
            "source": pa.array([source] * other.num_rows, pa.string()),
            "source_partition": other.column("partition").cast(pa.int32()),
            "source_offset": other.column("offset").cast(pa.int64()),
            "source_timestamp": other.column("timestamp").cast(_TIMESTAMP),
            "key": other.column("key"),
            "value": other.column("value"),
            "reason": pc.binary_join_element_wise(
                "wrong topic: row is from topic ",
                topics,
                f", but this input must hold {expected_topic}",
                "",
            ),
            "reason_kind": pa.array(["wrong topic"] * other.num_rows, pa.string()),
        }
    )
    quarantine = pa.concat_tables([quarantined, wrong.cast(quarantined.schema)])
    return DecodedTable(records, quarantine)


def decode_share_state_table(rows: pa.Table, kafka_version: str = "auto") -> DecodedTable:
    """Decode rows of a `__share_group_state` export (Kafka-record columns)."""
    decode = partial(decode_share_state_arrays, layouts=share_state_layouts(kafka_version))
    return _decode_table(rows, SHARE_STATE_TOPIC, "share_state", decode, SHARE_STATE_RESULT_FIELDS)


def is_passthrough(decoded: pa.StructArray) -> pa.Array:
    """Records of types this job does not decode keep their bytes in share_group_records."""
    return pc.invert(pc.fill_null(decoded.field("is_share_record"), True))


def decode_consumer_offsets_table(rows: pa.Table, kafka_version: str = "auto") -> DecodedTable:
    """Decode rows of a `__consumer_offsets` export: share-group records fully; records of
    other types classified and passed through with their key and value bytes."""
    decode = partial(decode_group_arrays, layouts=group_layouts(kafka_version))
    return _decode_table(
        rows,
        CONSUMER_OFFSETS_TOPIC,
        "consumer_offsets",
        decode,
        GROUP_RESULT_FIELDS,
        is_passthrough,
    )
