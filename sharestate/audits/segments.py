"""`share_partition_segments`: per share-partition, segment and `__share_group_state`
partition, the counts and first/last records the per-share-partition audits need (the
snapshot findings read it instead of every history row; an incremental run merges the new
records into the stored table). `share_partition_placements` rolls it up per share-partition
and state-topic partition, which is all the wrong-partition check and the pruning cut-off
need: a row per share-partition, not per segment."""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sharestate.audits.segments_arrow import PLACEMENT_KEY, SEGMENT_KEY
from sharestate.kafka.constants import SNAPSHOT, TOMBSTONE, UPDATE


def _segment_merges() -> list[Column]:
    """How two rows of one segment combine: every column is a sum, min or max, so the rows of
    an earlier run and those of the new records merge into what one run over all gives."""
    return [
        F.sum("records").cast("long").alias("records"),
        F.sum("updates").cast("long").alias("updates"),
        F.min("first_record").alias("first_record"),
        F.max("last_record").alias("last_record"),
        F.min("first_update_offset").alias("first_update_offset"),
        F.max("last_snapshot_or_tombstone").alias("last_snapshot_or_tombstone"),
    ]


#: The record types a decoded record has, numbered from 1 for aggregations Spark runs by
#: hash (it cannot on strings).
_RECORD_TYPES: Final = (UPDATE, SNAPSHOT, TOMBSTONE)


def _record_type_code() -> Column:
    return F.array_position(F.array(*[F.lit(t) for t in _RECORD_TYPES]), F.col("record_type"))


def _record_type_name(code: Column) -> Column:
    name: Column = F.lit(None).cast("string")
    for number, text in reversed(list(enumerate(_RECORD_TYPES, start=1))):
        name = F.when(code == F.lit(number), F.lit(text)).otherwise(name)
    return name


def _record(offset: Column, code: Column) -> Column:
    return F.struct(offset.alias("source_offset"), _record_type_name(code).alias("record_type"))


def share_partition_segments(history: DataFrame, stored: DataFrame | None = None) -> DataFrame:
    """Per share-partition, segment and `__share_group_state` partition, what the
    per-share-partition audits need from the records: how many, how many updates, the
    first and last record, the first update and the latest snapshot or tombstone.

    The snapshot, wrong-partition and pruning audits read this table rather than every
    history row, and an incremental run merges the new rows into the `stored` one."""
    # Aggregated on numbers only, so Spark aggregates by hash (partly before its shuffle);
    # a min or max of a struct made it sort every history row first. Within a row's key the
    # source offsets are unique, so the record at the lowest (highest) offset is the one a
    # min (max) of the struct found.
    update = F.col("record_type") == UPDATE
    code = _record_type_code()
    event = F.col("record_type").isin(SNAPSHOT, TOMBSTONE)
    event_offset = F.when(event, F.col("source_offset"))
    aggregated = history.groupBy(*SEGMENT_KEY).agg(
        F.count(F.lit(1)).alias("records"),
        F.count(F.when(update, 1)).alias("updates"),
        F.min("source_offset").alias("_first"),
        F.min_by(code, F.col("source_offset")).alias("_first_type"),
        F.max("source_offset").alias("_last"),
        F.max_by(code, F.col("source_offset")).alias("_last_type"),
        F.min(F.when(update, F.col("source_offset"))).alias("first_update_offset"),
        F.max(event_offset).alias("_event"),
        F.max_by("source_timestamp", event_offset).alias("_event_timestamp"),
        F.max_by(code, event_offset).alias("_event_type"),
    )
    new = aggregated.select(
        *SEGMENT_KEY,
        "records",
        "updates",
        _record(F.col("_first"), F.col("_first_type")).alias("first_record"),
        _record(F.col("_last"), F.col("_last_type")).alias("last_record"),
        "first_update_offset",
        F.when(
            F.col("_event").isNotNull(),
            F.struct(
                F.col("_event").alias("source_offset"),
                F.col("_event_timestamp").alias("source_timestamp"),
                _record_type_name(F.col("_event_type")).alias("record_type"),
            ),
        ).alias("last_snapshot_or_tombstone"),
    )
    if stored is None:
        return new
    return merge_segments(stored, new)


def merge_segments(stored: DataFrame, new: DataFrame) -> DataFrame:
    """Rows of `share_partition_segments` from two runs combined: a segment in both gets one
    row, each column the sum, min or max of the two."""
    return stored.unionByName(new).groupBy(*SEGMENT_KEY).agg(*_segment_merges())


def share_partition_placements(segments: DataFrame) -> DataFrame:
    """Per share-partition and `__share_group_state` partition (`PLACEMENT_KEY`), from its
    `share_partition_segments` rows: its records (`records`), the offset of its first
    (`first_offset`), its last record and its latest snapshot or tombstone. A share-partition
    has one row unless its records are on several partitions."""
    return segments.groupBy(*PLACEMENT_KEY).agg(
        F.sum("records").cast("long").alias("records"),
        F.min(F.col("first_record.source_offset")).alias("first_offset"),
        F.max("last_record").alias("last_record"),
        F.max("last_snapshot_or_tombstone").alias("last_snapshot_or_tombstone"),
    )
