"""Finding rules and their inputs over hand-built Arrow tables, with the rows expected: the
rules whose premise the hand-built export of tests/spark/test_audits.py cannot meet (a
backfill, a partition count that fits nothing, the key hash given), and the inputs the
driver computes for them (the quarantine's kinds, the gaps between positions)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from sharestate.audits.findings import FINDINGS_SCHEMA, KEY_HASH, PLACEMENT_RULES, findings_of
from sharestate.audits.findings.records import (
    QUARANTINE_KINDS_SCHEMA,
    backfill_applied,
    gap_ranges,
    quarantine_kinds,
    share_state_gap,
)
from sharestate.kafka.partitioning import share_partition_key_hashes, state_topic_partition

T1, T2 = "Uj5wn_FqTXirEASvVZRY1w", "AAAAAAAAAAAAAAAAAAAAAA"
WHERE = ("severity", "code", "group_id", "topic_id", "partition", "source")
AT = ("source_partition", "source_offset", "affected")


def _rows(table: pa.Table, *columns: str) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(row[c] for c in columns) for row in table.to_pylist()),
        key=lambda row: tuple("" if v is None else str(v) for v in row),
    )


def test_backfill_applied_per_source_and_partition() -> None:
    backfilled = pa.table(
        {
            "source": ["share_state", "share_state", "consumer_offsets", "share_state"],
            "source_partition": pa.array([0, 0, 3, 1], pa.int32()),
            "source_offset": pa.array([5, 3, 2, 9], pa.int64()),
        }
    )
    found = backfill_applied.run({"backfilled": backfilled})
    assert found is not None and found.schema == FINDINGS_SCHEMA
    assert _rows(found, *WHERE, *AT) == [
        ("info", "backfill_applied", None, None, None, "consumer_offsets", 3, 2, 1),
        ("info", "backfill_applied", None, None, None, "share_state", 0, 3, 2),
        ("info", "backfill_applied", None, None, None, "share_state", 1, 9, 1),
    ]
    (first,) = [r for r in found.to_pylist() if r["source_partition"] == 0]
    assert first["message"].startswith(
        "2 row(s) of partition 0 (offsets 3-5) arrived below the last run's checkpoint"
    )
    # A full run has no backfill: the rule does not run.
    assert backfill_applied.run({"backfilled": None}) is None


def _placements(keys: list[tuple[str, str, int]], placed: list[int]) -> pa.Table:
    return pa.table(
        {
            "group_id": [k[0] for k in keys],
            "topic_id": [k[1] for k in keys],
            "partition": pa.array([k[2] for k in keys], pa.int32()),
            "source_partition": pa.array(placed, pa.int32()),
            "records": pa.array([3] * len(keys), pa.int64()),
            "first_offset": pa.array(range(len(keys)), pa.int64()),
        }
    )


def _placement_rows(placements: pa.Table, partitions: int | None) -> pa.Table:
    found = findings_of(
        PLACEMENT_RULES, {"placements": placements, "state_topic_partitions": partitions}
    )
    assert found is not None
    return found


@pytest.mark.parametrize("partitions", [None, 8])
def test_the_partition_check_with_the_key_hash_given_finds_the_same_rows(
    partitions: int | None,
) -> None:
    """Placements that carry each key's hash (`KEY_HASH`, as an incremental run's do) give
    the rows of the hash the check computes itself."""
    keys = [(f"g{n % 3}", T1 if n % 2 else T2, n) for n in range(40)]
    # Most keys where Kafka's partitioner puts them with 8 partitions, five elsewhere.
    moved = [n for n in range(40) if n % 8 == 3]
    placed = [(state_topic_partition(*k, 8) + (n in moved)) % 8 for n, k in enumerate(keys)]
    placements = _placements(keys, placed)
    hashes = pa.array(share_partition_key_hashes(keys), pa.int64())
    computed = _placement_rows(placements, partitions)
    given = _placement_rows(placements.append_column(KEY_HASH, hashes), partitions)
    assert given == computed
    assert _rows(computed, "code", "partition", "source_partition", "source_offset") == sorted(
        [("wrong_state_partition", n, placed[n], n) for n in moved], key=lambda r: str(r)
    )
    assert {r["affected"] for r in computed.to_pylist()} == {3}
    why = "given by --state-topic-partitions" if partitions else "inferred: highest"
    assert all(f"of 8 ({why}" in r["message"] for r in computed.to_pylist())


def test_the_partition_check_is_skipped_when_no_count_fits() -> None:
    keys = [("g", T1, p) for p in range(4)]
    # Every key where neither Kafka's 50 nor the inferred count (8) puts it.
    placed = [
        next(
            sp
            for sp in range(7, -1, -1)
            if sp not in (state_topic_partition(*k, 50), state_topic_partition(*k, 8))
        )
        for k in keys
    ]
    assert max(placed) == 7  # so 8 is what the check infers
    found = _placement_rows(_placements(keys, placed), None)
    assert _rows(found, *WHERE, *AT) == [
        ("info", "state_partition_check_skipped", None, None, None, "share_state", None, None, 4)
    ]
    # Given, the count is used whatever it fits.
    given = _placement_rows(_placements(keys, placed), 8)
    assert _rows(given, "code", "partition") == [("wrong_state_partition", p) for p in range(4)]
    # No placements: nothing to check, nothing to say.
    assert _placement_rows(_placements([], []), None).num_rows == 0


QUARANTINE = [
    ("share_state", 0, 16, "truncated"),
    ("share_state", 0, 4, "truncated"),
    ("share_state", 2, 1, "truncated"),
    ("share_state", None, 9, "truncated"),
    ("share_state", 1, 7, "unknown record type"),
    ("share_state", 1, None, "unknown record type"),
    ("share_state", 1, 3, "unknown record type"),
    ("share_state", 3, 0, "wrong topic"),
    ("share_state", 3, 5, None),
    ("consumer_offsets", 3, 9, "unknown record type"),
    ("consumer_offsets", 3, 2, "wrong topic"),
    ("consumer_offsets", 0, 2, "truncated"),
    (None, 4, 1, "truncated"),
    (None, None, None, None),
]


def _quarantine(rows: list[tuple[Any, ...]]) -> pa.Table:
    names = ["source", "source_partition", "source_offset", "reason_kind"]
    types = [pa.string(), pa.int32(), pa.int64(), pa.string()]
    columns = zip(names, types, strict=True)
    return pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(columns)})


def test_quarantine_kinds_count_and_give_the_first_row_in_log_order_nulls_first() -> None:
    kinds = quarantine_kinds(_quarantine(QUARANTINE))
    assert kinds.schema == QUARANTINE_KINDS_SCHEMA
    assert _rows(kinds, *QUARANTINE_KINDS_SCHEMA.names) == _rows(
        pa.Table.from_pylist(
            [
                dict(zip(QUARANTINE_KINDS_SCHEMA.names, row, strict=True))
                for row in [
                    ("share_state", "truncated", 4, None, 9),
                    ("share_state", "unknown record type", 3, 1, None),
                    ("share_state", "wrong topic", 1, 3, 0),
                    ("share_state", None, 1, 3, 5),
                    ("consumer_offsets", "unknown record type", 1, 3, 9),
                    ("consumer_offsets", "wrong topic", 1, 3, 2),
                    ("consumer_offsets", "truncated", 1, 0, 2),
                    (None, "truncated", 1, 4, 1),
                    (None, None, 1, None, None),
                ]
            ]
        ),
        *QUARANTINE_KINDS_SCHEMA.names,
    )
    assert quarantine_kinds(_quarantine([])).num_rows == 0


def test_gaps_between_positions_count_repeats_and_nulls_and_no_partition() -> None:
    """Repeated offsets and nulls count towards a partition's rows (a repeat can hide a
    gap); rows without a partition are in none."""
    rows = [
        *[(0, o) for o in (0, 0, 2)],  # a repeat hides the gap
        *[(1, o) for o in (0, None, 3, 9, 10)],
        *[(2, o) for o in (None, 1, 4, 4, 7)],
        *[(None, o) for o in (0, 5)],
        *[(3, o) for o in range(5)],
        (4, None),
    ]
    positions = pa.table(
        {
            "source_partition": pa.array([r[0] for r in rows], pa.int32()),
            "source_offset": pa.array([r[1] for r in rows], pa.int64()),
        }
    )
    gaps = gap_ranges(positions)
    assert _rows(gaps, "source_partition", "_from", "_to") == [
        (1, 1, 2),
        (1, 4, 8),
        (2, 2, 3),
        (2, 5, 6),
    ]
    found = share_state_gap.run({"share_state_positions": positions})
    assert found is not None
    assert _rows(found, "severity", "source", *AT) == [
        ("warning", "share_state", 1, 1, 2),
        ("warning", "share_state", 1, 4, 5),
        ("warning", "share_state", 2, 2, 2),
        ("warning", "share_state", 2, 5, 2),
    ]
    assert gap_ranges(positions.slice(0, 0)).num_rows == 0
