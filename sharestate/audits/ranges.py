"""Archived offset ranges: `archived_ranges`, and its two filters `poison_messages` (archived
at the delivery-count limit) and `archived_messages` (archived below it).

Any decoded snapshot or update that showed offsets as Archived counts, not only the final
state (the start offset moves past archived records, after which no state holds them): the
intervals are merged per share-partition into maximal ranges (a window over the intervals
sorted by first offset numbers the runs of overlapping or touching intervals; the runs are
then aggregated), with the earliest record that showed any part of each range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.kafka.constants import ARCHIVED, SNAPSHOT, UPDATE

#: `archived_ranges.reason` values.
REASON_DELIVERY_LIMIT: Final = "delivery_count_limit"
REASON_BELOW_LIMIT: Final = "below_delivery_limit"
REASON_NEVER_DELIVERED: Final = "never_delivered"
#: The column (and the partition) of the range tables that says a range can no longer
#: change.
SETTLED: Final = "settled"


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
    # (Spark would otherwise shuffle for each, which measured slower from the decoded
    # records to the ranges).
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
    # higher-order `F.filter` over the array element by element in the interpreter, several
    # times slower on many batches.
    batch = F.col("b")
    return (
        records.filter(F.col("record_type").isin(SNAPSHOT, UPDATE))
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


def reasoned_intervals(records: DataFrame, delivery_count_limit: int) -> DataFrame:
    """`archived_intervals` of `records`, each with the `reason` of its range."""
    count = F.col("delivery_count")
    reason = (
        F.when(count >= F.lit(delivery_count_limit), F.lit(REASON_DELIVERY_LIMIT))
        .when(count <= 0, F.lit(REASON_NEVER_DELIVERED))
        .otherwise(F.lit(REASON_BELOW_LIMIT))
    )
    return archived_intervals(records).withColumn("reason", reason)


def final_state_columns(state: DataFrame) -> DataFrame:
    """Per share-partition of `state`, what `_with_final_state` reads of it: whether it is
    deleted, its effective start offset (`_eso`), its settle bound (`_bound`) and its
    Archived batches (`_archived`)."""
    return state.select(
        *KEY,
        F.col("deleted").alias("share_partition_deleted"),
        F.col("effective_start_offset").alias("_eso"),
        _settle_bound().alias("_bound"),
        F.filter("state_batches", lambda b: b["delivery_state"] == F.lit(ARCHIVED)).alias(
            "_archived"
        ),
    )


def _with_final_state(ranges: DataFrame, state: DataFrame) -> DataFrame:
    """Add what the final state says about each range: still archived there, whether the
    share-partition's start offset has moved past it, and whether it is settled (below
    its share-partition's settle bound, `settle_bounds`: no later record can change it)."""
    final = final_state_columns(state)
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
        # last + 1 < bound, written so that Long.MAX_VALUE does not overflow.
        .withColumn(SETTLED, F.coalesce(last < F.col("_bound") - 1, F.lit(False)))
        .drop("_eso", "_archived", "_bound")
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
    by = [*KEY, "reason"]
    intervals = reasoned_intervals(records, delivery_count_limit)
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


def _settle_bound() -> Column:
    """Of a state row: the offset below which its share-partition's archived ranges are
    settled. A live share-partition holds no batch below its start offset or its first
    batch, whichever is lower, and Kafka writes none there while the start offset does not
    go back; so a range that ends two or more below that offset can neither be merged with
    a later interval (it would have to overlap or touch it) nor change what the final state
    says of it (not in the state, below the start offset). Null for a deleted one."""
    first_batch = F.array_min(F.transform("state_batches", lambda b: b["first_offset"]))
    live = ~F.coalesce(F.col("deleted"), F.lit(False))
    # `least` skips a null: a state without batches is bounded by its start offset.
    return F.when(live, F.least("start_offset", first_batch))


def settle_bounds(state: DataFrame) -> DataFrame:
    """Per share-partition of `state` (`_bound`): the offset below which its archived ranges
    are settled (`_settle_bound`)."""
    return state.select(*KEY, _settle_bound().alias("_bound"))


def final_with_stored_bounds(new_state: DataFrame, stored_state: DataFrame) -> DataFrame:
    """`final_state_columns` of `new_state` (an increment's touched keys after it), each
    with its stored settle bound `_old` (`settle_bounds` of `stored_state`; null where it has
    no stored state or a deleted one): what an increment reads to find which of its stored
    ranges can change (`ranges_arrow.refresh_scope`) and what the final state says of them.

    A stored range's columns, `settled` included, are those its share-partition's stored
    state gives: every run that touches a share-partition computes its ranges that are not
    settled again, and a settled one stays so while the bound does not go back."""
    stored_bounds = settle_bounds(stored_state).withColumnRenamed("_bound", "_old")
    return final_state_columns(new_state).join(stored_bounds, list(KEY), "left")


def poison_messages(ranges: DataFrame) -> DataFrame:
    """Ranges archived at or above the delivery-count limit (from `archived_ranges`)."""
    return ranges.filter(F.col("reason") == REASON_DELIVERY_LIMIT).drop("reason")


def archived_messages(ranges: DataFrame) -> DataFrame:
    """Ranges archived below the delivery-count limit (from `archived_ranges`)."""
    return ranges.filter(F.col("reason") != REASON_DELIVERY_LIMIT)
