"""`pruning_arrow`'s cut-off per `__share_group_state` partition: on hand-made placements and
positions, with the rows Kafka's share coordinator gives (`ShareCoordinatorOffsetsManager`,
docs/audits.md, "Pruning cut-off"); on random histories, against a literal port of that
algorithm; and an incremental run's (`carried_pruning_cutoff`, from the stored table's
extents, new positions and the gaps) against the cut-off of every position."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from sharestate.audits import pruning_arrow, segments_arrow
from sharestate.audits.findings.records import gap_ranges
from sharestate.audits.segments_arrow import PLACEMENTS_SCHEMA
from sharestate.kafka.constants import SNAPSHOT, TOMBSTONE, UPDATE
from tests.support.state_tables import at, random_history

POSITIONS_SCHEMA = pa.schema([("source_partition", pa.int32()), ("source_offset", pa.int64())])


def _placement(
    source_partition: int | None,
    partition: int,
    last: tuple[int, str | None] | None,
    event: tuple[int | None, str] | None,
) -> dict[str, Any]:
    return {
        "group_id": "g",
        "topic_id": "t",
        "partition": partition,
        "source_partition": source_partition,
        "records": 1,
        "first_offset": 0,
        "last_record": None if last is None else {"source_offset": last[0], "record_type": last[1]},
        "last_snapshot_or_tombstone": None
        if event is None
        else {
            "source_offset": event[0],
            "source_timestamp": None if event[0] is None else at(event[0]),
            "record_type": event[1],
        },
    }


def _placements() -> pa.Table:
    placements = [
        # Held by the lowest tracked snapshot; a deleted share-partition besides.
        _placement(0, 0, (15, UPDATE), (10, SNAPSHOT)),
        _placement(0, 1, (20, SNAPSHOT), (20, SNAPSHOT)),
        _placement(0, 2, (30, TOMBSTONE), (30, TOMBSTONE)),
        # Every share-partition deleted: the last tombstone's offset.
        _placement(1, 0, (7, TOMBSTONE), (7, TOMBSTONE)),
        _placement(1, 1, (3, TOMBSTONE), (3, TOMBSTONE)),
        # Untracked: no snapshot or tombstone, no cut-off (a last record of null type is
        # neither live nor deleted).
        _placement(2, 0, (4, UPDATE), None),
        _placement(2, 1, (5, None), None),
        # A cut-off of 0: nothing to prune.
        _placement(3, 0, (2, UPDATE), (0, SNAPSHOT)),
        # No exported position in this partition: no row.
        _placement(5, 0, (9, SNAPSHOT), (9, SNAPSHOT)),
        # A null partition joins nothing.
        _placement(None, 0, (1, SNAPSHOT), (1, SNAPSHOT)),
    ]
    return pa.Table.from_pylist(placements, schema=PLACEMENTS_SCHEMA)


def _positions() -> pa.Table:
    positions = [
        *[(0, o) for o in range(0, 41, 3)],
        (0, None),
        *[(1, o) for o in range(11)],
        *[(2, o) for o in (1, 4, 5)],
        (3, 0),
        (3, 2),
        (4, 6),
        (None, 1),
        (None, 50),
        (None, None),
    ]
    return pa.Table.from_pylist(
        [{"source_partition": p, "source_offset": o} for p, o in positions],
        schema=POSITIONS_SCHEMA,
    )


def _cutoff(
    partition: int | None,
    cutoff: int | None,
    share_partitions: tuple[int, int, int, int],
    held_by: int | None,
    exported: tuple[int, int, int | None, int | None],
) -> dict[str, Any]:
    live, tracked, untracked, deleted = share_partitions
    before, records, first, last = exported
    return {
        "source_partition": partition,
        "cutoff_offset": cutoff,
        "prunable": cutoff is not None and cutoff > 0,
        "cutoff_timestamp": None if cutoff is None else at(cutoff),
        "live_share_partitions": live,
        "tracked_share_partitions": tracked,
        "untracked_live_share_partitions": untracked,
        "deleted_share_partitions": deleted,
        "held_by_group_id": None if held_by is None else "g",
        "held_by_topic_id": None if held_by is None else "t",
        "held_by_partition": held_by,
        "records_before_cutoff": before,
        "exported_records": records,
        "first_exported_offset": first,
        "last_exported_offset": last,
    }


def _by_partition(table: pa.Table) -> list[dict[str, Any]]:
    assert table.schema == pruning_arrow.PRUNING_SCHEMA
    return sorted(
        table.to_pylist(), key=lambda r: (r["source_partition"] is None, r["source_partition"])
    )


def test_pruning_cutoff_of_hand_made_placements_is_kafkas() -> None:
    found = pruning_arrow.pruning_cutoff(_placements(), _positions())
    assert _by_partition(found) == [
        # Offsets 0, 3, 6, 9 are below 10; the null offset is exported, not below.
        _cutoff(0, 10, (2, 2, 0, 1), 0, (4, 15, 0, 39)),
        _cutoff(1, 7, (0, 0, 0, 2), None, (7, 11, 0, 10)),
        _cutoff(2, None, (1, 0, 1, 0), None, (0, 3, 1, 5)),
        _cutoff(3, 0, (1, 1, 0, 0), 0, (0, 2, 0, 2)),
        # Positions without placements: no cut-off, no share-partitions.
        _cutoff(4, None, (0, 0, 0, 0), None, (0, 1, 6, 6)),
        _cutoff(None, None, (0, 0, 0, 0), None, (0, 3, 1, 50)),
    ]


def test_pruning_cutoff_without_placements_or_positions() -> None:
    no_placements = PLACEMENTS_SCHEMA.empty_table()
    no_positions = POSITIONS_SCHEMA.empty_table()
    found = pruning_arrow.pruning_cutoff(no_placements, _positions())
    assert _by_partition(found) == [
        _cutoff(0, None, (0, 0, 0, 0), None, (0, 15, 0, 39)),
        _cutoff(1, None, (0, 0, 0, 0), None, (0, 11, 0, 10)),
        _cutoff(2, None, (0, 0, 0, 0), None, (0, 3, 1, 5)),
        _cutoff(3, None, (0, 0, 0, 0), None, (0, 2, 0, 2)),
        _cutoff(4, None, (0, 0, 0, 0), None, (0, 1, 6, 6)),
        _cutoff(None, None, (0, 0, 0, 0), None, (0, 3, 1, 50)),
    ]
    for placements in (_placements(), no_placements):
        empty = pruning_arrow.pruning_cutoff(placements, no_positions)
        assert empty.num_rows == 0
        assert empty.schema == pruning_arrow.PRUNING_SCHEMA


def test_pruning_cutoff_counts_a_million_positions() -> None:
    """A million positions over a few partitions, counted per partition."""
    n = 1_000_000
    positions = pa.table(
        {
            "source_partition": pa.array(np.arange(n) % 4, pa.int32()),
            "source_offset": pa.array(np.arange(n) // 4, pa.int64()),
        }
    )
    found = pruning_arrow.pruning_cutoff(_placements(), positions)
    rows = {r["source_partition"]: r for r in found.to_pylist()}
    assert rows[0]["exported_records"] == n // 4
    assert rows[0]["records_before_cutoff"] == 10
    assert rows[1]["records_before_cutoff"] == 7
    assert rows[2]["records_before_cutoff"] == 0


def _kafka_cutoffs(history: pa.Table) -> dict[int, int | None]:
    """Per state-topic partition, `lastRedundantOffset` as Kafka's
    `ShareCoordinatorOffsetsManager.updateState` leaves it after replaying the partition's
    records in log order (only snapshots and tombstones call it); None: never set."""
    found: dict[int, int | None] = {}
    records = sorted(history.to_pylist(), key=lambda r: (r["source_partition"], r["source_offset"]))
    for source in {r["source_partition"] for r in records}:
        offsets: dict[int, int] = {}
        redundant: int | None = None
        for record in (r for r in records if r["source_partition"] == source):
            if record["record_type"] == UPDATE:
                continue
            offsets[record["partition"]] = record["source_offset"]
            redundant = min(offsets.values())
            if record["record_type"] == TOMBSTONE:
                del offsets[record["partition"]]
        found[source] = redundant
    return found


@pytest.mark.parametrize("seed", range(40))
def test_pruning_cutoff_of_a_history_is_kafkas(seed: int) -> None:
    history = random_history(random.Random(seed))
    placements = segments_arrow.placements(segments_arrow.history_segments(history))
    positions = history.select(["source_partition", "source_offset"])
    found = pruning_arrow.pruning_cutoff(placements, positions)
    cutoffs = dict(
        zip(
            found.column("source_partition").to_pylist(),
            found.column("cutoff_offset").to_pylist(),
            strict=True,
        )
    )
    assert cutoffs == _kafka_cutoffs(history)
    # What Kafka deletes: the records below the cut-off, where it reports one (> 0).
    for row in found.to_pylist():
        cutoff = row["cutoff_offset"]
        mine = [
            r for r in positions.to_pylist() if r["source_partition"] == row["source_partition"]
        ]
        below = [r for r in mine if cutoff is not None and r["source_offset"] < cutoff]
        assert row["prunable"] == (cutoff is not None and cutoff > 0)
        assert (row["exported_records"], row["records_before_cutoff"]) == (len(mine), len(below))


def _random_positions(rng: random.Random) -> pa.Table:
    """Unique offsets of a few partitions, with gaps."""
    rows = [
        {"source_partition": partition, "source_offset": offset}
        for partition in range(rng.randint(1, 4))
        for offset in range(rng.randint(0, 20), rng.randint(21, 90))
        if rng.random() < 0.85
    ]
    return pa.Table.from_pylist(rows, schema=POSITIONS_SCHEMA)


def _random_placements(rng: random.Random) -> pa.Table:
    placements = []
    for source in range(4):
        for partition in range(rng.randint(0, 4)):
            offset = rng.randint(0, 90)
            last = rng.choice([SNAPSHOT, UPDATE, TOMBSTONE])
            event = None if rng.random() < 0.2 else (offset, rng.choice([SNAPSHOT, TOMBSTONE]))
            if event is not None and event[1] == TOMBSTONE:
                last = TOMBSTONE
            placements.append(_placement(source, partition, (offset + 1, last), event))
    return pa.Table.from_pylist(placements, schema=PLACEMENTS_SCHEMA)


@pytest.mark.parametrize("seed", range(30))
def test_carried_cutoff_from_stored_extents_is_the_cutoff_of_every_position(seed: int) -> None:
    rng = random.Random(seed)
    positions, placements = _random_positions(rng), _random_placements(rng)
    offsets = positions.column("source_offset").to_pylist()
    cut = rng.randint(0, 100)
    older = positions.filter(pa.array([o < cut for o in offsets]))
    newer = positions.filter(pa.array([o >= cut for o in offsets]))
    # Only the stored table's extents carry on: its cut-offs are computed again.
    stored = pruning_arrow.pruning_cutoff(placements, older)
    found = pruning_arrow.carried_pruning_cutoff(placements, stored, newer, gap_ranges(positions))
    whole = _by_partition(pruning_arrow.pruning_cutoff(placements, positions))
    assert _by_partition(found) == whole
    # Nothing stored: every position is new.
    nothing_stored = pruning_arrow.PRUNING_SCHEMA.empty_table()
    carried = pruning_arrow.carried_pruning_cutoff(
        placements, nothing_stored, positions, gap_ranges(positions)
    )
    assert _by_partition(carried) == whole


def test_positions_without_placements_have_no_carried_cutoff() -> None:
    positions = _positions().filter(pc.is_valid(_positions().column("source_offset")))
    none = PLACEMENTS_SCHEMA.empty_table()
    found = pruning_arrow.carried_pruning_cutoff(
        none, pruning_arrow.PRUNING_SCHEMA.empty_table(), positions, gap_ranges(positions)
    )
    assert found.num_rows == 6
    assert found.column("cutoff_offset").null_count == 6
    assert set(found.column("records_before_cutoff").to_pylist()) == {0}
