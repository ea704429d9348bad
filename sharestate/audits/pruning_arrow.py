"""`pruning_cutoff`: per `__share_group_state` partition, the offset Kafka's share
coordinator would prune the log up to, from every share-partition's placements and the
exported positions (a full run, per state-topic partition), or from the stored table's
exported extents, the run's new positions and the gaps after the run (an incremental run).
Pure pyarrow and numpy: no Spark.

The table has a row per `__share_group_state` partition (a few dozen), so its sums and
joins run per partition in numpy; the placements it rolls up have a row per share-partition.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import KeyGroups, take_indices
from sharestate.audits.gaps_arrow import position_extents
from sharestate.audits.segments_arrow import PLACEMENTS_SCHEMA
from sharestate.kafka.constants import SNAPSHOT, TOMBSTONE

#: `pruning_cutoff` as the Delta table holds it.
PRUNING_SCHEMA: Final = pa.schema(
    [
        pa.field("source_partition", pa.int32()),
        pa.field("cutoff_offset", pa.int64()),
        pa.field("prunable", pa.bool_()),
        pa.field("cutoff_timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("live_share_partitions", pa.int64()),
        pa.field("tracked_share_partitions", pa.int64()),
        pa.field("untracked_live_share_partitions", pa.int64()),
        pa.field("deleted_share_partitions", pa.int64()),
        pa.field("held_by_group_id", pa.string()),
        pa.field("held_by_topic_id", pa.string()),
        pa.field("held_by_partition", pa.int32()),
        pa.field("records_before_cutoff", pa.int64()),
        pa.field("exported_records", pa.int64()),
        pa.field("first_exported_offset", pa.int64()),
        pa.field("last_exported_offset", pa.int64()),
    ]
)
_PARTITION: Final = ["source_partition"]


def cutoffs(placements: pa.Table) -> pa.Table:
    """Per `__share_group_state` partition with placements: the offset Kafka would prune up
    to and the share-partitions behind it. A share-partition is tracked
    when its latest snapshot or tombstone is a snapshot, live when its last record is not a
    tombstone; the cut-off is the lowest tracked snapshot's offset, else the partition's
    latest snapshot or tombstone's."""
    placements = placements.select(PLACEMENTS_SCHEMA.names).cast(PLACEMENTS_SCHEMA)
    placements = placements.combine_chunks()
    groups = KeyGroups(placements, _PARTITION)
    event = placements.column("last_snapshot_or_tombstone")
    event_type = pc.struct_field(event, "record_type")
    event_offset = pc.struct_field(event, "source_offset")
    last_type = pc.struct_field(placements.column("last_record"), "record_type")
    tracked = _flags(pc.equal(event_type, SNAPSHOT))
    live = _flags(pc.not_equal(last_type, TOMBSTONE))
    deleted = _flags(pc.equal(last_type, TOMBSTONE))
    # Offsets of one partition's records are unique: the lowest tracked one names its
    # share-partition alone.
    held = groups.arg_min(pc.if_else(pa.array(tracked), event_offset, None))
    latest = groups.arg_max(event_offset)
    chosen = event.take(take_indices(np.where(held >= 0, held, latest)))
    holder = placements.take(take_indices(held))
    columns = {
        "source_partition": placements.column("source_partition").take(pa.array(groups.first)),
        "cutoff_offset": pc.struct_field(chosen, "source_offset"),
        "cutoff_timestamp": pc.struct_field(chosen, "source_timestamp"),
        "live_share_partitions": groups.sum(live.astype(np.int64)),
        "tracked_share_partitions": groups.sum(tracked.astype(np.int64)),
        "untracked_live_share_partitions": groups.sum((live & ~tracked).astype(np.int64)),
        "deleted_share_partitions": groups.sum(deleted.astype(np.int64)),
        "held_by_group_id": holder.column("group_id"),
        "held_by_topic_id": holder.column("topic_id"),
        "held_by_partition": holder.column("partition"),
    }
    return pa.table(columns)


def carried_pruning_cutoff(
    placements: pa.Table, stored: pa.Table, new_positions: pa.Table, gaps: pa.Table
) -> pa.Table:
    """`pruning_cutoff` after an incremental run, without the stored records: each
    partition's exported extent is the `stored` table's widened by the `new_positions`
    (source_partition, source_offset), and its positions before the cut-off are that extent
    up to the cut-off less the offsets of the `gaps` after the run (source_partition,
    _from, _to) there: exported positions are unique per offset, so the count is exact.
    `placements`: every share-partition's, after the run."""
    extents = _extents(stored, new_positions)
    found = cutoffs(placements)
    at = _index_of(found.column("source_partition"), extents.column("source_partition"))
    joined = found.take(take_indices(at))
    columns = {n: joined.column(n) for n in found.column_names if n != "source_partition"}
    for name in columns:
        if name.endswith("_share_partitions"):
            columns[name] = pc.fill_null(columns[name], 0)
    cutoff = joined.column("cutoff_offset")
    columns["prunable"] = pc.fill_null(pc.greater(cutoff, 0), False)
    columns["records_before_cutoff"] = pa.chunked_array([_before_cutoff(extents, cutoff, gaps)])
    for name in (
        "source_partition",
        "exported_records",
        "first_exported_offset",
        "last_exported_offset",
    ):
        columns[name] = extents.column(name)
    return pa.table({name: columns[name] for name in PRUNING_SCHEMA.names}).cast(PRUNING_SCHEMA)


def _flags(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean column as numpy, null as False (a count of `when(...)` skips nulls)."""
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _extents(stored: pa.Table, new_positions: pa.Table) -> pa.Table:
    """Per partition: the exported records, first and last offset, stored and new."""
    names = [
        "source_partition",
        "exported_records",
        "first_exported_offset",
        "last_exported_offset",
    ]
    types = pa.schema([PRUNING_SCHEMA.field(n) for n in names])
    new = position_extents(new_positions).rename_columns(names)
    both = pa.concat_tables([stored.select(names).cast(types), new.cast(types)])
    return (
        both.group_by(_PARTITION, use_threads=False)
        .aggregate(
            [
                ("exported_records", "sum"),
                ("first_exported_offset", "min"),
                ("last_exported_offset", "max"),
            ]
        )
        .rename_columns(
            {
                "exported_records_sum": "exported_records",
                "first_exported_offset_min": "first_exported_offset",
                "last_exported_offset_max": "last_exported_offset",
            }
        )
        .select(names)
        .cast(types)
    )


def _index_of(keys: pa.ChunkedArray | pa.Array, wanted: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per value of `wanted`, the position of the equal value of `keys`; -1 where none."""
    found = pc.index_in(wanted, value_set=pa.chunked_array([keys]).combine_chunks())
    return np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _before_cutoff(
    extents: pa.Table, cutoff: pa.Array | pa.ChunkedArray, gaps: pa.Table
) -> np.ndarray:
    """Per partition: its exported positions below the cut-off (0 without a cut-off)."""
    low = extents.column("first_exported_offset").to_numpy()
    last = extents.column("last_exported_offset").to_numpy()
    has_cutoff = np.asarray(pc.is_valid(cutoff).to_numpy(zero_copy_only=False), dtype=bool)
    limit = np.asarray(pc.fill_null(cutoff, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    high = np.where(has_cutoff, np.minimum(limit - 1, last), last)
    missing = np.zeros(len(low), dtype=np.int64)
    at = _index_of(extents.column("source_partition"), gaps.column("source_partition"))
    inside = at >= 0
    rows = at[inside]
    starts = gaps.column("_from").to_numpy()[inside]
    ends = gaps.column("_to").to_numpy()[inside]
    overlap = np.minimum(ends, high[rows]) - np.maximum(starts, low[rows]) + 1
    np.add.at(missing, rows, np.maximum(overlap, 0))
    span = np.maximum(high - low + 1, 0)
    return np.where(has_cutoff, span - missing, 0)


def pruning_cutoff(placements: pa.Table, positions: pa.Table) -> pa.Table:
    """The pruning cut-off as a full run computes it: per partition of the exported
    `positions` (source_partition, source_offset: `findings.records.exported_positions`), how many
    there are, the first and last, and how many lie below the cut-off of `cutoffs` of
    `placements` (every share-partition's). A null partition is a group of its own, with no
    cut-off, as Spark's `groupBy` and join leave it."""
    found = cutoffs(placements.filter(pc.is_valid(placements.column("source_partition"))))
    partitions = positions.column("source_partition").combine_chunks()
    offsets = positions.column("source_offset").combine_chunks()
    cutoff = found.column("cutoff_offset").combine_chunks()
    # Each position's partition's cut-off; a count of `when(offset < cutoff)` skips nulls.
    at = _index_of(found.column("source_partition"), partitions)
    before = pc.fill_null(pc.less(offsets, pc.take(cutoff, take_indices(at))), False)
    counted = (
        pa.table(
            {
                "source_partition": partitions,
                "source_offset": offsets,
                "_before": pc.cast(before, pa.int64()),
            }
        )
        .group_by(_PARTITION, use_threads=False)
        .aggregate(
            [
                ([], "count_all"),
                ("source_offset", "min"),
                ("source_offset", "max"),
                ("_before", "sum"),
            ]
        )
    )
    joined = found.take(
        take_indices(_index_of(found.column("source_partition"), counted["source_partition"]))
    )
    columns = {n: joined.column(n) for n in found.column_names if n != "source_partition"}
    for name in columns:
        if name.endswith("_share_partitions"):
            columns[name] = pc.fill_null(columns[name], 0)
    columns["prunable"] = pc.fill_null(pc.greater(joined.column("cutoff_offset"), 0), False)
    columns["source_partition"] = counted.column("source_partition")
    columns["exported_records"] = counted.column("count_all")
    columns["first_exported_offset"] = counted.column("source_offset_min")
    columns["last_exported_offset"] = counted.column("source_offset_max")
    columns["records_before_cutoff"] = counted.column("_before_sum")
    return pa.table({name: columns[name] for name in PRUNING_SCHEMA.names}).cast(PRUNING_SCHEMA)
