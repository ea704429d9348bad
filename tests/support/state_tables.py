"""Small hand-made Arrow tables of share-state rows (state batches, records, histories), for
the pure tests of the audit tables."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any, Final

import pyarrow as pa

from sharestate.audits.segments_arrow import SEGMENT_KEY, SEGMENTS_SCHEMA
from sharestate.kafka.constants import SNAPSHOT, TOMBSTONE, UPDATE

LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1
TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
BATCH: Final = pa.struct(
    [
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("delivery_state", pa.int32()),
        ("delivery_count", pa.int32()),
    ]
)
BATCHES: Final = pa.list_(BATCH)
KEY_FIELDS: Final = [
    ("group_id", pa.string()),
    ("topic_id", pa.string()),
    ("partition", pa.int32()),
]


def batch(
    first: int | None, last: int | None, state: int | None, count: int | None
) -> dict[str, Any]:
    """A state batch (`state_batches` element)."""
    return {
        "first_offset": first,
        "last_offset": last,
        "delivery_state": state,
        "delivery_count": count,
    }


def at(seconds: int) -> datetime:
    """A record's timestamp, `seconds` after a fixed instant."""
    return datetime.fromtimestamp(1_700_000_000 + seconds, UTC)


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """Every row, in an order that does not depend on the table's (`repr` orders any row,
    nulls, lists and structs included)."""
    return sorted(table.to_pylist(), key=repr)


#: `share_partition_history`'s columns the segments read.
HISTORY_SCHEMA: Final = pa.schema(
    [SEGMENTS_SCHEMA.field(name) for name in SEGMENT_KEY]
    + [
        pa.field("source_offset", pa.int64()),
        pa.field("source_timestamp", TIMESTAMP),
        pa.field("record_type", pa.string()),
    ]
)


def random_history(rng: random.Random) -> pa.Table:
    """Records of a few share-partitions (of group "g", topic "t") on three state-topic
    partitions (a share-partition's record on another one now and then), in log order per
    partition; a snapshot or tombstone starts a share-partition's next segment."""
    records = []
    segment: dict[int, int] = {}
    next_offset = dict.fromkeys(range(3), 0)
    for _ in range(rng.randint(1, 60)):
        partition = rng.randrange(6)
        source = partition % 3 if rng.random() < 0.9 else rng.randrange(3)
        offset = next_offset[source] + rng.randint(0, 2)
        next_offset[source] = offset + 1
        kind = rng.choice([SNAPSHOT, UPDATE, UPDATE, TOMBSTONE])
        if kind != UPDATE:
            segment[partition] = segment.get(partition, 0) + 1
        records.append(
            {
                "group_id": "g",
                "topic_id": "t",
                "partition": partition,
                "segment": segment.get(partition, 0),
                "source_partition": source,
                "source_offset": offset,
                "source_timestamp": at(offset),
                "record_type": kind,
            }
        )
    return pa.Table.from_pylist(records, schema=HISTORY_SCHEMA)
