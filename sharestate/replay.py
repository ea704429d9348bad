"""Replay: decoded `share_state_records` -> the state Kafka's share coordinator holds.

Distributed, with nothing proportional to the data on the driver:

1. A window over each share-partition (group_id, topic_id, partition), in log order
   (source_partition, source_offset), numbers its *segments*: a snapshot replaces the state
   and a tombstone deletes it, so each starts a segment whose states do not depend on
   anything before it. Segment 0 holds records before the first snapshot the export has
   (an export that starts after Kafka pruned the log).
2. Rows are spread over tasks by (share-partition, segment) and sorted within each task;
   `mapInArrow` streams through them, folding each segment from no state with
   `sharestate.state.apply_record`. Segments are at most as long as the run of updates
   between two snapshots, so hot share-partitions spread over many tasks, and many short
   segments cost no more per record than a few long ones (a group-per-call API such as
   `applyInArrow` pays a Python call per segment: 50 times slower on Kafka's corpus).
3. The last state of each share-partition's last segment is `share_partition_state`;
   every state is a row of `share_partition_history`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, Final

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from sharestate.combiner import LATEST
from sharestate.state import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    STATE_FIELDS,
    ShareState,
    apply_record,
    effective_start_offset,
    offsets_by_state,
)
from sharestate.tables import STATE_BATCHES_TYPE

KEY: Final = ("group_id", "topic_id", "partition")
LOG_ORDER: Final = ("source_partition", "source_offset")
COUNT_COLUMNS: Final = {
    "available_offsets": AVAILABLE,
    "acquired_offsets": ACQUIRED,
    "acknowledged_offsets": ACKNOWLEDGED,
    "archived_offsets": ARCHIVED,
}

#: One row per applied record: the state after it.
HISTORY_FIELDS: Final = [
    pa.field("group_id", pa.string()),
    pa.field("topic_id", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("segment", pa.int64()),
    pa.field("source_partition", pa.int32()),
    pa.field("source_offset", pa.int64()),
    pa.field("source_timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("record_type", pa.string()),
    pa.field("deleted", pa.bool_()),
    pa.field("start_offset", pa.int64()),
    pa.field("effective_start_offset", pa.int64()),
    pa.field("state_epoch", pa.int32()),
    pa.field("leader_epoch", pa.int32()),
    pa.field("snapshot_epoch", pa.int32()),
    pa.field("create_timestamp", pa.int64()),
    pa.field("write_timestamp", pa.int64()),
    pa.field("delivery_complete_count", pa.int32()),
    *[pa.field(name, pa.int64()) for name in COUNT_COLUMNS],
    pa.field("state_batch_count", pa.int32()),
    # Only on a segment's last record (the rest would repeat the batch lists).
    pa.field("state_batches", STATE_BATCHES_TYPE),
    # Set when the record could not be applied (the state is left as it was).
    pa.field("replay_error", pa.string()),
]
_BATCHES_DDL: Final = (
    "array<struct<first_offset:bigint,last_offset:bigint,delivery_state:int,delivery_count:int>>"
)
_FOLD_INPUT: Final = (
    *KEY,
    "segment",
    *LOG_ORDER,
    "source_timestamp",
    "record_type",
    *STATE_FIELDS,
    "state_batches",
)


@dataclass(frozen=True)
class Replayed:
    """Both tables derive from `folded` (the fold's output): persist that one to fold once."""

    history: DataFrame
    state: DataFrame
    folded: DataFrame


def _state_row(state: ShareState | None, record: Mapping[str, Any], last: bool) -> dict[str, Any]:
    row: dict[str, Any] = {name: record[name] for name in (*KEY, "segment", *LOG_ORDER)}
    row["source_timestamp"] = record["source_timestamp"]
    row["record_type"] = record["record_type"]
    row["deleted"] = state is None
    if state is None:
        return row
    counts = offsets_by_state(state.batches)
    row.update({name: getattr(state, name) for name in STATE_FIELDS})
    row["effective_start_offset"] = effective_start_offset(state)
    row["state_batch_count"] = len(state.batches)
    for name, delivery_state in COUNT_COLUMNS.items():
        row[name] = counts.get(delivery_state, 0)
    if last:
        row["state_batches"] = [
            {"first_offset": f, "last_offset": la, "delivery_state": st, "delivery_count": c}
            for f, la, st, c in state.batches
        ]
    return row


def fold_segments(
    kafka: tuple[int, int], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over rows sorted by (share-partition, segment, log order): fold each
    segment from no state, emit the state after every record. Streaming, so segments of
    any length and any number cost the same per record."""
    group: tuple[Any, ...] | None = None
    state: ShareState | None = None
    pending: tuple[ShareState | None, dict[str, Any], str | None] | None = None
    schema = pa.schema(HISTORY_FIELDS)

    def finish(
        item: tuple[ShareState | None, dict[str, Any], str | None], last: bool
    ) -> dict[str, Any]:
        done_state, record, error = item
        row = _state_row(done_state, record, last=last)
        row["replay_error"] = error
        return row

    for batch in batches:
        rows: list[dict[str, Any]] = []
        for record in batch.to_pylist():
            key = (*(record[name] for name in KEY), record["segment"])
            if key != group:
                if pending is not None:
                    rows.append(finish(pending, last=True))
                    pending = None
                group, state = key, None
            elif pending is not None:
                rows.append(finish(pending, last=False))
            error = None
            try:
                state = apply_record(state, record, kafka)
            except ValueError as err:  # impossible batches: Kafka's own load would fail here
                error = str(err)
            pending = (state, record, error)
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)
    if pending is not None:
        yield pa.RecordBatch.from_pylist([finish(pending, last=True)], schema=schema)


def fold_segment(kafka: tuple[int, int], table: pa.Table) -> pa.Table:
    """One (share-partition, segment) folded in log order (for tests and notebooks)."""
    ordered = table.sort_by([(name, "ascending") for name in LOG_ORDER])
    batches = list(fold_segments(kafka, iter(ordered.to_batches())))
    return pa.Table.from_batches(batches, schema=pa.schema(HISTORY_FIELDS))


def with_segments(records: DataFrame) -> DataFrame:
    """Number each share-partition's segments: a snapshot or tombstone starts one."""
    in_log_order = (
        Window.partitionBy(*KEY)
        .orderBy(*LOG_ORDER)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    starts = F.when(F.col("record_type").isin("snapshot", "tombstone"), 1).otherwise(0)
    return records.withColumn("segment", F.sum(starts).over(in_log_order).cast("long"))


def as_of(
    records: DataFrame, *, source_offset: int | None = None, timestamp: datetime | None = None
) -> DataFrame:
    """The records a replay "as of" a point sees: those at or before `source_offset` (an
    offset of the state-topic partitions) and/or at or before `timestamp`."""
    if source_offset is not None:
        records = records.filter(F.col("source_offset") <= F.lit(source_offset))
    if timestamp is not None:
        records = records.filter(F.col("source_timestamp") <= F.lit(timestamp))
    return records


def replay(records: DataFrame, kafka: tuple[int, int] = LATEST) -> Replayed:
    """`share_partition_history` and `share_partition_state` from decoded records, as Kafka
    release `kafka` (major, minor) replays them (the releases merge batches differently)."""
    segments = with_segments(records).select(*_FOLD_INPUT)
    history = (
        # Every segment whole in one task, in log order; a task streams through many.
        segments.repartition(*KEY, "segment")
        .sortWithinPartitions(*KEY, "segment", *LOG_ORDER)
        .mapInArrow(partial(fold_segments, kafka), from_arrow_schema(pa.schema(HISTORY_FIELDS)))
    )
    newest_first = Window.partitionBy(*KEY).orderBy(*[F.col(c).desc() for c in LOG_ORDER])
    last = history.withColumn("_rank", F.row_number().over(newest_first)).filter("_rank = 1")
    snapshots = (
        records.filter(F.col("record_type") == "snapshot")
        .groupBy(*KEY)
        .agg(F.max(F.struct(*LOG_ORDER)).alias("_snapshot"))
    )
    state = last.join(snapshots, list(KEY), "left").select(
        *KEY,
        "deleted",
        *STATE_FIELDS,
        "effective_start_offset",
        F.coalesce("state_batches", F.array().cast(_BATCHES_DDL)).alias("state_batches"),
        *COUNT_COLUMNS,
        F.col("source_partition").alias("last_source_partition"),
        F.col("source_offset").alias("last_source_offset"),
        F.col("_snapshot.source_offset").alias("last_snapshot_offset"),
        "replay_error",
    )
    return Replayed(history.drop("state_batches"), state, history)
