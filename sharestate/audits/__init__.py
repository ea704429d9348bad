"""Audit tables: pure DataFrame -> DataFrame functions over the decoded and replayed tables.

Nothing here builds a Spark session, reads or writes storage, or brings rows to the driver:
every function returns a lazy DataFrame (a few use one-row aggregates cross-joined back, so
choices such as the state-topic partition count are made inside Spark too).

* `delivery_counts`: offsets per (share-partition, delivery state, delivery count) in the
  final replayed state.
* `archived_ranges` -> `poison_messages` / `archived_messages`: offset ranges that any
  decoded record showed as Archived, merged per share-partition into maximal ranges (a
  window over the intervals sorted by first offset numbers the runs of overlapping or
  touching intervals; the runs are then aggregated), with the earliest record that showed
  any part of each range.
* `share_partition_segments`: per share-partition, segment and state-topic partition, the
  counts and first/last records the per-share-partition audits below need (an incremental
  run merges new records into the stored table instead of reading every record).
* `pruning_cutoff`: per `__share_group_state` partition, the offset Kafka's share
  coordinator would prune the log up to (`ShareCoordinatorOffsetsManager.lastRedundantOffset`).
* `share_groups`: the share groups of `__consumer_offsets` as the group coordinator holds
  them after replaying the latest record of every record key.
* `share_partition_lag`: lag per share-partition against a table of end offsets.
* `findings`: data-quality problems, one row each, with a severity and an actionable message.

Column meanings, and why each rule is what it is: docs/audits.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.kafka.constants import ACKNOWLEDGED, ARCHIVED, DELIVERY_STATE_NAMES
from sharestate.kafka.partitioning import DEFAULT_STATE_TOPIC_PARTITIONS
from sharestate.replay.fold import LATEST_TIMESTAMP, MOVED_AT_TYPE, SINCE

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES: Final = (ERROR, WARNING, INFO)

#: `archived_ranges.reason` values.
REASON_DELIVERY_LIMIT: Final = "delivery_count_limit"
REASON_BELOW_LIMIT: Final = "below_delivery_limit"
REASON_NEVER_DELIVERED: Final = "never_delivered"

#: The `findings` table's columns, in order.
FINDINGS_SCHEMA: Final = T.StructType(
    [
        T.StructField("severity", T.StringType()),
        T.StructField("code", T.StringType()),
        T.StructField("group_id", T.StringType()),
        T.StructField("topic_id", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("source", T.StringType()),
        T.StructField("source_partition", T.IntegerType()),
        T.StructField("source_offset", T.LongType()),
        T.StructField("affected", T.LongType()),
        T.StructField("message", T.StringType()),
    ]
)


@dataclass(frozen=True)
class AuditOptions:
    #: Kafka's `group.share.delivery.count.limit`: archived at this count = poison message.
    delivery_count_limit: int = 5
    #: A share-partition whose SPSO has not moved for this long while records wait is stalled;
    #: a partition listed as initializing (a topic as deleting) this long is stuck.
    stall_span_seconds: float = 86400.0
    #: Partitions of `__share_group_state`; None: Kafka's default 50 or the highest exported
    #: partition + 1, whichever fits the export (the check is skipped when neither fits).
    state_topic_partitions: int | None = None


@dataclass(frozen=True)
class CarriedAudits:
    """What an incremental run carries over from the earlier run's audit tables."""

    #: The records this run adds (the rest are in the earlier run's tables).
    new_records: DataFrame
    #: The earlier run's poison_messages (with `reason` added) and archived_messages.
    archived_ranges: DataFrame
    #: This run's history rows and quarantined rows (only the new ones).
    new_history: DataFrame | None = None
    new_quarantine: DataFrame | None = None
    #: The earlier run's findings and pruning_cutoff (its last exported offsets): findings
    #: of one record or one gap each go on from there.
    findings: DataFrame | None = None
    pruning_cutoff: DataFrame | None = None

    #: The earlier run's share_partition_segments.
    segments: DataFrame | None = None

    def complete(self) -> bool:
        """Whether the findings, the pruning cut-off and the segments go on from here too
        (else only the archived ranges do)."""
        return all(
            df is not None
            for df in (
                self.new_history,
                self.new_quarantine,
                self.findings,
                self.pruning_cutoff,
                self.segments,
            )
        )


@dataclass(frozen=True)
class Audits:
    """The audit tables. `poison_messages` and `archived_messages` are two filters of
    `archived_ranges`: persist that one to explode and merge the batches once."""

    delivery_counts: DataFrame
    archived_ranges: DataFrame
    poison_messages: DataFrame
    archived_messages: DataFrame
    segments: DataFrame
    pruning_cutoff: DataFrame
    findings: DataFrame
    share_groups: DataFrame | None = None
    share_partition_lag: DataFrame | None = None

    def worth_caching(self) -> list[DataFrame]:
        """The small results that several tables (or a table and the run summary) read:
        persist them to compute each once. The rest are filters of these."""
        frames = [
            self.delivery_counts,
            self.archived_ranges,
            self.segments,
            self.pruning_cutoff,
            self.share_groups,
            self.share_partition_lag,
            self.findings,
        ]
        return [frame for frame in frames if frame is not None]


# --- helpers ---------------------------------------------------------------------------------


def _live(state: DataFrame) -> DataFrame:
    return state.filter(~F.coalesce(F.col("deleted"), F.lit(False)))


def delivery_state_name(state: Column) -> Column:
    """`Available`, `Acquired`, ... for a delivery state number; `Unknown(n)` otherwise."""
    name: Column = F.concat(F.lit("Unknown("), state.cast("string"), F.lit(")"))
    for number, text in reversed(DELIVERY_STATE_NAMES.items()):
        name = F.when(state == F.lit(number), F.lit(text)).otherwise(name)
    return name


def _as_column(value: str | Column | None, dtype: T.DataType) -> Column:
    if value is None:
        return F.lit(None).cast(dtype)
    column = F.col(value) if isinstance(value, str) else value
    return column.cast(dtype)


def finding(
    df: DataFrame,
    severity: str | Column,
    code: str,
    message: Column,
    /,
    *,
    group_id: str | Column | None = None,
    topic_id: str | Column | None = None,
    partition: str | Column | None = None,
    source: str | Column | None = None,
    source_partition: str | Column | None = None,
    source_offset: str | Column | None = None,
    affected: str | Column | None = None,
) -> DataFrame:
    """Rows of `df` as findings (`FINDINGS_SCHEMA`). Strings name columns of `df`, except
    `severity` and `source`, which are literal values."""
    source_column = F.lit(source) if isinstance(source, str) or source is None else source
    fields = {f.name: f.dataType for f in FINDINGS_SCHEMA.fields}
    return df.select(
        (F.lit(severity) if isinstance(severity, str) else severity).alias("severity"),
        F.lit(code).alias("code"),
        _as_column(group_id, fields["group_id"]).alias("group_id"),
        _as_column(topic_id, fields["topic_id"]).alias("topic_id"),
        _as_column(partition, fields["partition"]).alias("partition"),
        source_column.cast("string").alias("source"),
        _as_column(source_partition, fields["source_partition"]).alias("source_partition"),
        _as_column(source_offset, fields["source_offset"]).alias("source_offset"),
        _as_column(affected, fields["affected"]).alias("affected"),
        message.alias("message"),
    )


def _text(value: Column) -> Column:
    return F.coalesce(value.cast("string"), F.lit("?"))


def _msg(*parts: str | Column) -> Column:
    """A message from literal text and column values (null values print as `?`)."""
    return F.concat(*[F.lit(p) if isinstance(p, str) else _text(p) for p in parts])


def _share_partition_text() -> Column:
    return _msg(F.col("group_id"), ":", F.col("topic_id"), ":", F.col("partition"))


# --- delivery_counts ---------------------------------------------------------------------------


def delivery_counts(state: DataFrame, delivery_count_limit: int = 5) -> DataFrame:
    """Offsets per (share-partition, delivery_state, delivery_count) in the final state of
    every share-partition that is not deleted."""
    batch = F.col("b")
    size = F.greatest(batch["last_offset"] - batch["first_offset"] + 1, F.lit(0))
    return (
        _live(state)
        .select(*KEY, F.explode("state_batches").alias("b"))
        .groupBy(
            *KEY,
            batch["delivery_state"].alias("delivery_state"),
            batch["delivery_count"].alias("delivery_count"),
        )
        .agg(
            F.sum(size).cast("long").alias("offsets"),
            F.count(F.lit(1)).alias("batches"),
            F.min(batch["first_offset"]).alias("first_offset"),
            F.max(batch["last_offset"]).alias("last_offset"),
        )
        .select(
            *KEY,
            "delivery_state",
            delivery_state_name(F.col("delivery_state")).alias("delivery_state_name"),
            "delivery_count",
            "offsets",
            "batches",
            "first_offset",
            "last_offset",
            (F.col("delivery_count") >= F.lit(delivery_count_limit)).alias("at_delivery_limit"),
        )
    )


# --- poison_messages / archived_messages -------------------------------------------------------


def _seen() -> Column:
    return F.struct(*LOG_ORDER, "source_timestamp")


def _aggregates() -> list[Column]:
    return [
        F.max("delivery_count").alias("delivery_count"),
        F.min("min_delivery_count").alias("min_delivery_count"),
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
        F.sum("sightings").cast("long").alias("sightings"),
    ]


def _as_aggregated(intervals: DataFrame, by: Sequence[str]) -> DataFrame:
    """Raw intervals (one per record and batch) in the aggregated form that `merge_ranges`
    merges. Stored ranges of an earlier run take the same form (`stored_ranges`); merging
    is associative (a union of intervals, with min, max and sum), so merging stored ranges
    with new intervals gives what merging every interval gives."""
    return intervals.select(
        *by,
        "first_offset",
        "last_offset",
        "delivery_count",
        F.col("delivery_count").alias("min_delivery_count"),
        _seen().alias("first_seen"),
        _seen().alias("last_seen"),
        F.lit(1).cast("long").alias("sightings"),
    )


def stored_ranges(ranges: DataFrame, by: Sequence[str]) -> DataFrame:
    """Ranges an earlier run wrote (`merge_ranges` output columns), back in the aggregated
    form, to merge new intervals into."""

    def seen(prefix: str) -> Column:
        return F.struct(
            F.col(f"{prefix}_source_partition").alias("source_partition"),
            F.col(f"{prefix}_source_offset").alias("source_offset"),
            F.col(f"{prefix}_timestamp").alias("source_timestamp"),
        )

    return ranges.select(
        *by,
        "first_offset",
        "last_offset",
        "delivery_count",
        "min_delivery_count",
        seen("first_seen").alias("first_seen"),
        seen("last_seen").alias("last_seen"),
        F.col("sightings").cast("long").alias("sightings"),
    )


#: The columns `merge_ranges` adds to its `by` columns (in its select below).
_MERGED_COLUMNS: Final = (
    "first_offset",
    "last_offset",
    "offsets",
    "delivery_count",
    "min_delivery_count",
    "first_seen_source_partition",
    "first_seen_source_offset",
    "first_seen_timestamp",
    "last_seen_source_partition",
    "last_seen_source_offset",
    "last_seen_timestamp",
    "sightings",
)


def merge_ranges(
    intervals: DataFrame, by: Sequence[str], stored: DataFrame | None = None
) -> DataFrame:
    """The union of the intervals [first_offset, last_offset] per `by`, as maximal ranges
    (overlapping or touching intervals join). Each range keeps the max and min
    delivery_count of its intervals and the earliest and latest record (log order) that
    showed any part of it. `stored` (`stored_ranges` of an earlier run's output) is merged
    in as if its intervals were given again.

    `intervals`: `by` columns, first_offset, last_offset, delivery_count, source_partition,
    source_offset, source_timestamp. Distributed, after one shuffle by `by`: identical
    intervals are aggregated first (a snapshot repeats what updates wrote), then a window
    per `by`, sorted by first offset, carries the furthest last offset seen so far; an
    interval that starts beyond it + 1 starts a new range, and a running sum of those
    starts numbers the ranges."""
    aggregated = _as_aggregated(intervals, by)
    if stored is not None:
        aggregated = aggregated.unionByName(stored)
    # Placed by `by` once, the two aggregations and the window all run where the rows are
    # (Spark would otherwise shuffle for each: at 10M records, 3 shuffles took 18-23 s and
    # this one 15-17 s, from the decoded records to the ranges).
    distinct = (
        aggregated.repartition(*by).groupBy(*by, "first_offset", "last_offset").agg(*_aggregates())
    )
    ordered = Window.partitionBy(*by).orderBy("first_offset", "last_offset")
    reach = distinct.withColumn(
        "_reach",
        F.max("last_offset").over(ordered.rowsBetween(Window.unboundedPreceding, -1)),
    )
    # first - 1 > reach, not first > reach + 1: offsets near Long.MAX_VALUE must not overflow.
    starts = F.when(
        F.col("_reach").isNull() | (F.col("first_offset") - 1 > F.col("_reach")), 1
    ).otherwise(0)
    numbered = reach.withColumn(
        "_range",
        F.sum(starts).over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
    )
    merged = numbered.groupBy(*by, "_range").agg(
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        *_aggregates(),
    )
    return merged.select(
        *by,
        "first_offset",
        "last_offset",
        (F.col("last_offset") - F.col("first_offset") + 1).alias("offsets"),
        "delivery_count",
        "min_delivery_count",
        F.col("first_seen.source_partition").alias("first_seen_source_partition"),
        F.col("first_seen.source_offset").alias("first_seen_source_offset"),
        F.col("first_seen.source_timestamp").alias("first_seen_timestamp"),
        F.col("last_seen.source_partition").alias("last_seen_source_partition"),
        F.col("last_seen.source_offset").alias("last_seen_source_offset"),
        F.col("last_seen.source_timestamp").alias("last_seen_timestamp"),
        "sightings",
    )


def archived_intervals(records: DataFrame) -> DataFrame:
    """Every Archived batch of every decoded snapshot and update, one row each, with the
    record that holds it. Batches that end before they start are left out (the replay
    reports those as `replay_error`)."""
    # Explode, then filter: Spark runs `explode` and a filter in generated code, but a
    # higher-order `F.filter` over the array element by element in the interpreter (at 10M
    # records, 17M batches: 9-11 s against 2-3 s).
    batch = F.col("b")
    return (
        records.filter(F.col("record_type").isin("snapshot", "update"))
        .select(*KEY, *LOG_ORDER, "source_timestamp", F.explode("state_batches").alias("b"))
        .filter(
            (batch["delivery_state"] == F.lit(ARCHIVED))
            & (batch["last_offset"] >= batch["first_offset"])
        )
        .select(
            *KEY,
            *LOG_ORDER,
            "source_timestamp",
            batch["first_offset"].alias("first_offset"),
            batch["last_offset"].alias("last_offset"),
            batch["delivery_count"].alias("delivery_count"),
        )
    )


def _with_final_state(ranges: DataFrame, state: DataFrame) -> DataFrame:
    """Add what the final state says about each range: still archived there, and whether
    the share-partition's start offset has moved past it."""
    final = state.select(
        *KEY,
        F.col("deleted").alias("share_partition_deleted"),
        F.col("effective_start_offset").alias("_eso"),
        F.filter("state_batches", lambda b: b["delivery_state"] == F.lit(ARCHIVED)).alias(
            "_archived"
        ),
    )
    first, last = F.col("first_offset"), F.col("last_offset")
    overlapping = F.filter(
        F.coalesce(F.col("_archived"), F.array()),
        lambda b: (b["first_offset"] <= last) & (b["last_offset"] >= first),
    )
    in_state = F.aggregate(
        overlapping,
        F.lit(0).cast("long"),
        lambda acc, b: (
            acc + F.least(b["last_offset"], last) - F.greatest(b["first_offset"], first) + F.lit(1)
        ),
    )
    deleted = F.coalesce(F.col("share_partition_deleted"), F.lit(False))
    return (
        ranges.join(final, list(KEY), "left")
        .withColumn("offsets_still_in_state", F.when(deleted, F.lit(0)).otherwise(in_state))
        .withColumn("still_in_state", F.col("offsets_still_in_state") > 0)
        .withColumn("below_start_offset", F.when(~deleted, last < F.col("_eso")).cast("boolean"))
        .drop("_eso", "_archived")
    )


def archived_ranges(
    records: DataFrame,
    state: DataFrame,
    delivery_count_limit: int,
    stored: DataFrame | None = None,
) -> DataFrame:
    """Merged archived ranges per share-partition and `reason`:
    `delivery_count_limit` (delivery count >= the limit: poison messages),
    `below_delivery_limit` (archived after 1 to limit-1 deliveries: rejected by a consumer,
    or archived by the broker for another reason), `never_delivered` (count 0).

    `stored`: the ranges an earlier run wrote (poison_messages with `reason` added, and
    archived_messages), with the same limit; `records` are then only the newer records."""
    count = F.col("delivery_count")
    reason = (
        F.when(count >= F.lit(delivery_count_limit), F.lit(REASON_DELIVERY_LIMIT))
        .when(count <= 0, F.lit(REASON_NEVER_DELIVERED))
        .otherwise(F.lit(REASON_BELOW_LIMIT))
    )
    by = [*KEY, "reason"]
    intervals = archived_intervals(records).withColumn("reason", reason)
    if stored is None:
        return _with_final_state(merge_ranges(intervals, by), state)
    # Stored ranges are maximal (disjoint, not touching): one that neither overlaps nor
    # touches the span of its share-partition's new intervals cannot change, so only the
    # others are merged again.
    spans = intervals.groupBy(*by).agg(
        F.min("first_offset").alias("_low"), F.max("last_offset").alias("_high")
    )
    first, last = F.col("first_offset"), F.col("last_offset")
    apart = (first - 1 > F.col("_high")) | (F.col("_low") - 1 > last)
    placed = stored.join(spans, by, "left").withColumn("_unchanged", F.col("_low").isNull() | apart)
    unchanged = placed.filter(F.col("_unchanged")).select(*by, *_MERGED_COLUMNS)
    remerged = merge_ranges(intervals, by, stored_ranges(placed.filter(~F.col("_unchanged")), by))
    return _with_final_state(remerged.unionByName(unchanged), state)


def poison_messages(ranges: DataFrame) -> DataFrame:
    """Ranges archived at or above the delivery-count limit (from `archived_ranges`)."""
    return ranges.filter(F.col("reason") == REASON_DELIVERY_LIMIT).drop("reason")


def archived_messages(ranges: DataFrame) -> DataFrame:
    """Ranges archived below the delivery-count limit (from `archived_ranges`)."""
    return ranges.filter(F.col("reason") != REASON_DELIVERY_LIMIT)


# --- share_partition_segments ------------------------------------------------------------------

#: Columns of `share_partition_segments` that identify a row.
SEGMENT_KEY: Final = (*KEY, "segment", "source_partition")


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
_RECORD_TYPES: Final = ("update", "snapshot", "tombstone")


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
    # a min or max of a struct made it sort every history row first (at 10M records,
    # 6.3-7.4 s for this table). Within a row's key the source offsets are unique, so the
    # record at the lowest (highest) offset is the one a min (max) of the struct found.
    update = F.col("record_type") == "update"
    code = _record_type_code()
    event = F.col("record_type").isin("snapshot", "tombstone")
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
    return stored.unionByName(new).groupBy(*SEGMENT_KEY).agg(*_segment_merges())


# --- pruning_cutoff ----------------------------------------------------------------------------


def exported_positions(records: DataFrame, quarantine: DataFrame | None, source: str) -> DataFrame:
    """(source_partition, source_offset) of every exported row of one input that reached a
    table: decoded records and quarantined rows (not rows of another topic)."""
    positions = records.select(*LOG_ORDER)
    if quarantine is not None:
        positions = positions.unionByName(
            quarantine.filter(
                (F.col("source") == source) & (F.col("reason_kind") != "wrong topic")
            ).select(*LOG_ORDER)
        )
    return positions


def _cutoffs(segments: DataFrame) -> DataFrame:
    """Per `__share_group_state` partition: the cut-off and the share-partitions behind it."""
    per_key = segments.groupBy("source_partition", *KEY).agg(
        F.max("last_record").alias("_last"),
        F.max("last_snapshot_or_tombstone").alias("_event"),
    )
    tracked = F.coalesce(F.col("_event.record_type") == "snapshot", F.lit(False))
    live = F.col("_last.record_type") != "tombstone"
    held = F.struct(
        F.col("_event.source_offset").alias("offset"),
        F.col("_event.source_timestamp").alias("timestamp"),
        *[F.col(c).alias(c) for c in KEY],
    )
    last_event = F.struct(
        F.col("_event.source_offset").alias("offset"),
        F.col("_event.source_timestamp").alias("timestamp"),
    )
    per_partition = per_key.groupBy("source_partition").agg(
        F.min(F.when(tracked, held)).alias("_held"),
        F.max(last_event).alias("_last_event"),
        F.count(F.when(live, 1)).alias("live_share_partitions"),
        F.count(F.when(tracked, 1)).alias("tracked_share_partitions"),
        F.count(F.when(live & ~tracked, 1)).alias("untracked_live_share_partitions"),
        F.count(F.when(~live, 1)).alias("deleted_share_partitions"),
    )
    return per_partition.select(
        "source_partition",
        F.coalesce(F.col("_held.offset"), F.col("_last_event.offset")).alias("cutoff_offset"),
        F.when(F.col("_held").isNotNull(), F.col("_held.timestamp"))
        .otherwise(F.col("_last_event.timestamp"))
        .alias("cutoff_timestamp"),
        "live_share_partitions",
        "tracked_share_partitions",
        "untracked_live_share_partitions",
        "deleted_share_partitions",
        F.col("_held.group_id").alias("held_by_group_id"),
        F.col("_held.topic_id").alias("held_by_topic_id"),
        F.col("_held.partition").alias("held_by_partition"),
    )


def _pruning_table(counted: DataFrame, cutoffs: DataFrame) -> DataFrame:
    zero = F.lit(0).cast("long")
    return counted.join(cutoffs, "source_partition", "left").select(
        "source_partition",
        "cutoff_offset",
        F.coalesce(F.col("cutoff_offset") > 0, F.lit(False)).alias("prunable"),
        "cutoff_timestamp",
        *[
            F.coalesce(F.col(c), zero).alias(c)
            for c in (
                "live_share_partitions",
                "tracked_share_partitions",
                "untracked_live_share_partitions",
                "deleted_share_partitions",
            )
        ],
        "held_by_group_id",
        "held_by_topic_id",
        "held_by_partition",
        F.col("records_before_cutoff").cast("long").alias("records_before_cutoff"),
        F.col("exported_records").cast("long").alias("exported_records"),
        "first_exported_offset",
        "last_exported_offset",
    )


def pruning_cutoff(segments: DataFrame, positions: DataFrame) -> DataFrame:
    """Per `__share_group_state` partition: the offset Kafka's share coordinator would prune
    its log up to after loading these records (ShareCoordinatorOffsetsManager), from
    `share_partition_segments`, and how many exported `positions` (`exported_positions`)
    lie before it.

    Kafka tracks, per share-partition, the offset of its latest ShareSnapshot (updates are
    not tracked); a tombstone drops the share-partition. The cut-off is the minimum of the
    tracked offsets, computed at each snapshot or tombstone including the record itself, so
    a partition whose share-partitions are all deleted keeps its last tombstone's offset.
    Kafka deletes records below the cut-off only when it is > 0."""
    cutoffs = _cutoffs(segments)
    counted = (
        positions.join(
            F.broadcast(cutoffs.select("source_partition", "cutoff_offset")),
            "source_partition",
            "left",
        )
        .groupBy("source_partition")
        .agg(
            F.count(F.lit(1)).alias("exported_records"),
            F.min("source_offset").alias("first_exported_offset"),
            F.max("source_offset").alias("last_exported_offset"),
            F.count(F.when(F.col("source_offset") < F.col("cutoff_offset"), 1)).alias(
                "records_before_cutoff"
            ),
        )
    )
    return _pruning_table(counted, cutoffs)


def carried_pruning_cutoff(
    segments: DataFrame, stored: DataFrame, new_positions: DataFrame, gaps: DataFrame
) -> DataFrame:
    """`pruning_cutoff` of an incremental run without reading the stored records: the
    exported range of each partition is the `stored` table's widened by the new positions,
    and the positions before the cut-off are that range up to the cut-off less the offsets
    missing there. `gaps` are the `source_offset_gap` findings of all records (stored and
    new); exported positions are unique per offset, so the count is exact."""
    cutoffs = _cutoffs(segments)
    extent = (
        stored.select(
            "source_partition",
            "exported_records",
            "first_exported_offset",
            "last_exported_offset",
        )
        .unionByName(
            new_positions.groupBy("source_partition").agg(
                F.count(F.lit(1)).cast("long").alias("exported_records"),
                F.min("source_offset").alias("first_exported_offset"),
                F.max("source_offset").alias("last_exported_offset"),
            )
        )
        .groupBy("source_partition")
        .agg(
            F.sum("exported_records").alias("exported_records"),
            F.min("first_exported_offset").alias("first_exported_offset"),
            F.max("last_exported_offset").alias("last_exported_offset"),
        )
        .join(
            F.broadcast(cutoffs.select("source_partition", "cutoff_offset")),
            "source_partition",
            "left",
        )
        .withColumn("_lo", F.col("first_exported_offset"))
        .withColumn("_hi", F.least(F.col("cutoff_offset") - 1, F.col("last_exported_offset")))
    )
    missing = (
        extent.select("source_partition", "_lo", "_hi")
        .join(
            gaps.select(
                "source_partition",
                F.col("source_offset").alias("_from"),
                (F.col("source_offset") + F.col("affected") - 1).alias("_to"),
            ),
            "source_partition",
        )
        .groupBy("source_partition")
        .agg(
            F.sum(
                F.greatest(
                    F.least("_to", "_hi") - F.greatest("_from", "_lo") + 1, F.lit(0).cast("long")
                )
            ).alias("_missing")
        )
    )
    span = F.greatest(F.col("_hi") - F.col("_lo") + 1, F.lit(0).cast("long"))
    counted = extent.join(missing, "source_partition", "left").select(
        "source_partition",
        "exported_records",
        "first_exported_offset",
        "last_exported_offset",
        # (`least` skips nulls: a partition with no cut-off has nothing before it.)
        F.when(F.col("cutoff_offset").isNull(), F.lit(0).cast("long"))
        .otherwise(span - F.coalesce(F.col("_missing"), F.lit(0).cast("long")))
        .alias("records_before_cutoff"),
    )
    return _pruning_table(counted, cutoffs)


# --- share_groups ------------------------------------------------------------------------------


def latest_group_records(group_records: DataFrame) -> DataFrame:
    """The latest share-group record (log order) of every record key: (type, group, member).
    Records of one group all sit on the group's `__consumer_offsets` partition."""
    newest_first = Window.partitionBy("record_type_id", "group_id", "member_id").orderBy(
        *[F.col(c).desc() for c in LOG_ORDER]
    )
    return (
        group_records.filter(F.col("is_share_record"))
        .withColumn("_rank", F.row_number().over(newest_first))
        .filter("_rank = 1")
        .drop("_rank")
    )


def _names(topics: Column) -> Column:
    return F.transform(F.coalesce(topics, F.array()), lambda t: t["topic_name"])


def topic_names(group_records: DataFrame) -> DataFrame:
    """(topic_id, topic_name) pairs named by share-group records (types 15 and 9)."""
    share = group_records.filter(F.col("is_share_record") & ~F.col("tombstone"))
    pairs = [
        share.select(F.explode(column).alias("t")).select("t.topic_id", "t.topic_name")
        for column in (
            "initializing_topics",
            "initialized_topics",
            "deleting_topics",
            "partition_metadata_topics",
        )
    ]
    out = pairs[0]
    for more in pairs[1:]:
        out = out.unionByName(more)
    return out.filter(F.col("topic_name").isNotNull()).distinct()


def _partition_count(topics: Column) -> Column:
    return F.aggregate(
        F.coalesce(topics, F.array()),
        F.lit(0).cast("long"),
        lambda acc, t: acc + F.coalesce(F.size(t["partitions"]), F.lit(0)).cast("long"),
    )


def share_groups(group_records: DataFrame) -> DataFrame:
    """One row per share group seen in `__consumer_offsets`, from the latest record of every
    record key, as Kafka's group coordinator replays them (a tombstone removes its key)."""
    latest = latest_group_records(group_records)
    kind = F.col("record_type_id")
    alive = ~F.col("tombstone")
    at = F.struct(*LOG_ORDER, "source_timestamp")
    groups = latest.groupBy("group_id").agg(
        F.max(at).alias("_last"),
        F.max(F.when(alive, at)).alias("_last_live"),
        F.first(
            F.when(
                kind == 11, F.struct("tombstone", "group_epoch", "metadata_hash", at.alias("at"))
            ),
            ignorenulls=True,
        ).alias("_meta"),
        F.first(
            F.when(kind == 12, F.struct("tombstone", "assignment_epoch")), ignorenulls=True
        ).alias("_assignment"),
        F.first(
            F.when(
                kind == 15,
                F.struct(
                    "tombstone",
                    "initializing_topics",
                    "initialized_topics",
                    "deleting_topics",
                    at.alias("at"),
                ),
            ),
            ignorenulls=True,
        ).alias("_spm"),
        F.first(
            F.when(kind == 9, F.struct("tombstone", "partition_metadata_topics")),
            ignorenulls=True,
        ).alias("_pm"),
    )
    member = latest.filter(alive & (kind == 10)).select(
        "group_id", "member_id", "client_id", "client_host", "rack_id", "subscribed_topic_names"
    )
    assignment = latest.filter(alive & (kind == 14)).select(
        "group_id", "member_id", "member_epoch", "member_state", "assigned_partitions"
    )
    members = (
        member.join(assignment, ["group_id", "member_id"], "left")
        .groupBy("group_id")
        .agg(
            F.collect_list(
                F.struct(
                    "member_id",
                    "client_id",
                    "client_host",
                    "rack_id",
                    "subscribed_topic_names",
                    "member_epoch",
                    "member_state",
                    "assigned_partitions",
                )
            ).alias("_members")
        )
    )
    meta_live = F.col("_meta").isNotNull() & ~F.col("_meta.tombstone")
    # Deleted: the latest ShareGroupMetadata is a tombstone and nothing live came after it.
    deleted = F.coalesce(F.col("_meta.tombstone"), F.lit(False)) & (
        F.col("_last_live").isNull() | (F.col("_last_live") < F.col("_meta.at"))
    )
    spm_live = F.col("_spm").isNotNull() & ~F.col("_spm.tombstone")

    def spm(field: str) -> Column:
        return F.when(spm_live, F.col(f"_spm.{field}"))

    pm_topics = F.when(
        F.col("_pm").isNotNull() & ~F.col("_pm.tombstone"), F.col("_pm.partition_metadata_topics")
    )
    all_names = F.array_sort(
        F.array_distinct(
            F.filter(
                F.concat(
                    _names(spm("initializing_topics")),
                    _names(spm("initialized_topics")),
                    _names(spm("deleting_topics")),
                    _names(pm_topics),
                ),
                lambda name: name.isNotNull(),
            )
        )
    )
    members_sorted = F.array_sort(
        F.coalesce(F.col("_members"), F.array()),
        lambda a, b: (
            F.when(a["member_id"] < b["member_id"], -1)
            .when(a["member_id"] > b["member_id"], 1)
            .otherwise(0)
        ),
    )
    return groups.join(members, "group_id", "left").select(
        "group_id",
        F.when(meta_live, F.col("_meta.group_epoch")).alias("group_epoch"),
        F.when(meta_live, F.col("_meta.metadata_hash")).alias("metadata_hash"),
        F.when(
            F.col("_assignment").isNotNull() & ~F.col("_assignment.tombstone"),
            F.col("_assignment.assignment_epoch"),
        ).alias("assignment_epoch"),
        deleted.alias("deleted"),
        F.when(deleted, F.col("_meta.at.source_offset")).alias("deleted_at_source_offset"),
        F.when(deleted, F.col("_meta.at.source_timestamp")).alias("deleted_at_timestamp"),
        F.size(members_sorted).alias("member_count"),
        members_sorted.alias("members"),
        spm("initializing_topics").alias("initializing_topics"),
        spm("initialized_topics").alias("initialized_topics"),
        spm("deleting_topics").alias("deleting_topics"),
        _partition_count(spm("initializing_topics")).alias("initializing_partitions"),
        _partition_count(spm("initialized_topics")).alias("initialized_partitions"),
        F.size(F.coalesce(spm("deleting_topics"), F.array())).alias("deleting_topic_count"),
        all_names.alias("topic_names"),
        F.when(spm_live, F.col("_spm.at.source_offset")).alias("state_metadata_source_offset"),
        F.when(spm_live, F.col("_spm.at.source_timestamp")).alias("state_metadata_timestamp"),
        F.col("_last.source_partition").alias("last_source_partition"),
        F.col("_last.source_offset").alias("last_source_offset"),
        F.col("_last.source_timestamp").alias("last_source_timestamp"),
    )


# --- share_partition_lag -----------------------------------------------------------------------


def share_partition_lag(
    state: DataFrame, end_offsets: DataFrame, names: DataFrame | None = None
) -> DataFrame:
    """Lag of every live share-partition: records at or past its start offset that are not
    yet delivered to completion.

    `end_offsets`: topic_id (nullable), topic (nullable), partition, end_offset (see
    `sharestate.io.read_end_offsets`); rows with only a topic name are matched through
    `names` (topic_id, topic_name from `topic_names`). With a DeliveryCompleteCount (4.2+,
    >= 0), lag = end_offset - start_offset - delivery_complete_count, as Kafka computes it
    (the count is of Acknowledged/Archived offsets at or past the persisted start offset).
    Otherwise lag = end_offset - effective_start_offset - the Acknowledged/Archived offsets
    of the batches at or past it."""
    ends = end_offsets.select(
        F.col("topic_id").cast("string").alias("topic_id"),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("end_offset").cast("long").alias("end_offset"),
    )
    if names is not None:
        by_name = names.select(
            F.col("topic_id").alias("_named_id"), F.col("topic_name").alias("_name")
        )
        ends = ends.join(by_name, ends["topic"] == by_name["_name"], "left").select(
            F.coalesce("topic_id", "_named_id").alias("topic_id"),
            "topic",
            "partition",
            "end_offset",
        )
    ends = (
        ends.filter(F.col("topic_id").isNotNull())
        .groupBy("topic_id", "partition")
        .agg(F.max("end_offset").alias("end_offset"), F.max("topic").alias("_end_topic"))
    )
    eso = F.col("effective_start_offset")
    terminal_past = F.aggregate(
        F.coalesce(F.col("state_batches"), F.array()),
        F.lit(0).cast("long"),
        lambda acc, b: (
            acc
            + F.when(
                b["delivery_state"].isin(ACKNOWLEDGED, ARCHIVED),
                F.greatest(b["last_offset"] - F.greatest(b["first_offset"], eso) + 1, F.lit(0)),
            ).otherwise(F.lit(0))
        ),
    )
    dcc_known = F.coalesce(F.col("delivery_complete_count") >= 0, F.lit(False))
    initialized = F.col("start_offset") >= 0
    lag_dcc = F.when(
        dcc_known & initialized,
        F.col("end_offset") - F.col("start_offset") - F.col("delivery_complete_count"),
    )
    lag_batches = F.when(
        initialized, F.col("end_offset") - eso - F.col("terminal_offsets_past_start")
    )
    live = (
        _live(state)
        .select(
            *KEY,
            "start_offset",
            "effective_start_offset",
            "delivery_complete_count",
            terminal_past.alias("terminal_offsets_past_start"),
            "last_source_partition",
            "last_source_offset",
        )
        .join(ends, ["topic_id", "partition"], "left")
    )
    topic = F.col("_end_topic")
    if names is not None:
        known = names.groupBy("topic_id").agg(F.min("topic_name").alias("_known_name"))
        live = live.join(known, "topic_id", "left")
        topic = F.coalesce(topic, F.col("_known_name"))
    return live.select(
        *KEY,
        topic.alias("topic"),
        "start_offset",
        "effective_start_offset",
        "delivery_complete_count",
        "terminal_offsets_past_start",
        "end_offset",
        F.when(dcc_known, lag_dcc).otherwise(lag_batches).alias("lag"),
        F.when(dcc_known, F.lit("delivery_complete_count"))
        .otherwise(F.lit("state_batches"))
        .alias("lag_method"),
        lag_dcc.alias("lag_from_delivery_complete_count"),
        lag_batches.alias("lag_from_state_batches"),
        "last_source_partition",
        "last_source_offset",
    )


# --- findings ----------------------------------------------------------------------------------


def kafka_key_hash(group_id: Column, topic_id: Column, partition: Column) -> Column:
    """Kafka's `Utils.abs("group:topicId:partition".hashCode())` as a Spark column, without
    a Python UDF (`sharestate.kafka.partitioning` is the readable version; tests check they
    agree). Java's String.hashCode runs over UTF-16 code units: the text's UTF-16 bytes in
    hex, four digits per unit, are folded in long arithmetic kept below 2**32 (ANSI mode
    never sees an overflow); the finishing step makes it Java's signed int and `Utils.abs`."""
    text = F.concat_ws(":", group_id, topic_id, partition.cast("string"))
    units = F.regexp_extract_all(F.hex(F.encode(text, "UTF-16BE")), F.lit("[0-9A-F]{4}"), 0)

    def finish(unsigned: Column) -> Column:
        signed = F.when(unsigned >= 1 << 31, unsigned - (1 << 32)).otherwise(unsigned)
        return F.when(signed == -(1 << 31), F.lit(0)).otherwise(F.abs(signed)).cast("int")

    hashed = F.aggregate(
        units,
        F.lit(0).cast("long"),
        lambda acc, unit: F.pmod(
            acc * 31 + F.conv(unit, 16, 10).cast("long"), F.lit(1 << 32).cast("long")
        ),
        finish,
    )
    return F.when(group_id.isNotNull() & topic_id.isNotNull() & partition.isNotNull(), hashed)


def wrong_state_partition_findings(segments: DataFrame, partitions: int | None) -> DataFrame:
    """Share-partitions whose records sit on a `__share_group_state` partition other than the
    one Kafka's partitioner picks (`sharestate.kafka.partitioning.state_topic_partition`), from
    `share_partition_segments`.

    With `partitions` None the count is chosen inside Spark: Kafka's default (50) or the
    highest exported partition + 1, whichever puts more share-partitions on their own
    partition; if even that fits fewer than half of them, the topic has some other count and
    one info finding says the check was skipped."""
    keys = (
        segments.groupBy(*KEY, "source_partition")
        .agg(
            F.sum("records").alias("_records"),
            F.min(F.col("first_record.source_offset")).alias("_first"),
        )
        # Not nullable (decoded keys are never null): Spark would otherwise infer
        # `_hash IS NOT NULL` from the comparisons below and push it under the aggregation,
        # hashing every record instead of every share-partition (4 minutes at 2.5M records).
        .withColumn("_hash", F.coalesce(kafka_key_hash(*[F.col(c) for c in KEY]), F.lit(-1)))
    )
    fits = (F.col("_hash") % F.col("_n")) == F.col("source_partition")
    if partitions is not None:
        choice = keys.agg(
            F.lit(partitions).alias("_n"),
            F.lit(True).alias("_usable"),
            F.count(F.lit(1)).alias("_total"),
            F.lit("given by --state-topic-partitions").alias("_why"),
        )
    else:
        default = F.lit(DEFAULT_STATE_TOPIC_PARTITIONS)
        inferred = keys.agg((F.max("source_partition") + 1).alias("_inferred"))
        scored = keys.crossJoin(F.broadcast(inferred)).agg(
            F.first("_inferred").alias("_inferred"),
            F.count(F.lit(1)).alias("_total"),
            F.sum(
                F.when((F.col("_hash") % default) == F.col("source_partition"), 1).otherwise(0)
            ).alias("_fit_default"),
            F.sum(
                F.when(
                    (F.col("_hash") % F.col("_inferred")) == F.col("source_partition"), 1
                ).otherwise(0)
            ).alias("_fit_inferred"),
        )
        use_default = (F.col("_inferred") <= default) & (
            F.col("_fit_default") >= F.col("_fit_inferred")
        )
        choice = scored.select(
            F.when(use_default, default).otherwise(F.col("_inferred")).alias("_n"),
            (
                F.when(use_default, F.col("_fit_default")).otherwise(F.col("_fit_inferred")) * 2
                >= F.col("_total")
            ).alias("_usable"),
            "_total",
            F.when(use_default, F.lit("Kafka's default, which fits this export"))
            .otherwise(F.lit("inferred: highest exported partition + 1"))
            .alias("_why"),
        )
    # The one-row sides are broadcast: as a cartesian product Spark recomputed the whole
    # aggregation over the records once per partition (4 minutes at 2.5M records).
    checked = keys.crossJoin(F.broadcast(choice))
    wrong = checked.filter(F.col("_usable") & ~fits)
    misplaced = finding(
        wrong,
        ERROR,
        "wrong_state_partition",
        _msg(
            F.col("_records"),
            " record(s) of this share-partition are on __share_group_state partition ",
            F.col("source_partition"),
            ", but Kafka's partitioner (hash of '",
            _share_partition_text(),
            "') puts it on partition ",
            F.col("_hash") % F.col("_n"),
            " of ",
            F.col("_n"),
            " (",
            F.col("_why"),
            "). Kafka's share coordinator never reads them for this share-partition, while"
            " this replay merges them in log order; check --state-topic-partitions and how"
            " the export was produced",
        ),
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source="share_state",
        source_partition="source_partition",
        source_offset="_first",
        affected="_records",
    )
    skipped = finding(
        choice.filter(~F.col("_usable") & (F.col("_total") > 0)),
        INFO,
        "state_partition_check_skipped",
        _msg(
            "records on the wrong __share_group_state partition were not checked: with ",
            F.col("_n"),
            " partitions (",
            F.col("_why"),
            ") fewer than half of the ",
            F.col("_total"),
            " share-partitions sit where Kafka's partitioner puts them, so the topic has another"
            " partition count; give it with --state-topic-partitions",
        ),
        source="share_state",
        affected="_total",
    )
    return misplaced.unionByName(skipped)


def snapshot_findings(segments: DataFrame) -> DataFrame:
    """Updates that the replay applied with no state before them (from
    `share_partition_segments`: a snapshot or tombstone starts a segment; segment 0 is what
    comes before the first snapshot in the export)."""
    first_update = F.struct("source_partition", F.col("first_update_offset").alias("source_offset"))
    segments = segments.groupBy(*KEY, "segment").agg(
        F.min(
            F.struct(
                "source_partition",
                F.col("first_record.source_offset").alias("source_offset"),
                F.col("first_record.record_type").alias("record_type"),
            )
        ).alias("_first"),
        F.min(F.when(F.col("first_update_offset").isNotNull(), first_update)).alias(
            "_first_update"
        ),
        F.sum("updates").alias("_updates"),
    )
    segments = segments.withColumn("_last_segment", F.max("segment").over(Window.partitionBy(*KEY)))
    starts_with_update = F.col("_first.record_type") == "update"
    after_tombstone = (F.col("_first.record_type") == "tombstone") & (F.col("_updates") > 0)
    final = F.col("segment") == F.col("_last_segment")
    where: dict[str, str | Column | None] = {
        "source": "share_state",
        "group_id": "group_id",
        "topic_id": "topic_id",
        "partition": "partition",
        "source_partition": F.col("_first_update.source_partition"),
        "source_offset": F.col("_first_update.source_offset"),
        "affected": "_updates",
    }
    superseded = finding(
        segments.filter(starts_with_update & ~final),
        INFO,
        "update_before_snapshot",
        _msg(
            F.col("_updates"),
            " ShareUpdate record(s) come before the first ShareSnapshot of this share-partition"
            " in the export (the export starts after Kafka pruned the log, which keeps only"
            " each share-partition's latest snapshot onwards). The history rows up to the"
            " snapshot are partial; the final state is exact",
        ),
        **where,
    )
    without_snapshot = finding(
        segments.filter(starts_with_update & final),
        WARNING,
        "state_without_snapshot",
        _msg(
            "the state of this share-partition was built from ",
            F.col("_updates"),
            " ShareUpdate record(s) with no ShareSnapshot in the export: batches written"
            " before the export starts are missing, so the state may be incomplete, and"
            " Kafka's pruning cut-off does not track it (pruning_cutoff counts it as"
            " untracked). Export __share_group_state from its log start offset",
        ),
        **where,
    )
    after_delete = finding(
        segments.filter(after_tombstone),
        WARNING,
        "update_after_tombstone",
        _msg(
            F.col("_updates"),
            " ShareUpdate record(s) follow a tombstone of this share-partition with no"
            " ShareSnapshot between (Kafka 4.1+ refuses writes to a deleted share-partition):"
            " the export is out of order or incomplete",
            F.when(final, F.lit("; the final state was built from these updates only")).otherwise(
                F.lit("")
            ),
        ),
        **where,
    )
    return superseded.unionByName(without_snapshot).unionByName(after_delete)


def share_state_gap_findings(positions: DataFrame) -> DataFrame:
    """Offsets missing inside the exported range of each `__share_group_state` partition, one
    finding per gap. The topic is not compacted and its writer is not transactional, so a
    gap means the export lost records. A window runs only over partitions with a gap."""
    stats = positions.groupBy("source_partition").agg(
        F.count(F.lit(1)).alias("_rows"),
        F.min("source_offset").alias("_min"),
        F.max("source_offset").alias("_max"),
    )
    gapped = stats.filter(F.col("_max") - F.col("_min") + 1 > F.col("_rows")).select(
        "source_partition"
    )
    ordered = Window.partitionBy("source_partition").orderBy("source_offset")
    gaps = (
        positions.join(F.broadcast(gapped), "source_partition", "left_semi")
        .withColumn("_previous", F.lag("source_offset").over(ordered))
        .filter(F.col("source_offset") - F.col("_previous") > 1)
        .withColumn("_from", F.col("_previous") + 1)
        .withColumn("_to", F.col("source_offset") - 1)
        .withColumn("_missing", F.col("_to") - F.col("_from") + 1)
    )
    return finding(
        gaps,
        WARNING,
        "source_offset_gap",
        _msg(
            "offsets ",
            F.col("_from"),
            "-",
            F.col("_to"),
            " (",
            F.col("_missing"),
            " records) of __share_group_state partition ",
            F.col("source_partition"),
            " are missing from the export. The topic is not compacted and Kafka prunes it only"
            " from its start, so the export lost them: the replay of share-partitions on this"
            " partition may miss updates; re-export the range",
        ),
        source="share_state",
        source_partition="source_partition",
        source_offset="_from",
        affected="_missing",
    )


def consumer_offsets_gap_findings(positions: DataFrame) -> DataFrame:
    """One info finding per `__consumer_offsets` partition with missing offsets: expected
    (compaction and transaction markers leave gaps), listed for completeness checks."""
    stats = positions.groupBy("source_partition").agg(
        F.count(F.lit(1)).alias("_rows"),
        F.min("source_offset").alias("_min"),
        F.max("source_offset").alias("_max"),
    )
    gapped = stats.withColumn("_missing", F.col("_max") - F.col("_min") + 1 - F.col("_rows"))
    return finding(
        gapped.filter(F.col("_missing") > 0),
        INFO,
        "source_offset_gap",
        _msg(
            F.col("_missing"),
            " offsets between ",
            F.col("_min"),
            " and ",
            F.col("_max"),
            " of __consumer_offsets partition ",
            F.col("source_partition"),
            " are not in the export; expected, since the topic is compacted and transaction"
            " markers take offsets",
        ),
        source="consumer_offsets",
        source_partition="source_partition",
        source_offset="_min",
        affected="_missing",
    )


def quarantine_findings(quarantine: DataFrame) -> DataFrame:
    """One warning per (input, reason_kind) of quarantined rows."""
    kinds = quarantine.groupBy("source", "reason_kind").agg(
        F.count(F.lit(1)).alias("_rows"), F.min(F.struct(*LOG_ORDER)).alias("_first")
    )
    topic = (
        F.when(F.col("source") == "share_state", F.lit("__share_group_state"))
        .when(F.col("source") == "consumer_offsets", F.lit("__consumer_offsets"))
        .otherwise(F.col("source"))
    )
    return finding(
        kinds,
        WARNING,
        "decode_quarantine",
        _msg(
            F.col("_rows"),
            " row(s) of the ",
            topic,
            " export could not be decoded (",
            F.col("reason_kind"),
            "); they are in the quarantine table with their bytes and exact reason."
            " Kafka skips such records too, so the replay may differ from the broker's",
        ),
        source=F.col("source"),
        source_partition=F.col("_first.source_partition"),
        source_offset=F.col("_first.source_offset"),
        affected="_rows",
    )


def replay_error_findings(history: DataFrame) -> DataFrame:
    return finding(
        history.filter(F.col("replay_error").isNotNull()),
        ERROR,
        "replay_error",
        _msg(
            "this record could not be applied (",
            F.col("replay_error"),
            "); Kafka's own load fails on it as well. The share-partition's state is the one"
            " before it: find out what wrote the record",
        ),
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source="share_state",
        source_partition="source_partition",
        source_offset="source_offset",
        affected=F.lit(1),
    )


def per_record_findings(
    records: DataFrame,
    history: DataFrame,
    quarantine: DataFrame,
    carried: CarriedAudits | None = None,
) -> DataFrame:
    """Findings of one record or one gap each: replay errors and share-state gaps."""
    if carried is not None and carried.complete():
        return _carried_per_record_findings(carried)
    return replay_error_findings(history).unionByName(
        share_state_gap_findings(exported_positions(records, quarantine, "share_state"))
    )


def _carried_per_record_findings(carried: CarriedAudits) -> DataFrame:
    """Replay errors and share-state gaps of an incremental run: the stored ones, plus those
    of the new rows. New rows all lie above the stored ones on each partition, so a new gap
    is one among them or one between a partition's last stored position and its first new
    one; that boundary comes from the stored pruning_cutoff (`last_exported_offset`)."""
    assert carried.new_history is not None and carried.findings is not None
    assert carried.pruning_cutoff is not None
    stored = carried.findings.filter(
        (F.col("code") == "replay_error")
        | ((F.col("code") == "source_offset_gap") & (F.col("source") == "share_state"))
    )
    boundary = carried.pruning_cutoff.filter(F.col("last_exported_offset").isNotNull()).select(
        "source_partition", F.col("last_exported_offset").alias("source_offset")
    )
    positions = exported_positions(
        carried.new_records, carried.new_quarantine, "share_state"
    ).unionByName(boundary)
    return (
        stored.select(*FINDINGS_SCHEMA.fieldNames())
        .unionByName(replay_error_findings(carried.new_history))
        .unionByName(share_state_gap_findings(positions))
    )


def delivery_limit_findings(counts: DataFrame, delivery_count_limit: int) -> DataFrame:
    """Share-partitions whose final state holds delivery counts above the limit."""
    above = (
        counts.filter(F.col("delivery_count") > F.lit(delivery_count_limit))
        .groupBy(*KEY)
        .agg(F.sum("offsets").alias("_offsets"), F.max("delivery_count").alias("_max"))
    )
    return finding(
        above,
        WARNING,
        "delivery_count_above_limit",
        _msg(
            F.col("_offsets"),
            " offset(s) in the final state have a delivery count above --delivery-count-limit ",
            str(delivery_count_limit),
            " (up to ",
            F.col("_max"),
            "). Kafka archives a record once its count reaches the group's limit, so the"
            " limit is higher (group.share.delivery.count.limit, or the group's"
            " share.delivery.count.limit): run with the limit the group uses",
        ),
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        affected="_offsets",
    )


def _age_at_least(reference: Column, moment: Column, seconds: float) -> Column:
    return (F.unix_micros(reference) - F.unix_micros(moment)) >= F.lit(int(seconds * 1_000_000))


def _hours(reference: Column, moment: Column) -> Column:
    return F.round((F.unix_micros(reference) - F.unix_micros(moment)) / F.lit(3_600_000_000), 1)


def start_offset_moves(history: DataFrame, prior_state: DataFrame | None = None) -> DataFrame:
    """The SINCE and LATEST_TIMESTAMP columns the replay's fold puts on
    share_partition_state, computed from the history with a window (the reference the fold
    is tested against, and what a state built without the fold gets).

    Per share-partition in `history`: SINCE (source_timestamp, source_partition,
    source_offset of the last record after which effective_start_offset differed from the
    row before; the first row counts when it has an offset) and LATEST_TIMESTAMP.

    With `prior_state` (a stored share_partition_state with both columns, whose records all
    come before `history`), each share-partition goes on from its stored values: a seed row
    at its stored last record carries them, as in `sharestate.replay`."""
    moved_at = F.struct("source_timestamp", *LOG_ORDER)
    rows = history.select(
        *KEY,
        *LOG_ORDER,
        "source_timestamp",
        "effective_start_offset",
        F.lit(False).alias("_seed"),
        F.lit(None).cast(from_arrow_type(MOVED_AT_TYPE)).alias("_stored_since"),
    )
    if prior_state is not None:
        seeds = prior_state.join(history.select(*KEY).distinct(), list(KEY), "left_semi").select(
            *KEY,
            F.col("last_source_partition").alias("source_partition"),
            F.col("last_source_offset").alias("source_offset"),
            F.col(LATEST_TIMESTAMP).alias("source_timestamp"),
            "effective_start_offset",
            F.lit(True).alias("_seed"),
            F.col(SINCE).alias("_stored_since"),
        )
        rows = rows.unionByName(seeds)
    eso = F.col("effective_start_offset")
    changed = ~eso.eqNullSafe(F.lag(eso).over(Window.partitionBy(*KEY).orderBy(*LOG_ORDER)))
    return (
        rows.withColumn(
            "_moved",
            F.when(F.col("_seed"), F.col("_stored_since")).when(changed, moved_at),
        )
        .groupBy(*KEY)
        .agg(
            F.max("_moved").alias(SINCE),
            F.max("source_timestamp").alias(LATEST_TIMESTAMP),
        )
    )


def stalled_findings(
    state: DataFrame, span_seconds: float, lag: DataFrame | None = None
) -> DataFrame:
    """Live share-partitions with records waiting (Available or Acquired offsets in the final
    state, or lag > 0) whose effective start offset has not moved for `span_seconds` before
    the export's last record (`state` has the columns of `start_offset_moves`)."""
    waiting = F.col("available_offsets") + F.col("acquired_offsets")
    candidates = _live(state).select(
        *KEY, "effective_start_offset", waiting.alias("_waiting"), F.col(SINCE).alias("_since")
    )
    if lag is not None:
        candidates = candidates.join(
            lag.select(*KEY, F.col("lag").alias("_lag")), list(KEY), "left"
        )
    else:
        candidates = candidates.withColumn("_lag", F.lit(None).cast("long"))
    candidates = candidates.filter(
        (F.col("_waiting") > 0) | F.coalesce(F.col("_lag") > 0, F.lit(False))
    )
    eso = F.col("effective_start_offset")
    reference = state.agg(F.max(LATEST_TIMESTAMP).alias("_end"))
    stalled = candidates.crossJoin(F.broadcast(reference)).filter(
        _age_at_least(F.col("_end"), F.col("_since.source_timestamp"), span_seconds)
    )
    return finding(
        stalled,
        WARNING,
        "spso_stalled",
        _msg(
            "the start offset has stayed at ",
            eso,
            " since ",
            F.col("_since.source_timestamp"),
            " (",
            _hours(F.col("_end"), F.col("_since.source_timestamp")),
            " h before the export's last record, --stall-span ",
            str(round(span_seconds / 3600, 3)),
            " h) while ",
            F.col("_waiting"),
            " offset(s) are Available or Acquired",
            F.when(F.col("_lag").isNotNull(), _msg(" and the lag is ", F.col("_lag"))).otherwise(
                F.lit("")
            ),
            ": check the group's consumers, and poison records at the start offset",
        ),
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source="share_state",
        source_partition=F.col("_since.source_partition"),
        source_offset=F.col("_since.source_offset"),
        affected="_waiting",
    )


def _contains_partition(topics: Column) -> Column:
    return F.exists(
        F.coalesce(topics, F.array()),
        lambda t: (
            (t["topic_id"] == F.col("topic_id"))
            & F.coalesce(F.array_contains(t["partitions"], F.col("partition")), F.lit(False))
        ),
    )


def _contains_topic(topics: Column) -> Column:
    return F.exists(F.coalesce(topics, F.array()), lambda t: t["topic_id"] == F.col("topic_id"))


def group_findings(
    state: DataFrame, groups: DataFrame, group_records: DataFrame, span_seconds: float
) -> DataFrame:
    """Share state that the group metadata does not account for, and partitions stuck in
    initializing (topics in deleting)."""
    live = _live(state).select(*KEY, "last_source_partition", "last_source_offset")
    known = groups.select(
        "group_id",
        F.col("deleted").alias("_group_deleted"),
        F.col("deleted_at_source_offset").alias("_deleted_at"),
        F.col("initializing_topics").alias("_initializing"),
        F.col("initialized_topics").alias("_initialized"),
        F.col("deleting_topics").alias("_deleting"),
        F.col("state_metadata_source_offset").alias("_spm_offset"),
        F.lit(True).alias("_known"),
    )
    joined = live.join(known, "group_id", "left")
    where: dict[str, str | Column | None] = {
        "group_id": "group_id",
        "topic_id": "topic_id",
        "partition": "partition",
        "source": "share_state",
        "source_partition": "last_source_partition",
        "source_offset": "last_source_offset",
        "affected": F.lit(1),
    }
    unknown = finding(
        joined.filter(F.col("_known").isNull()),
        WARNING,
        "state_for_unknown_group",
        _msg(
            "live share state, but __consumer_offsets has no share-group record of group '",
            F.col("group_id"),
            "': the exports are from different times or clusters, or the group's records"
            " are missing from the export",
        ),
        **where,
    )
    deleted = finding(
        joined.filter(F.col("_known") & F.col("_group_deleted")),
        WARNING,
        "state_for_deleted_group",
        _msg(
            "live share state for group '",
            F.col("group_id"),
            "', which __consumer_offsets shows deleted (ShareGroupMetadata tombstone at offset ",
            F.col("_deleted_at"),
            "). Deleting a group deletes its share state (tombstones on __share_group_state):"
            " the state was left behind, or the share-state export ends before the deletion",
        ),
        **where,
    )
    in_initializing = _contains_partition(F.col("_initializing"))
    in_deleting = _contains_topic(F.col("_deleting"))
    not_initialized = (
        F.col("_known")
        & ~F.col("_group_deleted")
        & F.col("_spm_offset").isNotNull()
        & ~_contains_partition(F.col("_initialized"))
    )
    uninitialized = finding(
        joined.filter(not_initialized),
        F.when(in_initializing | in_deleting, F.lit(INFO)).otherwise(F.lit(WARNING)),
        "partition_not_initialized",
        _msg(
            "live share state, but the group's ShareGroupStatePartitionMetadata (offset ",
            F.col("_spm_offset"),
            ") does not list this topic-partition as initialized",
            F.when(in_initializing, F.lit(": it is still initializing"))
            .when(in_deleting, F.lit(": its topic is being deleted"))
            .otherwise(
                F.lit(
                    ": the group no longer consumes it and its state was not deleted, or the"
                    " exports are from different times"
                )
            ),
        ),
        **where,
    )
    reference = group_records.agg(F.max("source_timestamp").alias("_end"))
    listed = groups.filter(~F.col("deleted") & F.col("state_metadata_timestamp").isNotNull())
    live_keys = live.select(*KEY, F.lit(True).alias("_has_state"))
    initializing = (
        listed.select(
            "group_id",
            "state_metadata_source_offset",
            "state_metadata_timestamp",
            "last_source_partition",
            F.explode("initializing_topics").alias("t"),
        )
        .select(
            "group_id",
            F.col("t.topic_id").alias("topic_id"),
            F.col("t.topic_name").alias("_topic_name"),
            F.explode("t.partitions").alias("partition"),
            "state_metadata_source_offset",
            "state_metadata_timestamp",
            "last_source_partition",
        )
        .join(live_keys, list(KEY), "left")
        .crossJoin(F.broadcast(reference))
    )
    old = _age_at_least(F.col("_end"), F.col("state_metadata_timestamp"), span_seconds)
    stuck_init = finding(
        initializing,
        F.when(old, F.lit(WARNING)).otherwise(F.lit(INFO)),
        "stuck_initializing",
        _msg(
            "partition ",
            F.col("partition"),
            " of topic ",
            F.coalesce(F.col("_topic_name"), F.col("topic_id")),
            " has been initializing since at least ",
            F.col("state_metadata_timestamp"),
            " (",
            _hours(F.col("_end"), F.col("state_metadata_timestamp")),
            " h before the __consumer_offsets export's last record)",
            F.when(
                F.col("_has_state"),
                F.lit(
                    "; __share_group_state already holds its state, so the group coordinator"
                    " did not record the completed initialization"
                ),
            ).otherwise(F.lit("; no share state exists for it yet")),
        ),
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source="consumer_offsets",
        source_partition="last_source_partition",
        source_offset="state_metadata_source_offset",
        affected=F.lit(1),
    )
    state_per_topic = live.groupBy("group_id", "topic_id").agg(
        F.count(F.lit(1)).alias("_live_partitions")
    )
    deleting = (
        listed.select(
            "group_id",
            "state_metadata_source_offset",
            "state_metadata_timestamp",
            "last_source_partition",
            F.explode("deleting_topics").alias("t"),
        )
        .select(
            "group_id",
            F.col("t.topic_id").alias("topic_id"),
            F.col("t.topic_name").alias("_topic_name"),
            "state_metadata_source_offset",
            "state_metadata_timestamp",
            "last_source_partition",
        )
        .join(state_per_topic, ["group_id", "topic_id"], "left")
        .crossJoin(F.broadcast(reference))
    )
    stuck_delete = finding(
        deleting,
        F.when(old, F.lit(WARNING)).otherwise(F.lit(INFO)),
        "stuck_deleting",
        _msg(
            "topic ",
            F.coalesce(F.col("_topic_name"), F.col("topic_id")),
            " has been deleting since at least ",
            F.col("state_metadata_timestamp"),
            " (",
            _hours(F.col("_end"), F.col("state_metadata_timestamp")),
            " h before the __consumer_offsets export's last record); ",
            F.coalesce(F.col("_live_partitions"), F.lit(0)),
            " of its share-partitions still have live share state",
        ),
        group_id="group_id",
        topic_id="topic_id",
        source="consumer_offsets",
        source_partition="last_source_partition",
        source_offset="state_metadata_source_offset",
        affected=F.coalesce(F.col("_live_partitions"), F.lit(0)),
    )
    return (
        unknown.unionByName(deleted)
        .unionByName(uninitialized)
        .unionByName(stuck_init)
        .unionByName(stuck_delete)
    )


def lag_findings(lag: DataFrame) -> DataFrame:
    negative = finding(
        lag.filter(F.col("lag") < 0),
        WARNING,
        "negative_lag",
        _msg(
            "lag is ",
            F.col("lag"),
            " (end offset ",
            F.col("end_offset"),
            ", start offset ",
            F.col("start_offset"),
            ", method ",
            F.col("lag_method"),
            "): the end offsets were taken before the share-state export ends; take them after it",
        ),
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source="share_state",
        source_partition="last_source_partition",
        source_offset="last_source_offset",
        affected=F.lit(1),
    )
    missing = finding(
        lag.filter(F.col("end_offset").isNull()),
        INFO,
        "end_offset_missing",
        F.lit(
            "no end offset for this topic-partition in --end-offsets (rows are matched by"
            " topic_id, or by topic name through the group metadata): its lag is unknown"
        ),
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source="share_state",
        source_partition="last_source_partition",
        source_offset="last_source_offset",
        affected=F.lit(1),
    )
    return negative.unionByName(missing)


def findings(
    records: DataFrame,
    state: DataFrame,
    history: DataFrame,
    quarantine: DataFrame,
    counts: DataFrame,
    options: AuditOptions,
    *,
    group_records: DataFrame | None = None,
    groups: DataFrame | None = None,
    lag: DataFrame | None = None,
    carried: CarriedAudits | None = None,
    segments: DataFrame | None = None,
    per_record: DataFrame | None = None,
) -> DataFrame:
    """Every finding, one row each (`FINDINGS_SCHEMA`). With `carried`, findings of one
    record or one gap each are the earlier run's plus those of the new rows. `segments`
    and `per_record` (`share_partition_segments`, `per_record_findings`) are computed
    here unless given."""
    if segments is None:
        segments = share_partition_segments(history)
    if per_record is None:
        per_record = per_record_findings(records, history, quarantine, carried)
    parts = [
        quarantine_findings(quarantine),
        per_record,
        snapshot_findings(segments),
        wrong_state_partition_findings(segments, options.state_topic_partitions),
        delivery_limit_findings(counts, options.delivery_count_limit),
        stalled_findings(state, options.stall_span_seconds, lag),
    ]
    if group_records is not None:
        parts.append(
            consumer_offsets_gap_findings(
                exported_positions(group_records, quarantine, "consumer_offsets")
            )
        )
        if groups is not None:
            parts.append(group_findings(state, groups, group_records, options.stall_span_seconds))
    if lag is not None:
        parts.append(lag_findings(lag))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    # A union of many small parts has a partition per part and shuffle partition: one file
    # each when written. Findings are few; one partition writes one file. repartition, not
    # coalesce: coalesce(1) would pull every part's upstream work (scans of the history)
    # into a single task, and at 2.5M records the findings took 6 minutes that way.
    return out.repartition(1)


def audit(
    records: DataFrame,
    state: DataFrame,
    history: DataFrame,
    quarantine: DataFrame,
    options: AuditOptions | None = None,
    *,
    group_records: DataFrame | None = None,
    end_offsets: DataFrame | None = None,
    carried: CarriedAudits | None = None,
) -> Audits:
    """All audit tables from `share_state_records`, `share_partition_state`,
    `share_partition_history`, `quarantine`, and optionally `share_group_records` and an end
    offsets table. With `carried` (an incremental run), tables that can go on from what an
    earlier run wrote do so, reading only the new records."""
    options = options or AuditOptions()
    if SINCE not in state.columns:  # a state straight from `replay`
        state = state.join(start_offset_moves(history), list(KEY), "left")
    counts = delivery_counts(state, options.delivery_count_limit)
    if carried is not None:
        ranges = archived_ranges(
            carried.new_records, state, options.delivery_count_limit, carried.archived_ranges
        )
    else:
        ranges = archived_ranges(records, state, options.delivery_count_limit)
    groups = share_groups(group_records) if group_records is not None else None
    lag = None
    if end_offsets is not None:
        names = topic_names(group_records) if group_records is not None else None
        lag = share_partition_lag(state, end_offsets, names)
    per_record = per_record_findings(records, history, quarantine, carried)
    if carried is not None and carried.complete():
        assert carried.new_history is not None and carried.pruning_cutoff is not None
        segments = share_partition_segments(carried.new_history, carried.segments)
        gaps = per_record.filter(
            (F.col("code") == "source_offset_gap") & (F.col("source") == "share_state")
        )
        cutoff = carried_pruning_cutoff(
            segments,
            carried.pruning_cutoff,
            exported_positions(carried.new_records, carried.new_quarantine, "share_state"),
            gaps,
        )
    else:
        segments = share_partition_segments(history)
        cutoff = pruning_cutoff(segments, exported_positions(records, quarantine, "share_state"))
    return Audits(
        delivery_counts=counts,
        archived_ranges=ranges,
        poison_messages=poison_messages(ranges),
        archived_messages=archived_messages(ranges),
        segments=segments,
        pruning_cutoff=cutoff,
        findings=findings(
            records,
            state,
            history,
            quarantine,
            counts,
            options,
            group_records=group_records,
            groups=groups,
            lag=lag,
            carried=carried,
            segments=segments,
            per_record=per_record,
        ),
        share_groups=groups,
        share_partition_lag=lag,
    )
