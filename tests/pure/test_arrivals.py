"""Placing an increment's delivered rows against the checkpoint (`arrivals.place_rows`): new
above a partition's last processed offset or on a partition not seen, backfilled below its
first or inside a known gap (or, without gaps, missing from the stored rows), processed
otherwise; duplicates counted and dropped, null positions placed as Spark's comparisons
place them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest

from sharestate.io.checkpoint import Extent
from sharestate.io.exports import RowCounts
from sharestate.job.arrivals import place_rows
from sharestate.job.driver_increment import KAFKA_ROW_SCHEMA
from sharestate.kafka.schemas import SHARE_STATE_TOPIC

_WHEN = datetime(2026, 11, 1, tzinfo=UTC)


def _kafka_row(partition: int | None, offset: int | None) -> dict[str, Any]:
    return {
        "key": b"\x00\x02" + b"\x00" * 4,
        "value": b"x",
        "topic": SHARE_STATE_TOPIC,
        "partition": partition,
        "offset": offset,
        "timestamp": _WHEN,
    }


def _delivered() -> tuple[pa.Table, dict[int, Extent], pa.Table]:
    """Delivered rows of every kind, the extents processed, and a gap the findings know."""
    rows = [_kafka_row(0, offset) for offset in (5, 9, 10, 12, 13, 14, 15, 16, 20, 21, 21, 30)]
    rows += [_kafka_row(1, offset) for offset in (0, 3, 4, 4, 7)]
    rows += [_kafka_row(2, offset) for offset in (1, 2)]  # a partition not seen
    rows += [_kafka_row(0, None), _kafka_row(None, 11)]
    extents = {0: Extent(first=10, last=20, rows=9), 1: Extent(first=0, last=5, rows=6)}
    gaps = pa.table(
        {
            "source_partition": pa.array([0], pa.int32()),
            "_from": pa.array([13], pa.int64()),
            "_to": pa.array([15], pa.int64()),
        }
    )
    return pa.Table.from_pylist(rows, schema=KAFKA_ROW_SCHEMA), extents, gaps


Position = tuple[int | None, int | None]


def _sorted(positions: list[Position]) -> list[Position]:
    return sorted(positions, key=lambda p: tuple((v is not None, v) for v in p))


def _positions(table: pa.Table) -> list[Position]:
    """(partition, offset) of each row of `table`, nulls first."""
    return _sorted(
        list(
            zip(
                table.column("partition").to_pylist(),
                table.column("offset").to_pylist(),
                strict=True,
            )
        )
    )


#: Above the extents, or on a partition they do not hold (a null partition included).
_NEW: list[Position] = [(None, 11), (0, 21), (0, 30), (1, 7), (2, 1), (2, 2)]


@pytest.mark.parametrize("with_lookup", [False, True], ids=["gaps", "stored-rows"])
def test_delivered_rows_are_placed_against_the_checkpoint(with_lookup: bool) -> None:
    rows, extents, gaps = _delivered()
    # Of the rows inside the extents, the stored tables hold these (the others are missing).
    held = pa.table({"partition": pa.array([0, 1], pa.int32()), "offset": pa.array([12, 3])})
    asked: list[pa.Table] = []

    def stored(positions: pa.Table) -> pa.Table:
        asked.append(positions)
        return held

    got = place_rows(
        rows,
        extents,
        gaps=None if with_lookup else gaps,
        stored=stored if with_lookup else None,
    )
    if with_lookup:
        # Every row inside the extents not among the stored ones is backfilled; only those
        # rows were looked up (a null offset is inside: it is neither above nor below).
        backfilled: list[Position] = [
            (0, None),
            (0, 5),
            (0, 9),
            (0, 10),
            (0, 13),
            (0, 14),
            (0, 15),
            (0, 16),
        ]
        backfilled += [(0, 20), (1, 0), (1, 4)]
        assert _positions(pa.concat_tables(asked)) == [
            (0, None),
            *[(0, o) for o in (10, 12, 13, 14, 15, 16, 20)],
            *[(1, o) for o in (0, 3, 4, 4)],
        ]
        assert (got.read, got.processed, got.backfill) == (21, 2, 12)
        assert got.counts == RowCounts(read=19, duplicates=2)  # (0, 21) and (1, 4) twice
    else:
        # Below a partition's first processed offset, or inside the known gap.
        backfilled = [(0, 5), (0, 9), (0, 13), (0, 14), (0, 15)]
        assert (got.read, got.processed, got.backfill) == (21, 9, 5)
        assert got.counts == RowCounts(read=12, duplicates=1)  # (0, 21) twice
    assert _positions(got.backfill_positions) == _sorted(backfilled)
    assert _positions(got.rows) == _sorted([*_NEW, *backfilled])
