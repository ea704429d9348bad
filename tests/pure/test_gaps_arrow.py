"""The gaps after an incremental run, from the stored gaps, extents and the run's new
positions only (`gaps_arrow.gaps_after`), equal the gaps of every position counted afresh:
seeded random exports with new positions above, below and inside the stored ones (a
backfill into a stored gap, filling it in part or whole) and on new partitions."""

from __future__ import annotations

import itertools
import random

import pyarrow as pa
import pytest

from sharestate.audits import gaps_arrow

Gap = tuple[int, int, int]


def _gaps(positions: dict[int, set[int]]) -> list[Gap]:
    """Every run of missing offsets between a partition's first and last position."""
    found = []
    for partition, offsets in positions.items():
        ordered = sorted(offsets)
        found += [
            (partition, before + 1, after - 1)
            for before, after in itertools.pairwise(ordered)
            if after - before > 1
        ]
    return sorted(found)


def _positions(positions: dict[int, set[int]]) -> pa.Table:
    rows = [(p, o) for p, offsets in positions.items() for o in sorted(offsets)]
    return pa.table(
        {"source_partition": [p for p, _ in rows], "source_offset": [o for _, o in rows]},
        pa.schema([("source_partition", pa.int32()), ("source_offset", pa.int64())]),
    )


def _split(rng: random.Random) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """Stored and new positions of a few partitions, each offset in one or neither."""
    stored: dict[int, set[int]] = {}
    new: dict[int, set[int]] = {}
    for partition in range(rng.randint(1, 5)):
        start = rng.randint(0, 30)
        offsets = [o for o in range(start, start + rng.randint(1, 120)) if rng.random() < 0.8]
        if not offsets:
            continue
        cut_low, cut_high = sorted(rng.sample(range(len(offsets) + 1), 2))
        for i, offset in enumerate(offsets):
            # Below the stored part, inside it (a backfill, now and then) or above it.
            inside = cut_low <= i < cut_high and rng.random() < 0.85
            (stored if inside else new).setdefault(partition, set()).add(offset)
    return stored, new


@pytest.mark.parametrize("seed", range(40))
def test_gaps_after_equal_the_gaps_of_every_position(seed: int) -> None:
    stored, new = _split(random.Random(seed))
    extents = [(p, len(o), min(o), max(o)) for p, o in stored.items()]
    stored_gaps = _gaps(stored)
    found = gaps_arrow.gaps_after(
        pa.table(
            {
                "source_partition": [g[0] for g in stored_gaps],
                "_from": [g[1] for g in stored_gaps],
                "_to": [g[2] for g in stored_gaps],
            }
        ).cast(gaps_arrow.GAPS_SCHEMA),
        _positions(new),
        pa.table(
            {
                name: [e[i] for e in extents]
                for i, name in enumerate(gaps_arrow.EXTENTS_SCHEMA.names)
            }
        ).cast(gaps_arrow.EXTENTS_SCHEMA),
    )
    every = {p: stored.get(p, set()) | new.get(p, set()) for p in {*stored, *new}}
    assert found.schema == gaps_arrow.GAPS_SCHEMA
    assert sorted(zip(*found.to_pydict().values(), strict=True)) == _gaps(every)


def test_nothing_new_keeps_the_stored_gaps() -> None:
    stored = {0: {1, 2, 5, 9}}
    gaps = _gaps(stored)
    found = gaps_arrow.gaps_after(
        pa.table({"source_partition": [0, 0], "_from": [3, 6], "_to": [4, 8]}).cast(
            gaps_arrow.GAPS_SCHEMA
        ),
        _positions({}),
        pa.table(
            {"source_partition": [0], "rows": [4], "first_offset": [1], "last_offset": [9]}
        ).cast(gaps_arrow.EXTENTS_SCHEMA),
    )
    assert sorted(zip(*found.to_pydict().values(), strict=True)) == gaps == [(0, 3, 4), (0, 6, 8)]


def test_position_extents_count_first_and_last() -> None:
    extents = gaps_arrow.position_extents(_positions({0: {4, 7, 5}, 3: {10}}))
    assert sorted(extents.to_pylist(), key=lambda r: r["source_partition"]) == [
        {"source_partition": 0, "rows": 3, "first_offset": 4, "last_offset": 7},
        {"source_partition": 3, "rows": 1, "first_offset": 10, "last_offset": 10},
    ]
