"""The archived ranges (`ranges_arrow`) on hand-made records and states, with the rows
docs/output-tables.md (`poison_messages`, `archived_messages`) gives: every kind of record
and batch, null keys, batches and fields, deleted share-partitions and ones without a state
or batches; and an incremental run's merge of new intervals into stored ranges, which gives
the ranges of every record."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sharestate.audits import ranges_arrow
from sharestate.audits.ranges_arrow import (
    REASON_BELOW_LIMIT,
    REASON_DELIVERY_LIMIT,
    REASON_NEVER_DELIVERED,
)
from sharestate.kafka.constants import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    SNAPSHOT,
    TOMBSTONE,
    UPDATE,
)
from tests.support.state_tables import (
    BATCHES,
    KEY_FIELDS,
    LONG_MAX,
    LONG_MIN,
    TIMESTAMP,
    at,
    batch,
    rows,
)

#: Low, so that a few batches reach it.
LIMIT = 3
BELOW, POISON, NEVER = REASON_BELOW_LIMIT, REASON_DELIVERY_LIMIT, REASON_NEVER_DELIVERED
RECORDS_SCHEMA = pa.schema(
    [
        *KEY_FIELDS,
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("source_timestamp", TIMESTAMP),
        ("record_type", pa.string()),
        ("state_batches", BATCHES),
    ]
)
STATE_SCHEMA = pa.schema(
    [
        *KEY_FIELDS,
        ("deleted", pa.bool_()),
        ("start_offset", pa.int64()),
        ("effective_start_offset", pa.int64()),
        ("state_batches", BATCHES),
    ]
)


def _record(
    partition: int | None,
    offset: int,
    record_type: str | None,
    batches: Sequence[dict[str, Any] | None] | None,
    group: str | None = "g",
) -> dict[str, Any]:
    return {
        "group_id": group,
        "topic_id": "t",
        "partition": partition,
        "source_partition": 0 if offset % 2 else 1,
        "source_offset": offset,
        "source_timestamp": at(offset),
        "record_type": record_type,
        "state_batches": batches,
    }


def _records(with_nulls: bool) -> pa.Table:
    """Records of every kind; `with_nulls`: null keys, batches and batch fields too (which
    `archived_ranges` does not take: decoded batches have none)."""
    records = [
        _record(
            0,
            1,
            SNAPSHOT,
            [
                batch(0, 4, ARCHIVED, 1),
                batch(5, 9, ARCHIVED, LIMIT),
                batch(10, 10, ARCHIVED, 0),
                batch(11, 12, ARCHIVED, -1),
                batch(20, 19, ARCHIVED, LIMIT),
                batch(30, 39, ACKNOWLEDGED, 1),
                batch(LONG_MAX - 1, LONG_MAX, ARCHIVED, LIMIT + 2),
            ],
        ),
        _record(0, 2, UPDATE, [batch(3, 7, ARCHIVED, 2), batch(13, 15, ARCHIVED, 1)]),
        _record(0, 3, UPDATE, None),
        _record(0, 4, UPDATE, []),
        _record(0, 5, TOMBSTONE, [batch(0, 99, ARCHIVED, 1)]),
        _record(1, 6, SNAPSHOT, [batch(100, 109, ARCHIVED, LIMIT)]),
        _record(2, 7, UPDATE, [batch(0, 0, ARCHIVED, 1)]),
        _record(3, 8, SNAPSHOT, [batch(50, 59, ARCHIVED, 1), batch(60, 60, AVAILABLE, 0)]),
    ]
    if with_nulls:
        records += [
            _record(
                0,
                9,
                SNAPSHOT,
                [
                    None,
                    batch(None, 3, ARCHIVED, 1),
                    batch(3, None, ARCHIVED, 1),
                    batch(3, 4, None, 1),
                    batch(3, 4, ARCHIVED, None),
                ],
            ),
            _record(0, 10, None, [batch(0, 1, ARCHIVED, 1)]),
            _record(None, 11, UPDATE, [batch(0, 1, ARCHIVED, 1)], group=None),
        ]
    return pa.Table.from_pylist(records, schema=RECORDS_SCHEMA)


def _share_partition(
    partition: int,
    deleted: bool | None,
    start: int | None,
    batches: Sequence[dict[str, Any] | None] | None,
) -> dict[str, Any]:
    return {
        "group_id": "g",
        "topic_id": "t",
        "partition": partition,
        "deleted": deleted,
        "start_offset": start,
        "effective_start_offset": None if start is None else start + 1,
        "state_batches": batches,
    }


def _state(with_nulls: bool) -> pa.Table:
    """The state of `_records`' share-partitions (partition 2 has none); `with_nulls`:
    Archived batches with null fields too."""
    share_partitions = [
        _share_partition(
            0,
            False,
            6,
            [
                None,
                batch(8, 9, ARCHIVED, LIMIT),
                batch(10, 10, ACKNOWLEDGED, 1),
                batch(12, 20, ARCHIVED, 1),
                batch(3, 4, None, 1),
            ],
        ),
        _share_partition(1, True, 100, [batch(100, 109, ARCHIVED, LIMIT)]),
        _share_partition(3, None, None, None),
    ]
    if with_nulls:
        share_partitions += [
            _share_partition(4, False, None, []),
            _share_partition(
                5, False, 7, [batch(None, 9, ARCHIVED, 1), batch(5, None, AVAILABLE, 1)]
            ),
            _share_partition(6, None, None, [batch(None, 1, AVAILABLE, 1)]),
            _share_partition(7, True, None, [batch(LONG_MIN, LONG_MAX, ARCHIVED, 1)]),
        ]
    return pa.Table.from_pylist(share_partitions, schema=STATE_SCHEMA)


def _interval(
    key: tuple[str | None, int | None],
    record: tuple[int, int],
    batch_: tuple[int, int, int | None],
    reason: str,
) -> dict[str, Any]:
    return {
        "group_id": key[0],
        "topic_id": "t",
        "partition": key[1],
        "source_partition": record[0],
        "source_offset": record[1],
        "source_timestamp": at(record[1]),
        "first_offset": batch_[0],
        "last_offset": batch_[1],
        "delivery_count": batch_[2],
        "reason": reason,
    }


def test_reasoned_intervals_are_the_archived_batches_of_snapshots_and_updates() -> None:
    found = ranges_arrow.reasoned_intervals(_records(with_nulls=True), LIMIT)
    g0 = ("g", 0)
    # Not there: a batch that ends before it starts, one not Archived, one with a null
    # bound or state, a tombstone's, a record of null type's.
    assert rows(found) == rows(
        pa.Table.from_pylist(
            [
                _interval(g0, (0, 1), (0, 4, 1), BELOW),
                _interval(g0, (0, 1), (5, 9, LIMIT), POISON),
                _interval(g0, (0, 1), (10, 10, 0), NEVER),
                _interval(g0, (0, 1), (11, 12, -1), NEVER),
                _interval(g0, (0, 1), (LONG_MAX - 1, LONG_MAX, LIMIT + 2), POISON),
                _interval(g0, (1, 2), (3, 7, 2), BELOW),
                _interval(g0, (1, 2), (13, 15, 1), BELOW),
                _interval(("g", 1), (1, 6), (100, 109, LIMIT), POISON),
                _interval(("g", 2), (0, 7), (0, 0, 1), BELOW),
                _interval(("g", 3), (1, 8), (50, 59, 1), BELOW),
                # A null delivery count is below the limit (neither >= it nor <= 0).
                _interval(g0, (0, 9), (3, 4, None), BELOW),
                _interval((None, None), (0, 11), (0, 1, 1), BELOW),
            ]
        )
    )
    assert found.schema.field("reason").nullable is False


def test_final_state_columns_give_the_settle_bound_and_the_archived_batches() -> None:
    state = _state(with_nulls=True)
    found = ranges_arrow.final_state_columns(state)
    # The settle bound: the lower of the start offset and the first batch's first offset
    # (a batch of null state counts, a null first offset does not); null when deleted or
    # nothing gives one. `_archived`: the Archived batches, a null list staying null.
    expected = [
        (0, False, 7, 3, [batch(8, 9, ARCHIVED, LIMIT), batch(12, 20, ARCHIVED, 1)]),
        (1, True, 101, None, [batch(100, 109, ARCHIVED, LIMIT)]),
        (3, None, None, None, None),
        (4, False, None, None, []),
        (5, False, 8, 5, [batch(None, 9, ARCHIVED, 1)]),
        (6, None, None, None, []),
        (7, True, None, None, [batch(LONG_MIN, LONG_MAX, ARCHIVED, 1)]),
    ]
    assert found.to_pylist() == [
        {
            "group_id": "g",
            "topic_id": "t",
            "partition": partition,
            "share_partition_deleted": deleted,
            "_eso": eso,
            "_bound": bound,
            "_archived": archived,
        }
        for partition, deleted, eso, bound, archived in expected
    ]
    # A slice of the state (its lists at an offset) gives the rows of the slice.
    assert ranges_arrow.final_state_columns(state.slice(1)).to_pylist() == found.to_pylist()[1:]


def _range(
    partition: int,
    reason: str,
    span: tuple[int, int],
    counts: tuple[int, int],
    seen: tuple[tuple[int, int], tuple[int, int], int],
    state: tuple[bool | None, int, bool | None, bool],
) -> dict[str, Any]:
    (first_seen, last_seen, sightings) = seen
    deleted, in_state, below, settled = state
    return {
        "group_id": "g",
        "topic_id": "t",
        "partition": partition,
        "reason": reason,
        "first_offset": span[0],
        "last_offset": span[1],
        "offsets": span[1] - span[0] + 1,
        "delivery_count": counts[0],
        "min_delivery_count": counts[1],
        "first_seen_source_partition": first_seen[0],
        "first_seen_source_offset": first_seen[1],
        "first_seen_timestamp": at(first_seen[1]),
        "last_seen_source_partition": last_seen[0],
        "last_seen_source_offset": last_seen[1],
        "last_seen_timestamp": at(last_seen[1]),
        "sightings": sightings,
        "share_partition_deleted": deleted,
        "offsets_still_in_state": in_state,
        "still_in_state": in_state > 0,
        "below_start_offset": below,
        "settled": settled,
    }


def test_archived_ranges_of_hand_made_records() -> None:
    found = ranges_arrow.archived_ranges(
        ranges_arrow.reasoned_intervals(_records(with_nulls=False), LIMIT),
        ranges_arrow.final_state_columns(_state(with_nulls=False)),
    )
    assert found.schema == ranges_arrow.RANGES_SCHEMA
    # Partition 0's final state: live, effective start 7, settle bound 3, Archived [8, 9]
    # and [12, 20]: no range ends below 3 - 1, none is settled.
    live = False
    assert rows(found) == rows(
        pa.Table.from_pylist(
            [
                # [0, 4] and [3, 7] overlap: one range, seen by both records.
                _range(0, BELOW, (0, 7), (2, 1), ((0, 1), (1, 2), 2), (live, 0, False, False)),
                _range(0, BELOW, (13, 15), (1, 1), ((1, 2), (1, 2), 1), (live, 3, False, False)),
                _range(0, POISON, (5, 9), (3, 3), ((0, 1), (0, 1), 1), (live, 2, False, False)),
                _range(
                    0,
                    POISON,
                    (LONG_MAX - 1, LONG_MAX),
                    (5, 5),
                    ((0, 1), (0, 1), 1),
                    (live, 0, False, False),
                ),
                # [10, 10] and [11, 12] touch: one range; 12 is in the state's [12, 20].
                _range(0, NEVER, (10, 12), (0, -1), ((0, 1), (0, 1), 2), (live, 1, False, False)),
                # Deleted: nothing still in its state, below_start_offset null.
                _range(1, POISON, (100, 109), (3, 3), ((1, 6), (1, 6), 1), (True, 0, None, False)),
                # No state (partition 2), a state without batches or start (partition 3).
                _range(2, BELOW, (0, 0), (1, 1), ((0, 7), (0, 7), 1), (None, 0, None, False)),
                _range(3, BELOW, (50, 59), (1, 1), ((1, 8), (1, 8), 1), (None, 0, None, False)),
            ],
            schema=ranges_arrow.RANGES_SCHEMA,
        )
    )


def test_a_range_ending_two_below_the_settle_bound_is_settled() -> None:
    state = pa.Table.from_pylist(
        [_share_partition(0, False, 20, [batch(30, 39, AVAILABLE, 1)])], schema=STATE_SCHEMA
    )
    records = pa.Table.from_pylist(
        [_record(0, 1, SNAPSHOT, [batch(0, 18, ARCHIVED, 1), batch(19, 19, ARCHIVED, LIMIT)])],
        schema=RECORDS_SCHEMA,
    )
    found = ranges_arrow.archived_ranges(
        ranges_arrow.reasoned_intervals(records, LIMIT), ranges_arrow.final_state_columns(state)
    )
    # The bound is 20 (start 20 < first batch 30): 18 <= 20 - 2 is settled, 19 is not.
    settled = {r["last_offset"]: (r["settled"], r["below_start_offset"]) for r in found.to_pylist()}
    assert settled == {18: (True, True), 19: (False, True)}


def test_no_records_and_an_empty_state_give_empty_tables() -> None:
    empty_state = STATE_SCHEMA.empty_table()
    none = ranges_arrow.reasoned_intervals(RECORDS_SCHEMA.empty_table(), LIMIT)
    assert none.num_rows == 0
    assert ranges_arrow.final_state_columns(empty_state).num_rows == 0
    found = ranges_arrow.archived_ranges(none, ranges_arrow.final_state_columns(empty_state))
    assert found.num_rows == 0
    assert found.schema == ranges_arrow.RANGES_SCHEMA
    # Records whose batches hold nothing Archived.
    nothing_archived = _records(with_nulls=False).slice(2, 2)
    assert ranges_arrow.reasoned_intervals(nothing_archived, LIMIT).num_rows == 0


def _random_run(rng: random.Random) -> tuple[pa.Table, pa.Table]:
    """Records of a few share-partitions, each on a state-topic partition of its own, with
    Archived batches of random counts that overlap, touch and repeat; and their state."""
    records: list[dict[str, Any]] = []
    state = []
    offset = 0
    for partition in range(rng.randint(1, 4)):
        for _ in range(rng.randint(1, 25)):
            offset += rng.randint(1, 3)
            batches = []
            for _ in range(rng.randint(0, 4)):
                first = rng.randint(0, 80)
                state_ = ARCHIVED if rng.random() < 0.8 else AVAILABLE
                batches.append(batch(first, first + rng.randint(-1, 6), state_, rng.randint(0, 4)))
            kind = rng.choice([SNAPSHOT, UPDATE, UPDATE])
            row = _record(partition, offset, kind, batches)
            records.append(row | {"source_partition": partition})
        start = rng.randint(0, 60)
        final = [
            batch(start + 5, start + 9, ARCHIVED, 2),
            batch(start + 10, start + 12, AVAILABLE, 1),
        ]
        state.append(_share_partition(partition, rng.random() < 0.2, start, final))
    return (
        pa.Table.from_pylist(records, schema=RECORDS_SCHEMA),
        pa.Table.from_pylist(state, schema=STATE_SCHEMA),
    )


def _split(records: pa.Table, rng: random.Random) -> tuple[pa.Table, pa.Table]:
    """Each share-partition's records cut at a random one: (before, from it on)."""
    partitions = records.column("partition").to_pylist()
    offsets = records.column("source_offset").to_pylist()
    cuts: dict[int, int] = {}
    for partition in set(partitions):
        mine = sorted(o for p, o in zip(partitions, offsets, strict=True) if p == partition)
        cuts[partition] = rng.choice([*mine, mine[-1] + 1])
    later = pa.array([o >= cuts[p] for p, o in zip(partitions, offsets, strict=True)])
    return records.filter(pc.invert(later)), records.filter(later)


@pytest.mark.parametrize("seed", range(30))
def test_new_intervals_merged_with_stored_ranges_give_the_ranges_of_every_record(
    seed: int,
) -> None:
    rng = random.Random(seed)
    records, state = _random_run(rng)
    final = ranges_arrow.final_state_columns(state)
    older, newer = _split(records, rng)
    # The stored ranges, as an earlier run wrote them (their final-state columns are
    # computed again from the new state).
    stored = ranges_arrow.archived_ranges(ranges_arrow.reasoned_intervals(older, LIMIT), final)
    found = ranges_arrow.archived_ranges(
        ranges_arrow.reasoned_intervals(newer, LIMIT), final, stored=stored
    )
    whole = ranges_arrow.archived_ranges(ranges_arrow.reasoned_intervals(records, LIMIT), final)
    assert found.schema == ranges_arrow.RANGES_SCHEMA
    assert rows(found) == rows(whole)
