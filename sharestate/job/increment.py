"""An incremental run's table changes: every table brought up to date from the new records
and the stored rows of what they touch, as a full run over everything would leave it.

Share-partitions with new records are one of two kinds:

* carried on (`ongoing`): their new records all come after the stored ones, on the one
  `__share_group_state` partition they have always been on. Their records are replayed from
  their stored state (`sharestate.replay` with a prior state), and each table changes only
  where they are: see the rule beside each step below.
* replayed again (`again`): a backfilled record lies among their stored ones (it arrived
  below the checkpoint), or their records are on more than one state-topic partition (log
  order then interleaves old and new). Their stored records are read back and replayed from
  the start with the new ones, and every row of theirs in every table is replaced.

The tables of one row per record gain the new rows (those replayed again lose and regain
theirs); the tables of one row per key replace the rows of the keys the increment touches,
in one MERGE each (`TableStore.replace`); the findings and the small per-partition tables
are recomputed from state-sized inputs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.arrow_keys import distinct_keys, with_keys, without_keys
from sharestate.audits import (
    REASON_DELIVERY_LIMIT,
    SEGMENT_KEY,
    archived_messages,
    archived_ranges,
    delivery_counts,
    poison_messages,
    segments_arrow,
)
from sharestate.audits.ranges import SETTLED, refresh_scope
from sharestate.decode.columns import KEY
from sharestate.io.checkpoint import PLACEMENTS_TABLE
from sharestate.io.store import Change, TableStore, keys_where
from sharestate.job.cache import CacheScope
from sharestate.job.side_by_side import run_side_by_side
from sharestate.replay import replay

log = logging.getLogger("sharestate")

RANGE_IDENTITY = (*KEY, "reason", "first_offset")

#: What a caller computes beside a step's own work (`write_segments`, `run_incremental`).
Beside = TypeVar("Beside")


@dataclass
class Increment:
    """This run's new decoded records and group records, the stored state, and what the
    steps computed so far (filled in as the run goes)."""

    store: TableStore
    cache: CacheScope
    kafka: tuple[int, int]
    delivery_count_limit: int
    #: Every new share-state record (new and backfilled), decoded.
    records: DataFrame
    #: (source_partition, source_offset) of the backfilled share-state rows.
    backfill_positions: DataFrame
    stored_state: DataFrame
    #: `share_partition_placements` of the stored segments (a row per share-partition and
    #: state-topic partition).
    stored_placements: DataFrame
    #: Every new group record (with --consumer-offsets).
    group_records: DataFrame | None = None
    #: The keys replayed from their stored state, and those replayed again.
    ongoing: DataFrame = field(init=False)
    again: DataFrame = field(init=False)
    #: The keys replayed again, on the driver.
    again_keys: pa.Table = field(init=False)
    again_count: int = field(init=False)
    #: This run's history rows (ongoing: the new ones; replayed again: all of theirs).
    history: DataFrame = field(init=False)
    #: The state rows of every key the increment touches, and the whole state after it.
    new_state: DataFrame = field(init=False)
    state: DataFrame = field(init=False)
    #: The touched keys' rows of the segments table after the increment, and the
    #: placements of every key after it.
    touched_segments: DataFrame = field(init=False)
    placements: DataFrame = field(init=False)
    #: The records of the keys replayed again (stored and new).
    again_records: DataFrame = field(init=False)
    changes: list[Change] = field(default_factory=list)
    #: Per reason: (ranges, offsets) this run added, less those it removed.
    range_totals: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The tables changed so far, in order (a failed run puts them back).
    written: list[str] = field(default_factory=list)

    def record(self, change: Change) -> None:
        """Note a change, and log it."""
        self.changes.append(change)
        if change.version is not None and change.table not in self.written:
            self.written.append(change.table)
        log.info("%s: %s", change.table, change.describe())

    def keep(self, df: DataFrame) -> DataFrame:
        """`df` computed now and kept, its lineage cut: an increment's intermediate results
        are small and each is read by several later ones, whose plans would otherwise hold
        (and print, when cached) the whole plan of everything before them, again and again."""
        return self.cache.checkpoint(df)

    def touched(self) -> DataFrame:
        """Every key the increment touches (ongoing and replayed again): those of the new
        state rows."""
        return self.new_state.select(*KEY)


def split_keys(increment: Increment) -> None:
    """Which touched keys are replayed from their stored state and which again from the
    start: backfilled ones, and those with records on more than one state-topic partition
    after this run."""
    records = increment.records
    touched = records.select(*KEY).distinct()
    positions = increment.backfill_positions.select(
        F.col("partition").alias("source_partition"), F.col("offset").alias("source_offset")
    )
    backfilled = (
        records.join(positions, ["source_partition", "source_offset"], "left_semi")
        .select(*KEY)
        .distinct()
    )
    placements = (
        records.select(*KEY, "source_partition")
        .unionByName(
            increment.stored_placements.join(touched, list(KEY), "left_semi").select(
                *KEY, "source_partition"
            )
        )
        .distinct()
    )
    misplaced = placements.groupBy(*KEY).count().filter(F.col("count") > 1).select(*KEY)
    # Few keys, if any: collected once, they cost no further job wherever they are read.
    again = [tuple(row) for row in backfilled.unionByName(misplaced).distinct().collect()]
    spark = records.sparkSession
    increment.again = spark.createDataFrame(again, _KEY_SCHEMA)
    increment.again_keys = pa.Table.from_pylist(
        [dict(zip(KEY, key, strict=True)) for key in again], schema=_KEY_ARROW_SCHEMA
    )
    increment.again_count = len(again)
    increment.ongoing = touched.join(increment.again, list(KEY), "left_anti")


_KEY_SCHEMA = "group_id string, topic_id string, partition int"
_KEY_ARROW_SCHEMA = pa.schema(
    [("group_id", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32())]
)


def replay_increment(increment: Increment) -> None:
    """Replay the ongoing keys' new records from their stored state, and the keys replayed
    again from their first stored record."""
    records = increment.records
    ongoing = replay(
        records.join(increment.ongoing, list(KEY), "left_semi"),
        increment.kafka,
        increment.stored_state,
    )
    history, new_state = ongoing.history, ongoing.state
    increment.again_records = records.limit(0)
    if increment.again_count:
        stored = increment.store.read("share_state_records", small=False)
        again_records = increment.keep(
            stored.join(increment.again, list(KEY), "left_semi").unionByName(
                records.join(increment.again, list(KEY), "left_semi")
            )
        )
        increment.again_records = again_records
        again = replay(again_records, increment.kafka)
        history = history.unionByName(again.history)
        new_state = new_state.unionByName(again.state)
    increment.history = increment.keep(history)
    increment.new_state = increment.keep(new_state)
    touched = increment.new_state.select(*KEY)
    untouched = increment.stored_state.join(touched, list(KEY), "left_anti")
    increment.state = increment.keep(untouched.unionByName(increment.new_state))


def write_history(increment: Increment, *, row_count: int | None) -> None:
    """share_partition_history: append the new rows; the keys replayed again lose their
    stored rows for the replayed ones (one MERGE)."""
    store = increment.store
    if increment.again_count:
        change = store.replace(
            "share_partition_history",
            increment.history,
            increment.again,
            KEY,
            row_count=row_count,
        )
    else:
        change = store.append("share_partition_history", increment.history, row_count=row_count)
    increment.record(change)


def write_state(increment: Increment) -> None:
    """share_partition_state and delivery_counts: the rows of the touched keys replaced
    (both are functions of each key's state alone)."""
    touched = increment.touched()
    store = increment.store
    increment.record(store.replace("share_partition_state", increment.new_state, touched, KEY))
    counts = delivery_counts(increment.new_state, increment.delivery_count_limit)
    increment.record(store.replace("delivery_counts", counts, touched, KEY))


def write_segments(increment: Increment, beside: Callable[[], Beside]) -> Beside:
    """share_partition_segments: an ongoing key's new history rows aggregate into the
    segments they belong to (its last stored segment goes on, later ones are new), and each
    column combines with the stored row's by sum, min or max; the keys replayed again get
    their segments anew. Only the touched keys' stored rows are read, and only the rows of
    the segments that change are written. The placements change where the touched keys'
    segments do. Computed on the driver in Arrow (`segments_arrow`): the touched keys are a
    few thousand, and as Spark queries these steps cost more to plan and start than to
    compute. `beside` runs once the touched keys' segments are known
    (`Increment.touched_segments`), beside the two commits; its result is returned."""
    store = increment.store
    # One Spark job: the rows of the touched keys' history the segments read.
    history = increment.history.select(*segments_arrow.HISTORY_COLUMNS).toArrow()
    touched = distinct_keys(history, KEY)
    stored = store.read_arrow_matching("share_partition_segments", touched, KEY)
    again = increment.again_keys
    new = segments_arrow.history_segments(without_keys(history, again, KEY))
    segments = segments_arrow.merge_segments(without_keys(stored, again, KEY), new)
    changed = new.select(list(SEGMENT_KEY))
    delete = changed
    if increment.again_count:
        again_segments = segments_arrow.history_segments(with_keys(history, again, KEY))
        segments = pa.concat_tables([segments, again_segments])
        changed = pa.concat_tables([changed, again_segments.select(list(SEGMENT_KEY))])
        stored_again = with_keys(stored, again, KEY).select(list(SEGMENT_KEY))
        delete = distinct_keys(
            pa.concat_tables([changed, stored_again.cast(changed.schema)]), SEGMENT_KEY
        )
    spark = store.spark
    increment.touched_segments = spark.createDataFrame(segments)
    stored_placements = store.read_arrow(PLACEMENTS_TABLE)
    touched_placements = segments_arrow.placements(segments)
    increment.placements = spark.createDataFrame(
        pa.concat_tables(
            [
                without_keys(stored_placements, touched, KEY).cast(touched_placements.schema),
                touched_placements,
            ]
        )
    )

    def write_changed_segments() -> None:
        rows = with_keys(segments, changed, SEGMENT_KEY)
        increment.record(store.replace_arrow("share_partition_segments", rows, delete, SEGMENT_KEY))

    def write_placements() -> None:
        increment.record(store.replace_arrow(PLACEMENTS_TABLE, touched_placements, touched, KEY))

    *_, result = run_side_by_side([write_changed_segments, write_placements, beside])
    found: Beside = result
    return found


def write_ranges(increment: Increment) -> None:
    """poison_messages and archived_messages: the touched keys' stored ranges that the
    increment can change (those not settled, and every one of a reopened key) are
    merged with the new archived intervals and given their final-state columns again; the
    keys replayed again get their ranges anew from all their records. Only those stored
    ranges are read."""
    limit = increment.delivery_count_limit
    ongoing_records = increment.records.join(increment.ongoing, list(KEY), "left_semi")
    ongoing_state = increment.new_state.join(increment.ongoing, list(KEY), "left_semi")
    scope = refresh_scope(increment.stored_state, ongoing_state, ongoing_records)
    if increment.again_count:
        # Every stored range of a key replayed again is replaced: the key counts as reopened.
        scope = scope.unionByName(
            increment.again.select(
                *KEY, F.lit(True).alias("_reopened"), F.lit(True).alias("_settled_changes")
            )
        )
    # Kept: both the new rows and the rows to remove are computed from it.
    removed = increment.keep(_stored_ranges(increment, scope))
    refresh = removed.join(increment.ongoing, list(KEY), "left_semi")
    rows = archived_ranges(ongoing_records, ongoing_state, limit, stored=refresh)
    if increment.again_count:
        again_state = increment.new_state.join(increment.again, list(KEY), "left_semi")
        rows = rows.unionByName(archived_ranges(increment.again_records, again_state, limit))
    rows = increment.keep(rows)
    poison = F.col("reason") == REASON_DELIVERY_LIMIT
    identity = list(RANGE_IDENTITY)
    poison_identity = [c for c in identity if c != "reason"]
    store = increment.store
    # Each change recorded as it commits: a run that fails puts back what was committed.
    run_side_by_side(
        [
            lambda: increment.record(
                store.replace(
                    "poison_messages",
                    poison_messages(rows),
                    removed.filter(poison).select(*poison_identity).distinct(),
                    poison_identity,
                )
            ),
            lambda: increment.record(
                store.replace(
                    "archived_messages",
                    archived_messages(rows),
                    removed.filter(~poison).select(*identity).distinct(),
                    identity,
                )
            ),
        ]
    )
    increment.range_totals = _range_deltas(rows, removed)


def compact_written(increment: Increment) -> None:
    """Compact the tables this run changed where small files piled up (`TableStore.compact`):
    a run appends a file to the per-record tables and to the settled ranges, so a schedule
    of runs would otherwise make every later one read more files."""
    for name in list(increment.written):
        change = increment.store.compact(name)
        if change.version is not None:
            increment.record(change)


def _stored_ranges(increment: Increment, scope: DataFrame) -> DataFrame:
    """The stored ranges (poison_messages with `reason`, and archived_messages) of the keys
    of `scope` (`refresh_scope`) that the increment can change: those not settled, and
    every one of a reopened key. The tables are partitioned by `settled`: the settled
    ranges, nearly all of them, are read only for reopened keys that have some (few, if
    any: a deleted share-partition, a start offset that went back)."""
    store = increment.store
    on = list(KEY)
    every = store.keys_for_reads(scope, increment.keep)
    reopened = keys_where(every, "_settled_changes")
    # Side by side: where the output is local each reads its partition with delta-rs on the
    # driver.
    reads: list[DataFrame] = run_side_by_side(
        [
            partial(store.read_rows_matching, name, keys, on, partition=(SETTLED, settled))
            for name in ("poison_messages", "archived_messages")
            for keys, settled in ((every, False), (reopened, True))
        ]
    )
    poison_open, poison_settled, archived_open, archived_settled = reads
    poison = poison_open.unionByName(poison_settled).withColumn(
        "reason", F.lit(REASON_DELIVERY_LIMIT)
    )
    return poison.unionByName(archived_open.unionByName(archived_settled))


def _range_deltas(added: DataFrame, removed: DataFrame) -> dict[str, tuple[int, int]]:
    """Per reason: ranges and offsets `added` less `removed` (for the run summary)."""
    signed = added.select("reason", F.lit(1).alias("_sign"), "offsets").unionByName(
        removed.select("reason", F.lit(-1).alias("_sign"), "offsets")
    )
    totals = signed.groupBy("reason").agg(
        F.sum("_sign").alias("n"), F.sum(F.col("_sign") * F.col("offsets")).alias("o")
    )
    return {r["reason"]: (int(r["n"]), int(r["o"] or 0)) for r in totals.collect()}
