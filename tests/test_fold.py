"""The fast fold (`sharestate.fold`) against Kafka's own replay, record by record.

The corpus (tests/replay_corpus/, written by Kafka's ShareCoordinatorShard) holds the state
Kafka has after every record. The fold is fed the decoded records the way Spark feeds it
(sorted by share-partition, segment and log order, in Arrow batches) and every history row
is compared: scalars and counts on every row, the batch list itself wherever the fold emits
it (each segment's last row and each input batch's last row; with one-row batches, that is
every row).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from test_replay_corpus import _bytes, _key, _sequences

from sharestate.fold import (
    COUNT_COLUMNS,
    HISTORY_FIELDS,
    MOVED_AT_TYPE,
    PASSTHROUGH_FIELDS,
    fold_batches,
)
from sharestate.records import decode_share_state, parse_kafka_version, share_state_layouts
from sharestate.state import STATE_FIELDS, offsets_by_state
from sharestate.tables import STATE_BATCHES_TYPE

INPUT_SCHEMA = pa.schema(
    [
        *[f for f in PASSTHROUGH_FIELDS if f.name != "segment"],
        *[f for f in HISTORY_FIELDS if f.name in STATE_FIELDS],
        pa.field("state_batches", STATE_BATCHES_TYPE),
        pa.field("seed_last_snapshot_offset", pa.int64()),
        pa.field("seed_since", MOVED_AT_TYPE),
        pa.field("seed_segment", pa.int64()),
    ]
)


def _fold_input(release: str, limit: int | None) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    """Rows in the fold's order, and Kafka's expected state per (source_partition, offset)."""
    layouts = share_state_layouts(release)
    rows: list[dict[str, Any]] = []
    expected: dict[tuple[int, int], dict[str, Any] | None] = {}
    for sequence in _sequences(release):
        if limit is not None and sequence["sequence"] >= limit:
            break
        segments: dict[str, int] = {}
        for record in sequence["records"]:
            row = decode_share_state(
                _bytes(record["key_hex"]), _bytes(record["value_hex"]), layouts
            )
            key = _key(row)
            if row["record_type"] in ("snapshot", "tombstone"):
                segments[key] = segments.get(key, 0) + 1
            where = (sequence["sequence"], record["offset"])
            row.update(
                segment=segments.get(key, 0),
                source_partition=where[0],
                source_offset=where[1],
                source_timestamp=None,
                state_batches=[
                    dict(
                        zip(
                            ("first_offset", "last_offset", "delivery_state", "delivery_count"),
                            b,
                            strict=True,
                        )
                    )
                    for b in row["state_batches"] or ()
                ],
            )
            rows.append(row)
            if key in record["expected"]:  # (a few records carry no expectation)
                expected[where] = record["expected"][key]
    rows.sort(
        key=lambda r: (
            r["group_id"],
            r["topic_id"],
            r["partition"],
            r["segment"],
            r["source_partition"],
            r["source_offset"],
        )
    )
    return rows, expected


def _fold(
    rows: list[dict[str, Any]], batch_rows: int, kafka: tuple[int, int]
) -> Iterator[dict[str, Any]]:
    table = pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)
    for batch in fold_batches(iter(table.to_batches(max_chunksize=batch_rows)), kafka):
        yield from batch.to_pylist()


def _check(history: Iterator[dict[str, Any]], expected: dict[Any, Any]) -> tuple[int, int]:
    rows = batch_lists = 0
    for got in history:
        where = (got["source_partition"], got["source_offset"])
        if where not in expected:
            continue
        want = expected[where]
        rows += 1
        if want is None:
            assert got["deleted"], got
            continue
        assert not got["deleted"], where
        assert {n: got[n] for n in STATE_FIELDS} == {n: want[n] for n in STATE_FIELDS}, where
        counts = offsets_by_state(tuple(b) for b in want["batches"])
        assert {n: got[n] for n in COUNT_COLUMNS} == {
            n: counts.get(state, 0) for n, state in COUNT_COLUMNS.items()
        }, where
        assert got["state_batch_count"] == len(want["batches"]), where
        if got["state_batches"] is not None:
            batch_lists += 1
            assert [list(b.values()) for b in got["state_batches"]] == want["batches"], where
    return rows, batch_lists


# The pairwise releases share `combiner.combine` with the reference replay, which
# tests/test_replay_corpus.py checks on every release; here: 4.0 (its own rules for a state
# an update starts) and 4.4 (the windowed sweep).
@pytest.mark.parametrize("release", ["4.0.2", "4.4.0"])
def test_fold_matches_kafka_on_the_whole_corpus(release: str) -> None:
    kafka = parse_kafka_version(release)
    assert kafka is not None
    rows, expected = _fold_input(release, None)
    history = list(_fold(rows, 10_000, kafka))
    # The fold numbers segments as the running count of snapshots and tombstones.
    assert [row["segment"] for row in history] == [row["segment"] for row in rows]
    checked, lists = _check(iter(history), expected)
    assert checked == len(expected) > 150_000
    assert lists > 2_000  # at least every sequence's final lists


@pytest.mark.parametrize("release", ["4.1.2", "4.4.0"])
def test_fold_batch_lists_match_kafka_after_every_record(release: str) -> None:
    kafka = parse_kafka_version(release)
    assert kafka is not None
    rows, expected = _fold_input(release, 150)
    checked, lists = _check(_fold(rows, 1, kafka), expected)
    assert checked == len(expected) > 5_000
    assert lists == checked - sum(1 for want in expected.values() if want is None)
