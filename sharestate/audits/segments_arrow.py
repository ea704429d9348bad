"""`share_partition_segments` and `share_partition_placements`: per share-partition,
segment and state-topic partition, the counts and first and last records the
per-share-partition audits read (a full run's from every history row, per share-partition;
an incremental run's merged with the stored ones). The columns and their types are the Delta
tables' (`SEGMENTS_SCHEMA`, `PLACEMENTS_SCHEMA`). Pure pyarrow and numpy: no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import KeyGroups, take_indices
from sharestate.decode.columns import KEY
from sharestate.kafka.constants import SNAPSHOT, TOMBSTONE, UPDATE

#: Columns of `share_partition_segments` that identify a row.
SEGMENT_KEY: Final = (*KEY, "segment", "source_partition")
#: Columns of `share_partition_placements` that identify a row.
PLACEMENT_KEY: Final = (*KEY, "source_partition")

_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
_RECORD: Final = pa.struct([("source_offset", pa.int64()), ("record_type", pa.string())])
_EVENT: Final = pa.struct(
    [
        ("source_offset", pa.int64()),
        ("source_timestamp", _TIMESTAMP),
        ("record_type", pa.string()),
    ]
)
_KEY_FIELDS: Final = [
    pa.field("group_id", pa.string()),
    pa.field("topic_id", pa.string()),
    pa.field("partition", pa.int32()),
]
#: `share_partition_segments` as the Delta table holds it.
SEGMENTS_SCHEMA: Final = pa.schema(
    [
        *_KEY_FIELDS,
        pa.field("segment", pa.int64()),
        pa.field("source_partition", pa.int32()),
        pa.field("records", pa.int64()),
        pa.field("updates", pa.int64()),
        pa.field("first_record", _RECORD),
        pa.field("last_record", _RECORD),
        pa.field("first_update_offset", pa.int64()),
        pa.field("last_snapshot_or_tombstone", _EVENT),
    ]
)
#: `share_partition_placements` as the Delta table holds it.
PLACEMENTS_SCHEMA: Final = pa.schema(
    [
        *_KEY_FIELDS,
        pa.field("source_partition", pa.int32()),
        pa.field("records", pa.int64()),
        pa.field("first_offset", pa.int64()),
        pa.field("last_record", _RECORD),
        pa.field("last_snapshot_or_tombstone", _EVENT),
    ]
)
#: The history columns `history_segments` reads.
HISTORY_COLUMNS: Final = (*SEGMENT_KEY, "source_offset", "source_timestamp", "record_type")


def _take(column: pa.Array | pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """`column`'s values at `rows`, null where a row is -1."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return pc.take(column, take_indices(rows))


def _struct(
    fields: dict[str, pa.Array], type_: pa.StructType, valid: np.ndarray | None
) -> pa.Array:
    """A struct of `type_` from its `fields`' columns; null where `valid` is false."""
    members = [type_.field(i) for i in range(type_.num_fields)]
    columns = [fields[member.name].cast(member.type) for member in members]
    mask = None if valid is None else pa.array(~valid)
    return pa.StructArray.from_arrays(columns, fields=members, mask=mask)


def _keys(table: pa.Table, groups: KeyGroups, keys: Sequence[str]) -> dict[str, pa.Array]:
    first = pa.array(groups.first)
    return {name: table.column(name).take(first) for name in keys}


def _empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()


def history_segments(history: pa.Table) -> pa.Table:
    """`share_partition_segments` of `history` (`share_partition_history` rows: at least
    `HISTORY_COLUMNS`): per share-partition, segment and state-topic partition, its records
    and updates, its first and last record, its first update and its latest snapshot or
    tombstone."""
    if history.num_rows == 0:
        return _empty(SEGMENTS_SCHEMA)
    history = history.select(list(HISTORY_COLUMNS)).combine_chunks()
    offsets = history.column("source_offset")
    types = history.column("record_type")
    groups = KeyGroups(history, SEGMENT_KEY, within=["source_offset"])
    is_update = pc.equal(types, UPDATE)
    update_offsets = pc.if_else(is_update, offsets, pa.nulls(len(offsets), pa.int64()))
    is_event = pc.is_in(types, pa.array([SNAPSHOT, TOMBSTONE]))
    event_offsets = pc.if_else(is_event, offsets, pa.nulls(len(offsets), pa.int64()))
    first = groups.arg_min(offsets)
    last = groups.arg_max(offsets)
    first_update = groups.arg_min(update_offsets)
    event = groups.arg_max(event_offsets)
    columns = _keys(history, groups, SEGMENT_KEY)
    columns["records"] = pa.array(groups.ends - groups.starts, pa.int64())
    columns["updates"] = pa.array(
        groups.sum(is_update.to_numpy(zero_copy_only=False).astype(np.int64)), pa.int64()
    )
    columns["first_record"] = _struct(
        {"source_offset": _take(offsets, first), "record_type": _take(types, first)},
        _RECORD,
        None,
    )
    columns["last_record"] = _struct(
        {"source_offset": _take(offsets, last), "record_type": _take(types, last)}, _RECORD, None
    )
    columns["first_update_offset"] = _take(offsets, first_update)
    columns["last_snapshot_or_tombstone"] = _struct(
        {
            "source_offset": _take(offsets, event),
            "source_timestamp": _take(history.column("source_timestamp"), event),
            "record_type": _take(types, event),
        },
        _EVENT,
        event >= 0,
    )
    return pa.table(columns).cast(SEGMENTS_SCHEMA)


def _latest_event(segments: pa.Table, groups: KeyGroups) -> tuple[pa.ChunkedArray, np.ndarray]:
    """The `last_snapshot_or_tombstone` column of rows of the segments table, and per group
    the row whose one is latest (-1 where no row has one)."""
    events = segments.column("last_snapshot_or_tombstone")
    offsets = pc.if_else(
        pc.is_valid(events),
        pc.struct_field(events, "source_offset"),
        pa.nulls(segments.num_rows, pa.int64()),
    )
    return events, groups.arg_max(offsets)


def merge_segments(stored: pa.Table, new: pa.Table) -> pa.Table:
    """Rows of `share_partition_segments` from two runs combined: a segment in both gets one
    row, each column the sum, min or max of the two."""
    both = pa.concat_tables([stored.cast(SEGMENTS_SCHEMA), new.cast(SEGMENTS_SCHEMA)])
    if both.num_rows == 0:
        return _empty(SEGMENTS_SCHEMA)
    both = both.combine_chunks()
    groups = KeyGroups(both, SEGMENT_KEY)
    first = groups.arg_min(pc.struct_field(both.column("first_record"), "source_offset"))
    last = groups.arg_max(pc.struct_field(both.column("last_record"), "source_offset"))
    events, event = _latest_event(both, groups)
    first_update = groups.arg_min(both.column("first_update_offset"))
    columns = _keys(both, groups, SEGMENT_KEY)
    for name in ("records", "updates"):
        values = both.column(name).to_numpy(zero_copy_only=False)
        columns[name] = pa.array(groups.sum(values), pa.int64())
    columns["first_record"] = _take(both.column("first_record"), first)
    columns["last_record"] = _take(both.column("last_record"), last)
    columns["first_update_offset"] = _take(both.column("first_update_offset"), first_update)
    columns["last_snapshot_or_tombstone"] = _take(events, event)
    return pa.table(columns).cast(SEGMENTS_SCHEMA)


def placements(segments: pa.Table) -> pa.Table:
    """`share_partition_placements` of `segments`: per share-partition and state-topic
    partition, its records, the offset of its first, its last record and its latest
    snapshot or tombstone."""
    if segments.num_rows == 0:
        return _empty(PLACEMENTS_SCHEMA)
    segments = segments.cast(SEGMENTS_SCHEMA).combine_chunks()
    groups = KeyGroups(segments, PLACEMENT_KEY)
    first_offsets = pc.struct_field(segments.column("first_record"), "source_offset")
    last = groups.arg_max(pc.struct_field(segments.column("last_record"), "source_offset"))
    events, event = _latest_event(segments, groups)
    columns = _keys(segments, groups, PLACEMENT_KEY)
    columns["records"] = pa.array(
        groups.sum(segments.column("records").to_numpy(zero_copy_only=False)), pa.int64()
    )
    columns["first_offset"] = _take(first_offsets, groups.arg_min(first_offsets))
    columns["last_record"] = _take(segments.column("last_record"), last)
    columns["last_snapshot_or_tombstone"] = _take(events, event)
    return pa.table(columns).cast(PLACEMENTS_SCHEMA)


#: `segment_starts`' columns (what the rules of `sharestate.audits.findings.snapshots` read).
SEGMENT_STARTS_SCHEMA: Final = pa.schema(
    [
        *_KEY_FIELDS,
        pa.field("segment", pa.int64()),
        pa.field(
            "_first",
            pa.struct(
                [
                    ("source_partition", pa.int32()),
                    ("source_offset", pa.int64()),
                    ("record_type", pa.string()),
                ]
            ),
        ),
        pa.field(
            "_first_update",
            pa.struct([("source_partition", pa.int32()), ("source_offset", pa.int64())]),
        ),
        pa.field("_updates", pa.int64()),
        pa.field("_last_segment", pa.int64()),
    ]
)


def segment_starts(segments: pa.Table) -> pa.Table:
    """Per share-partition and segment (over its state-topic partitions), from its
    `share_partition_segments` rows: its first record (`_first`: on the lowest state-topic
    partition, as a minimum of the struct orders it), its first update (`_first_update`),
    its updates (`_updates`) and the share-partition's last segment (`_last_segment`): what
    the rules of `sharestate.audits.findings.snapshots` read."""
    if segments.num_rows == 0:
        return _empty(SEGMENT_STARTS_SCHEMA)
    segments = segments.cast(SEGMENTS_SCHEMA).combine_chunks()
    key = (*KEY, "segment")
    # A segment has one row per state-topic partition: the lowest partition's row is the
    # struct minimum.
    groups = KeyGroups(segments, key, within=["source_partition"])
    source_partitions = segments.column("source_partition").cast(pa.int64())
    first = groups.arg_min(source_partitions)
    updates = segments.column("first_update_offset")
    first_update = groups.arg_min(
        pc.if_else(pc.is_valid(updates), source_partitions, pa.nulls(len(updates), pa.int64()))
    )
    first_record = segments.column("first_record")
    columns = _keys(segments, groups, key)
    columns["_first"] = _struct(
        {
            "source_partition": _take(segments.column("source_partition"), first),
            "source_offset": _take(pc.struct_field(first_record, "source_offset"), first),
            "record_type": _take(pc.struct_field(first_record, "record_type"), first),
        },
        SEGMENT_STARTS_SCHEMA.field("_first").type,
        None,
    )
    columns["_first_update"] = _struct(
        {
            "source_partition": _take(segments.column("source_partition"), first_update),
            "source_offset": _take(updates, first_update),
        },
        SEGMENT_STARTS_SCHEMA.field("_first_update").type,
        first_update >= 0,
    )
    columns["_updates"] = pa.array(
        groups.sum(segments.column("updates").to_numpy(zero_copy_only=False)), pa.int64()
    )
    starts = pa.table(columns)
    columns["_last_segment"] = pa.array(KeyGroups(starts, KEY).spread_max(starts["segment"]))
    return pa.table(columns).cast(SEGMENT_STARTS_SCHEMA)
