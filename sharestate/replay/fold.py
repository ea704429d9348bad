"""The replay's inner loop: sorted decoded records in, the state after every record out.

Pure Python over Arrow batches, no Spark. `sharestate.replay.state.apply_record` is the readable
reference of what one record does; this module computes the same states (checked against
Kafka's corpus in tests/kafka/test_fold.py) at a cost per record that does not grow with the
number of in-flight batches:

* The state lives in mutable locals, not a new immutable state per record.
* Kafka 4.4+ merges by a sweep whose output is canonical (sorted, disjoint, touching
  batches differ). Once the batches are canonical, an update only changes the batches
  that overlap or touch its own, so only those are re-swept and spliced back; a batch
  elsewhere cannot change (the sweep's output for disjoint, non-touching stretches is
  independent). Verbatim lists (a snapshot, an update that starts a state, any input
  with batches ending before they start) take the full merge.
* Counts of offsets by delivery state are adjusted by what changed.
* Output columns are built in bulk; columns that only pass through are not touched.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any, Final

import pyarrow as pa

from sharestate.decode.columns import KEY, STATE_BATCH_TYPE, STATE_BATCHES_TYPE
from sharestate.kafka.constants import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    LONG_MAX,
    TERMINAL,
    as_java_long,
)
from sharestate.replay.combiner import LATEST, SWEEP_SINCE, Batch, combine, sweep

COUNT_COLUMNS: Final = {
    "available_offsets": AVAILABLE,
    "acquired_offsets": ACQUIRED,
    "acknowledged_offsets": ACKNOWLEDGED,
    "archived_offsets": ARCHIVED,
}
#: share_partition_state columns: when (source_timestamp and log position of the record)
#: the effective start offset last moved, and the share-partition's latest record time.
SINCE: Final = "effective_start_offset_since"
LATEST_TIMESTAMP: Final = "latest_source_timestamp"
MOVED_AT_TYPE: Final = pa.struct(
    [
        pa.field("source_timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("source_partition", pa.int32()),
        pa.field("source_offset", pa.int64()),
    ]
)
#: Columns copied from the input row to its history row.
PASSTHROUGH_FIELDS: Final = [
    pa.field("group_id", pa.string()),
    pa.field("topic_id", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("segment", pa.int64()),
    pa.field("source_partition", pa.int32()),
    pa.field("source_offset", pa.int64()),
    pa.field("source_timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("record_type", pa.string()),
]
#: Columns the fold computes, in the order of the tuple `_Segment.row` returns.
COMPUTED_FIELDS: Final = [
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
    # Set when the record could not be applied (the state is left as it was).
    pa.field("replay_error", pa.string()),
]
#: One row per applied record: the state after it. `state_batches` is set on each
#: segment's last row (and on the last row of an input batch); elsewhere it is null.
HISTORY_FIELDS: Final = [
    *PASSTHROUGH_FIELDS,
    *COMPUTED_FIELDS[:-1],
    pa.field("state_batches", STATE_BATCHES_TYPE),
    COMPUTED_FIELDS[-1],
    # Source offset of the share-partition's latest snapshot at or before this record.
    pa.field("last_snapshot_offset", pa.int64()),
    # True on the share-partition's last row (its final state); the rows of a
    # share-partition must be contiguous in the input for this to hold.
    pa.field("last_of_share_partition", pa.bool_()),
    # On the share-partition's last row only: the latest log position after which
    # effective_start_offset differed from the row before (the first row counts when it
    # has one), and the latest source_timestamp. Folded here, in log order, rather than by
    # a window over the whole history afterwards.
    pa.field(SINCE, MOVED_AT_TYPE),
    pa.field(LATEST_TIMESTAMP, pa.timestamp("us", tz="UTC")),
]
#: record_type of the rows an incremental run adds in front of a share-partition's new
#: records: the state (or deletion) the previous run ended with.
SEED: Final = "stored_state"
SEED_DELETED: Final = "stored_deleted"
#: The record's state among the fold's input columns, typed as the history has them.
_SCALAR_INPUT: Final = (
    "start_offset",
    "state_epoch",
    "leader_epoch",
    "snapshot_epoch",
    "create_timestamp",
    "write_timestamp",
    "delivery_complete_count",
)
_COMPUTED_BY_NAME: Final = {f.name: f for f in COMPUTED_FIELDS}
#: The fold's input columns besides the pass-through ones, with their types.
STATE_INPUT_FIELDS: Final = [
    *(_COMPUTED_BY_NAME[name] for name in _SCALAR_INPUT),
    pa.field("state_batches", STATE_BATCHES_TYPE),
    # Seed rows only: the stored latest snapshot offset and SINCE (a seed's
    # source_timestamp is the stored LATEST_TIMESTAMP).
    pa.field("seed_last_snapshot_offset", pa.int64()),
    pa.field("seed_since", MOVED_AT_TYPE),
    # Seed rows only: the stored segment number, which the fold goes on from.
    pa.field("seed_segment", pa.int64()),
]
STATE_INPUT: Final = tuple(f.name for f in STATE_INPUT_FIELDS)
#: The fold's input columns, in order, with their types (the JVM fold checks them): the
#: segment is not among them, the fold numbers them.
FOLD_INPUT_FIELDS: Final = [
    *(f for f in PASSTHROUGH_FIELDS if f.name != "segment"),
    *STATE_INPUT_FIELDS,
]
FOLD_INPUT: Final = tuple(f.name for f in FOLD_INPUT_FIELDS)
_STARTS_SEGMENT: Final = frozenset({"snapshot", "tombstone"})
_NO_ROW: Final = object()
_DELETED_ROW: Final = (True, *([None] * (len(COMPUTED_FIELDS) - 2)), None)


def _last(batch: Batch) -> int:
    return batch[1]


def _first(batch: Batch) -> int:
    return batch[0]


def _valid(batches: Sequence[Batch]) -> bool:
    """Batches the windowed sweep may take: none ends before it starts or at Long.MAX_VALUE
    (where Java's offset + 1 wraps)."""
    return all(first <= last < LONG_MAX for first, last, _, _ in batches)


def _canonical(batches: Sequence[Batch]) -> bool:
    """True when `batches` is what the 4.4 sweep returns for itself: valid, sorted,
    disjoint, and touching neighbours differ in (state, count)."""
    if not _valid(batches):
        return False
    for (_, p_last, p_state, p_count), (c_first, _, c_state, c_count) in pairwise(batches):
        if c_first <= p_last or (
            c_first == p_last + 1 and p_state == c_state and p_count == c_count
        ):
            return False
    return True


class _Segment:
    """One share-partition's state while a segment is folded (None fields: no state)."""

    __slots__ = (
        "batches",
        "canonical",
        "counts",
        "create_timestamp",
        "delivery_complete_count",
        "has_state",
        "kafka",
        "leader_epoch",
        "snapshot_epoch",
        "start_offset",
        "state_epoch",
        "sweep",
        "write_timestamp",
    )

    def __init__(self, kafka: tuple[int, int]) -> None:
        self.kafka = kafka
        self.sweep = kafka >= SWEEP_SINCE
        self.has_state = False
        self.batches: list[Batch] = []
        self.canonical = False
        self.counts: dict[int, int] = {}
        self.start_offset = 0
        self.state_epoch = 0
        self.leader_epoch = 0
        self.snapshot_epoch = 0
        self.create_timestamp: int | None = None
        self.write_timestamp: int | None = None
        self.delivery_complete_count: int | None = None

    def _set_batches(self, batches: list[Batch]) -> None:
        self.batches = batches
        self.canonical = self.sweep and _canonical(batches)
        counts: dict[int, int] = {}
        for first, last, state, _ in batches:
            counts[state] = counts.get(state, 0) + last - first + 1
        self.counts = counts

    def _dcc(self, value: int | None) -> int | None:
        # 4.2+ holds -1 ("unknown") when the tag is not on the wire; earlier releases have none.
        if self.kafka < (4, 2):
            return None
        return -1 if value is None else value

    def apply(self, kind: str, values: tuple[Any, ...], new: list[Batch]) -> None:
        """Apply one record (see `sharestate.replay.state.apply_record`); on ValueError the state
        is unchanged."""
        start, state_epoch, leader, snapshot_epoch, created, written, dcc = values
        if kind == SEED:  # a state a previous run stored: it goes on from there
            self.has_state = True
            self.start_offset = start
            self.state_epoch = state_epoch
            self.leader_epoch = leader
            self.snapshot_epoch = snapshot_epoch
            self.create_timestamp = created
            self.write_timestamp = written
            self.delivery_complete_count = dcc
            self._set_batches(new)
            return
        if kind == "tombstone" or kind == SEED_DELETED:
            self.has_state = False
            self.batches = []
            return
        if kind == "snapshot" or not self.has_state:
            early_access = self.kafka < (4, 1)
            self.has_state = True
            self.start_offset = start
            self.leader_epoch = leader
            self.snapshot_epoch = snapshot_epoch
            if kind == "snapshot":
                self.state_epoch = state_epoch
                self.create_timestamp = created
                self.write_timestamp = written
            else:  # an update that starts a state (Kafka 4.0: epoch -1, no timestamps)
                self.state_epoch = -1 if early_access else 0
                self.create_timestamp = None if early_access else 0
                self.write_timestamp = None if early_access else 0
            self.delivery_complete_count = self._dcc(dcc)
            self._set_batches(new)
            return
        start = self.start_offset if start == -1 else start
        if self.canonical and _valid(new):
            self._merge_window(new, start)
        else:
            self._set_batches(combine(self.batches, new, start, self.kafka))
        self.start_offset = start
        if leader != -1:
            self.leader_epoch = leader
        self.delivery_complete_count = self._dcc(dcc)

    def _merge_window(self, new: list[Batch], start: int) -> None:
        """4.4's combine on canonical batches, re-sweeping only what `new` overlaps or
        touches; `new` is valid, so nothing here can fail half-way."""
        current = self.batches
        counts = self.counts
        if start != -1:
            dropped = 0
            size = len(current)
            while dropped < size and current[dropped][1] < start:
                first, last, state, _ = current[dropped]
                counts[state] -= last - first + 1
                dropped += 1
            if dropped:
                del current[:dropped]
            if current and current[0][0] < start:
                first, last, state, count = current[0]
                counts[state] -= start - first
                current[0] = (start, last, state, count)
            new = [b if b[0] >= start else (start, b[1], b[2], b[3]) for b in new if b[1] >= start]
        if len(current) + len(new) < 2:
            # Kafka returns fewer than two batches as they are (current first).
            current.extend(new)
            for first, last, state, _ in new:
                counts[state] = counts.get(state, 0) + last - first + 1
            return
        if not new:
            return  # the sweep of canonical batches is themselves
        low = min(b[0] for b in new) - 1
        high = max(b[1] for b in new) + 1
        begin = bisect_left(current, low, key=_last)
        end = bisect_right(current, high, lo=begin, key=_first)
        window = current[begin:end]
        for first, last, state, _ in window:
            counts[state] -= last - first + 1
        merged = sweep([*window, *new])
        for first, last, state, _ in merged:
            counts[state] = counts.get(state, 0) + last - first + 1
        current[begin:end] = merged

    def effective_start_offset(self) -> int:
        start = self.start_offset
        batches = self.batches if self.canonical else sorted(self.batches)
        for first, last, state, _ in batches:
            if last < start:
                continue
            if first > start or state not in TERMINAL:
                break
            start = last + 1 if last < LONG_MAX else -LONG_MAX - 1  # Java's long wraps
        return start

    def row(self, error: str | None) -> tuple[Any, ...]:
        """The computed columns after the last record (COMPUTED_FIELDS order)."""
        if not self.has_state:
            return (*_DELETED_ROW[:-1], error)
        counts = self.counts
        return (
            False,
            self.start_offset,
            self.effective_start_offset(),
            self.state_epoch,
            self.leader_epoch,
            self.snapshot_epoch,
            self.create_timestamp,
            self.write_timestamp,
            self.delivery_complete_count,
            as_java_long(counts.get(AVAILABLE, 0)),
            as_java_long(counts.get(ACQUIRED, 0)),
            as_java_long(counts.get(ACKNOWLEDGED, 0)),
            as_java_long(counts.get(ARCHIVED, 0)),
            len(self.batches),
            error,
        )


def _batches_column(lists: list[list[Batch] | None]) -> pa.Array:
    offsets = [0]
    flat: list[Batch] = []
    mask = []
    for item in lists:
        if item is None:
            mask.append(True)
        else:
            mask.append(False)
            flat.extend(item)
        offsets.append(len(flat))
    firsts, lasts, states, counts = zip(*flat, strict=True) if flat else ((), (), (), ())
    values = pa.StructArray.from_arrays(
        [
            pa.array(firsts, pa.int64()),
            pa.array(lasts, pa.int64()),
            pa.array(states, pa.int32()),
            pa.array(counts, pa.int32()),
        ],
        fields=list(STATE_BATCH_TYPE),
    )
    return pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), values, type=STATE_BATCHES_TYPE, mask=pa.array(mask)
    )


def _moved_order(moved: dict[str, Any]) -> tuple[Any, ...]:
    """Spark's ordering of MOVED_AT_TYPE structs (a null field sorts first)."""
    return tuple(
        (value is not None, value)
        for value in (moved["source_timestamp"], moved["source_partition"], moved["source_offset"])
    )


class _Moves:
    """SINCE and LATEST_TIMESTAMP of one share-partition, row by row (what the tests'
    reference, `tests/support/start_offsets.py`, computes with a window over the history)."""

    __slots__ = ("latest", "previous", "since")

    def __init__(self) -> None:
        self.previous: object = _NO_ROW
        self.since: dict[str, Any] | None = None
        self.latest: Any = None

    def add(self, moved: dict[str, Any] | None, effective_start: int | None, at: Any) -> None:
        if moved is not None and (
            self.since is None or _moved_order(moved) > _moved_order(self.since)
        ):
            self.since = moved
        if at is not None and (self.latest is None or at > self.latest):
            self.latest = at
        self.previous = effective_start

    def changed(self, effective_start: int | None) -> bool:
        """Whether `effective_start` differs from the row before (null-safe); the first row
        counts when it has an offset."""
        if self.previous is _NO_ROW:
            return effective_start is not None
        return effective_start != self.previous


#: An output batch held back: its arrays, then per row: ends its share-partition, SINCE,
#: LATEST_TIMESTAMP.
_Held = tuple[list[pa.Array], list[bool], list[dict[str, Any] | None], list[Any]]


def fold_batches(
    batches: Iterator[pa.RecordBatch], kafka: tuple[int, int] = LATEST
) -> Iterator[pa.RecordBatch]:
    """Rows (FOLD_INPUT) sorted by (share-partition, log order) in, one history row per input
    row out (HISTORY_FIELDS). The fold numbers each share-partition's segments as it goes (a
    snapshot or tombstone starts one; a seed row adds its stored number) and folds each from
    no state. Each output batch is held back until the next input batch shows whether its
    last row ends a share-partition."""
    schema = pa.schema(HISTORY_FIELDS)
    segment = _Segment(kafka)
    moves = _Moves()
    number = 0
    share_partition: tuple[Any, ...] | None = None
    last_snapshot: int | None = None
    held: _Held | None = None
    for batch in batches:
        size = batch.num_rows
        if size == 0:
            continue
        keys = list(zip(*(batch.column(name).to_pylist() for name in KEY), strict=True))
        seed_segments = batch.column("seed_segment").to_pylist()
        kinds = batch.column("record_type").to_pylist()
        source_partitions = batch.column("source_partition").to_pylist()
        source_offsets = batch.column("source_offset").to_pylist()
        timestamps = batch.column("source_timestamp").to_pylist()
        seed_snapshots = batch.column("seed_last_snapshot_offset").to_pylist()
        seed_since = batch.column("seed_since").to_pylist()
        scalars = list(
            zip(*(batch.column(name).to_pylist() for name in _SCALAR_INPUT), strict=True)
        )
        listed = batch.column("state_batches")
        if not isinstance(listed, pa.ListArray):
            listed = listed.cast(STATE_BATCHES_TYPE)
        bounds = listed.offsets.to_pylist()
        base = bounds[0]  # a sliced batch still points into its parent's values
        if base:
            bounds = [bound - base for bound in bounds]
        values = listed.values.slice(base, bounds[-1])
        state_batches: list[Batch] = list(
            zip(*(column.to_pylist() for column in values.flatten()), strict=True)
        )
        if held is not None:
            yield _history_batch(held, keys[0] != share_partition, schema)
        rows: list[tuple[Any, ...]] = []
        batch_lists: list[list[Batch] | None] = [None] * size
        ends = [False] * size
        snapshots: list[int | None] = [None] * size
        since: list[dict[str, Any] | None] = [None] * size
        latest: list[Any] = [None] * size
        numbers: list[int] = [0] * size
        for i in range(size):
            key = keys[i]
            kind = kinds[i]
            # The segment number is the running sum a window over the log order would give.
            if kind in _STARTS_SEGMENT:
                step = 1
            elif kind in (SEED, SEED_DELETED):
                step = seed_segments[i] or 0
            else:
                step = 0
            new_share_partition = key != share_partition
            if new_share_partition or step:
                if i:
                    batch_lists[i - 1] = segment.batches if segment.has_state else []
                if new_share_partition:
                    if i:
                        ends[i - 1] = True
                        since[i - 1], latest[i - 1] = moves.since, moves.latest
                    share_partition = key
                    last_snapshot = None
                    moves = _Moves()
                    number = 0
                number += step
                segment = _Segment(kafka)
            numbers[i] = number
            new = state_batches[bounds[i] : bounds[i + 1]]
            error = None
            try:
                segment.apply(kind, scalars[i], new)
            except ValueError as err:  # impossible batches: Kafka's own load fails here too
                error = str(err)
            if kind == "snapshot":
                last_snapshot = source_offsets[i]
            elif kind in (SEED, SEED_DELETED):
                last_snapshot = seed_snapshots[i]
            snapshots[i] = last_snapshot
            row = segment.row(error)
            rows.append(row)
            effective_start = row[2]
            if kind in (SEED, SEED_DELETED):
                moved = seed_since[i]
            elif moves.changed(effective_start):
                moved = {
                    "source_timestamp": timestamps[i],
                    "source_partition": source_partitions[i],
                    "source_offset": source_offsets[i],
                }
            else:
                moved = None
            moves.add(moved, effective_start, timestamps[i])
        # The segment may go on in the next batch: copy, later updates change the list.
        batch_lists[-1] = list(segment.batches) if segment.has_state else []
        since[-1], latest[-1] = moves.since, moves.latest
        columns = list(zip(*rows, strict=True))
        arrays: list[pa.Array] = [
            pa.array(numbers, field.type)
            if field.name == "segment"
            else batch.column(field.name).cast(field.type)
            for field in PASSTHROUGH_FIELDS
        ]
        arrays += [
            pa.array(values, field.type)
            for values, field in zip(columns[:-1], COMPUTED_FIELDS[:-1], strict=True)
        ]
        arrays.append(_batches_column(batch_lists))
        arrays.append(pa.array(columns[-1], pa.string()))
        arrays.append(pa.array(snapshots, pa.int64()))
        # Whether the last row ends its share-partition shows with the next batch.
        held = (arrays, ends, since, latest)
    if held is not None:
        yield _history_batch(held, True, schema)


def _history_batch(held: _Held, last_ends: bool, schema: pa.Schema) -> pa.RecordBatch:
    """A held output batch, now that it is known whether its last row ends its
    share-partition (SINCE and LATEST_TIMESTAMP stay only on rows that do)."""
    arrays, ends, since, latest = held
    ends[-1] = last_ends
    if not last_ends:
        since[-1] = latest[-1] = None
    return pa.RecordBatch.from_arrays(
        [
            *arrays,
            pa.array(ends),
            pa.array(since, MOVED_AT_TYPE),
            pa.array(latest, pa.timestamp("us", tz="UTC")),
        ],
        schema=schema,
    )
