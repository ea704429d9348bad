"""An incremental run's table changes: every table brought up to date from the new records
and the stored rows of what they touch, as a full run over everything would leave it.

Share-partitions with new records are one of two kinds:

* carried on (`ongoing`): their new records all come after the stored ones, on the one
  `__share_group_state` partition they have always been on. Their records are replayed from
  their stored state (`sharestate.replay.arrow` with a prior state), and each table changes only
  where they are: see the rule beside each step below.
* replayed again (`again`): a backfilled record lies among their stored ones (it arrived
  below the checkpoint), or their records are on more than one state-topic partition (log
  order then interleaves old and new). Their stored records are read back and replayed from
  the start with the new ones, and every row of theirs in every table is replaced.

The tables of one row per record gain the new rows (those replayed again lose and regain
theirs); the tables of one row per key replace the rows of the keys the increment touches,
in one MERGE each (`TableStore.replace_arrow`); the findings and the small per-partition
tables are recomputed from state-sized inputs. Every step computes on the driver, in Arrow:
an increment's new rows are at most `incremental.LARGE_INCREMENT_ROWS`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import distinct_keys, rows_by_key, with_keys, without_keys
from sharestate.audits import counts_arrow, ranges_arrow, segments_arrow
from sharestate.audits.ranges_arrow import REASON_DELIVERY_LIMIT
from sharestate.audits.segments_arrow import SEGMENT_KEY
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.io.checkpoint import PARTITION_COLUMNS, PLACEMENTS_TABLE
from sharestate.io.store import Change, TableStore
from sharestate.job.side_by_side import run_side_by_side
from sharestate.replay.arrow import replay_table

log = logging.getLogger("sharestate")

RANGE_IDENTITY = (*KEY, "reason", "first_offset")
#: The column the ranges' tables are partitioned by.
SETTLED: Final = PARTITION_COLUMNS["archived_messages"][0]


@dataclass(frozen=True)
class DriverRows:
    """An increment's new rows on the driver, as Arrow (the share-state records, the group
    records with --consumer-offsets, and the quarantined rows of both inputs)."""

    records: pa.Table
    group_records: pa.Table | None
    quarantine: pa.Table
    #: source, source_partition, source_offset of the rows that arrived below the checkpoint.
    backfilled: pa.Table


#: What a caller computes beside a step's own work (`write_segments`, `run_incremental`).
Beside = TypeVar("Beside")


@dataclass
class Increment:
    """This run's new rows, and what the steps computed so far (filled in as the run goes),
    all on the driver, as Arrow."""

    store: TableStore
    kafka: tuple[int, int]
    delivery_count_limit: int
    #: Every new share-state record (new and backfilled) and group record, decoded, and the
    #: new quarantined rows.
    rows: DriverRows
    #: The touched keys (those of the new records) and those replayed again.
    touched_keys: pa.Table = field(init=False)
    again_keys: pa.Table = field(init=False)
    again_count: int = field(init=False)
    #: This run's history rows (ongoing: the new ones; replayed again: all of theirs).
    history: pa.Table = field(init=False)
    #: The touched keys' stored state (as read before the run changed the table), their
    #: state after the run, its delivery counts, and the whole state after the run.
    touched_state: pa.Table = field(init=False)
    new_state: pa.Table = field(init=False)
    delivery_counts: pa.Table = field(init=False)
    state: pa.Table = field(init=False)
    #: This run's exported `__share_group_state` positions (source_partition, source_offset:
    #: its decoded and quarantined rows): the gaps, the pruning cut-off and the
    #: checkpoint's extents read them.
    share_state_positions: pa.Table = field(init=False)
    #: The touched keys' rows of the segments table after the increment, and the
    #: placements of every key after it.
    touched_segments: pa.Table = field(init=False)
    placement_rows: pa.Table = field(init=False)
    #: The records of the keys replayed again (stored and new).
    again_records: pa.Table = field(init=False)
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


def split_keys(increment: Increment, backfilled: pa.Table) -> None:
    """Which touched keys are replayed from their stored state and which again from the
    start: backfilled ones, and those with records on more than one state-topic partition
    after this run (the stored placements tell the keys already on another partition).
    `backfilled`: (source_partition, source_offset) of the backfilled share-state rows."""
    records = increment.rows.records
    flags = np.zeros(records.num_rows, dtype=bool)
    flags[rows_by_key(records, backfilled, LOG_ORDER, "left semi").to_numpy()] = True
    found = (
        records.select([*KEY, "source_partition"])
        .append_column("_backfilled", pa.array(flags))
        .group_by(list(KEY), use_threads=False)
        .aggregate(
            [("source_partition", "min"), ("source_partition", "max"), ("_backfilled", "any")]
        )
    )
    names = {"source_partition_min": "_lowest", "source_partition_max": "_highest"}
    names["_backfilled_any"] = "_backfilled"
    keys = found.select([*KEY, *names]).rename_columns([*KEY, *names.values()])
    typed = keys.select(list(KEY)).cast(_KEY_ARROW_SCHEMA)
    stored = increment.store.read_arrow(PLACEMENTS_TABLE)
    on_stored = typed.append_column("_lowest", keys.column("_lowest")).join(
        stored.select([*KEY, "source_partition"]).cast(
            pa.schema([*_KEY_ARROW_SCHEMA, pa.field("source_partition", pa.int32())])
        ),
        list(KEY),
        join_type="inner",
    )
    elsewhere = on_stored.filter(
        pc.not_equal(on_stored.column("_lowest"), on_stored.column("source_partition"))
    )
    moved = np.zeros(typed.num_rows, dtype=bool)
    moved[rows_by_key(typed, elsewhere, KEY, "left semi").to_numpy()] = True
    is_again = pc.or_(
        pc.not_equal(keys.column("_lowest"), keys.column("_highest")), pa.array(moved)
    )
    is_again = pc.or_(is_again, pc.fill_null(keys.column("_backfilled"), False))
    increment.touched_keys = typed
    increment.again_keys = typed.filter(is_again)
    increment.again_count = increment.again_keys.num_rows


_KEY_ARROW_SCHEMA = pa.schema(
    [("group_id", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32())]
)


def replay_keys(increment: Increment, stored_state: pa.Table) -> None:
    """Replay the ongoing keys' new records from their stored state, and the keys replayed
    again from their first stored record (`sharestate.replay.arrow`); `stored_state`: the
    whole stored state. The keys replayed again read their stored records with one Spark
    query."""
    records = increment.rows.records
    touched_state = with_keys(stored_state, increment.touched_keys, KEY)
    ongoing_keys = without_keys(increment.touched_keys, increment.again_keys, KEY)
    ongoing = replay_table(
        with_keys(records, ongoing_keys, KEY),
        increment.kafka,
        with_keys(touched_state, ongoing_keys, KEY),
    )
    histories, states = [ongoing.history], [ongoing.state]
    again_records = records.schema.empty_table()
    if increment.again_count:
        stored = increment.store.read_arrow_joined("share_state_records", increment.again_keys, KEY)
        again_records = pa.concat_tables(
            [
                stored.select(records.column_names).cast(records.schema),
                with_keys(records, increment.again_keys, KEY),
            ]
        )
        again = replay_table(again_records, increment.kafka)
        histories.append(again.history)
        states.append(again.state)
    state_schema = stored_state.schema
    new_state = pa.concat_tables([s.select(state_schema.names).cast(state_schema) for s in states])
    history = pa.concat_tables(histories)
    increment.again_records = again_records
    increment.history = history.cast(increment.store.arrow_schema("share_partition_history"))
    increment.touched_state = touched_state
    increment.new_state = new_state
    increment.delivery_counts = counts_arrow.delivery_counts(
        new_state, increment.delivery_count_limit
    )
    increment.state = pa.concat_tables(
        [without_keys(stored_state, increment.touched_keys, KEY), new_state]
    )


def write_history(increment: Increment) -> None:
    """share_partition_history: append the new rows; the keys replayed again lose their
    stored rows for the replayed ones (one MERGE)."""
    store = increment.store
    rows = increment.history
    if increment.again_count:
        change = store.replace_arrow("share_partition_history", rows, increment.again_keys, KEY)
    else:
        change = store.append_arrow("share_partition_history", rows)
    increment.record(change)


def write_state(increment: Increment) -> None:
    """share_partition_state and delivery_counts: the rows of the touched keys replaced
    (both are functions of each key's state alone)."""
    store = increment.store
    state = store.replace_arrow(
        "share_partition_state", increment.new_state, increment.touched_keys, KEY
    )
    increment.record(state)
    counts = increment.delivery_counts
    increment.record(store.replace_arrow("delivery_counts", counts, increment.touched_keys, KEY))


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
    history = increment.history
    touched = increment.touched_keys
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
    increment.touched_segments = segments
    stored_placements = store.read_arrow(PLACEMENTS_TABLE)
    touched_placements = segments_arrow.placements(segments)
    placements = pa.concat_tables(
        [
            without_keys(stored_placements, touched, KEY).cast(touched_placements.schema),
            touched_placements,
        ]
    )
    increment.placement_rows = placements

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
    ranges are read. Computed on the driver in Arrow (`ranges_arrow`), as are the commits
    and the run's totals."""
    limit = increment.delivery_count_limit
    ongoing_keys = without_keys(increment.touched_keys, increment.again_keys, KEY)
    final = ranges_arrow.final_with_stored_bounds(
        with_keys(increment.new_state, ongoing_keys, KEY), increment.touched_state
    )
    intervals = ranges_arrow.reasoned_intervals(
        with_keys(increment.rows.records, ongoing_keys, KEY), limit
    )
    scope = ranges_arrow.refresh_scope(final, intervals)
    if increment.again_count:
        # Every stored range of a key replayed again is replaced: the key counts as reopened.
        flags = pa.array([True] * increment.again_count)
        again_scope = increment.again_keys.append_column("_reopened", flags).append_column(
            "_settled_changes", flags
        )
        scope = pa.concat_tables([scope.cast(again_scope.schema), again_scope])
    removed = _stored_ranges(increment, scope)
    refresh = with_keys(removed, ongoing_keys, KEY)
    rows = ranges_arrow.archived_ranges(intervals, final, stored=refresh)
    if increment.again_count:
        again_rows = ranges_arrow.archived_ranges(
            ranges_arrow.reasoned_intervals(increment.again_records, limit),
            ranges_arrow.final_state_columns(
                with_keys(increment.new_state, increment.again_keys, KEY)
            ),
        )
        rows = pa.concat_tables([rows, again_rows.select(rows.column_names).cast(rows.schema)])
    poison = pc.equal(rows.column("reason"), REASON_DELIVERY_LIMIT)
    removed_poison = pc.equal(removed.column("reason"), REASON_DELIVERY_LIMIT)
    identity = list(RANGE_IDENTITY)
    poison_identity = [c for c in identity if c != "reason"]
    store = increment.store
    # Each change recorded as it commits: a run that fails puts back what was committed.
    run_side_by_side(
        [
            lambda: increment.record(
                store.replace_arrow(
                    "poison_messages",
                    rows.filter(poison).drop_columns(["reason"]),
                    distinct_keys(removed.filter(removed_poison), poison_identity),
                    poison_identity,
                )
            ),
            lambda: increment.record(
                store.replace_arrow(
                    "archived_messages",
                    rows.filter(pc.invert(poison)),
                    distinct_keys(removed.filter(pc.invert(removed_poison)), identity),
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


def _stored_ranges(increment: Increment, scope: pa.Table) -> pa.Table:
    """The stored ranges (poison_messages with `reason`, and archived_messages) of the keys
    of `scope` (`ranges_arrow.refresh_scope`) that the increment can change: those not
    settled, and every one of a reopened key, on the driver. The tables are partitioned by
    `settled`: the settled ranges, nearly all of them, are read only for reopened keys that
    have some (few, if any: a deleted share-partition, a start offset that went back)."""
    store = increment.store
    on = list(KEY)
    reopened = scope.filter(pc.field("_settled_changes"))
    # Side by side: where the output is local each reads its partition with delta-rs on the
    # driver.
    reads: list[pa.Table] = run_side_by_side(
        [
            partial(store.read_arrow_matching, name, keys, on, partition=(SETTLED, settled))
            for name in ("poison_messages", "archived_messages")
            for keys, settled in ((scope, False), (reopened, True))
        ]
    )
    poison_open, poison_settled, archived_open, archived_settled = reads
    poison = pa.concat_tables([poison_open, poison_settled.cast(poison_open.schema)])
    poison = poison.append_column(
        "reason", pa.array([REASON_DELIVERY_LIMIT] * poison.num_rows, pa.string())
    )
    archived = pa.concat_tables([archived_open, archived_settled.cast(archived_open.schema)])
    return pa.concat_tables([poison.select(archived.column_names).cast(archived.schema), archived])


def _range_deltas(added: pa.Table, removed: pa.Table) -> dict[str, tuple[int, int]]:
    """Per reason: ranges and offsets `added` less `removed` (for the run summary)."""
    totals: dict[str, tuple[int, int]] = {}
    for table, sign in ((added, 1), (removed, -1)):
        counted = table.group_by("reason").aggregate([([], "count_all"), ("offsets", "sum")])
        for reason, count, offsets in zip(
            *(counted.column(c).to_pylist() for c in ("reason", "count_all", "offsets_sum")),
            strict=True,
        ):
            ranges, total = totals.get(reason, (0, 0))
            totals[reason] = (ranges + sign * count, total + sign * (offsets or 0))
    return totals
