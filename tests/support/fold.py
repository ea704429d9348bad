"""Feeding the fold (`sharestate.replay.fold`) Kafka's replay corpus as Spark feeds it, and
checking every history row against the state Kafka held after that record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from sharestate.decode.columns import STATE_BATCHES_TYPE
from sharestate.kafka.records import decode_share_state, share_state_layouts
from sharestate.replay.fold import (
    COUNT_COLUMNS,
    HISTORY_FIELDS,
    MOVED_AT_TYPE,
    PASSTHROUGH_FIELDS,
    fold_batches,
)
from sharestate.replay.state import STATE_FIELDS, offsets_by_state
from tests.support.corpus import hex_bytes, read_sequences, share_partition_key

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


def fold_input(release: str, limit: int | None) -> tuple[list[dict[str, Any]], dict[Any, Any]]:
    """Rows in the fold's order, and Kafka's expected state per (source_partition, offset)."""
    layouts = share_state_layouts(release)
    rows: list[dict[str, Any]] = []
    expected: dict[tuple[int, int], dict[str, Any] | None] = {}
    for sequence in read_sequences(release):
        if limit is not None and sequence["sequence"] >= limit:
            break
        segments: dict[str, int] = {}
        for record in sequence["records"]:
            row = decode_share_state(
                hex_bytes(record["key_hex"]), hex_bytes(record["value_hex"]), layouts
            )
            key = share_partition_key(row)
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


def fold(
    rows: list[dict[str, Any]], batch_rows: int, kafka: tuple[int, int]
) -> Iterator[dict[str, Any]]:
    table = pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)
    for batch in fold_batches(iter(table.to_batches(max_chunksize=batch_rows)), kafka):
        yield from batch.to_pylist()


def check(history: Iterator[dict[str, Any]], expected: dict[Any, Any]) -> tuple[int, int]:
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
