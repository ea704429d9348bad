"""Audit tables computed in Arrow for a small run on the driver (`counts_arrow.delivery_counts`,
`ranges_arrow.reasoned_intervals` and `final_state_columns`, `pruning_arrow.pruning_cutoff`)
give the rows of their DataFrame twins (`counts`, `ranges`, `pruning`): on a sample export
computed by the full pipeline, and on small hand-made tables with nulls, deleted
share-partitions, no batches, an empty state and batches near the ends of a long."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate import audits
from sharestate.audits import (
    counts,
    counts_arrow,
    pruning,
    pruning_arrow,
    ranges,
    ranges_arrow,
)
from sharestate.audits.segments_arrow import PLACEMENTS_SCHEMA
from sharestate.io.store import arrow_frame
from sharestate.kafka.constants import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    SNAPSHOT,
    TOMBSTONE,
    UPDATE,
)
from tests.support.computed import computed_sample

#: Low, so that the sample's records reach it and every reason has ranges.
LIMIT = 3
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_BATCH = pa.struct(
    [
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("delivery_state", pa.int32()),
        ("delivery_count", pa.int32()),
    ]
)
_BATCHES = pa.list_(_BATCH)
_KEY_FIELDS = [("group_id", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32())]


@dataclass(frozen=True)
class Sample:
    records: DataFrame
    state: DataFrame
    placements: DataFrame
    positions: DataFrame


@pytest.fixture(scope="module")
def sample(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    with computed_sample(spark, tmp_path_factory.mktemp("audit-tables-sample")) as results:
        positions = audits.exported_positions(
            results.share_state_records, results.quarantine, "share_state"
        ).cache()
        yield Sample(
            results.share_state_records,
            results.share_partition_state,
            audits.share_partition_placements(results.share_partition_segments),
            positions,
        )
        positions.unpersist()


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """Every row, in an order that does not depend on the table's (`repr` orders any row,
    nulls, lists and structs included)."""
    return sorted(table.to_pylist(), key=repr)


def _batch(
    first: int | None, last: int | None, state: int | None, count: int | None
) -> dict[str, Any]:
    return {
        "first_offset": first,
        "last_offset": last,
        "delivery_state": state,
        "delivery_count": count,
    }


def _at(seconds: int) -> datetime:
    return datetime.fromtimestamp(1_700_000_000 + seconds, UTC)


# delivery_counts


def _assert_counts_equal(state: DataFrame, table: pa.Table) -> pa.Table:
    expected = counts.delivery_counts(state, LIMIT).toArrow()
    found = counts_arrow.delivery_counts(table, LIMIT)
    assert found.schema == expected.schema == counts_arrow.DELIVERY_COUNTS_SCHEMA
    assert _rows(found) == _rows(expected)
    return found


@pytest.mark.spark
def test_delivery_counts_of_the_sample_equal_the_dataframe_ones(sample: Sample) -> None:
    found = _assert_counts_equal(sample.state, sample.state.toArrow())
    assert found.num_rows > 20
    assert set(found.column("at_delivery_limit").to_pylist()) == {True, False}


_EDGE_STATE_SCHEMA = pa.schema([*_KEY_FIELDS, ("deleted", pa.bool_()), ("state_batches", _BATCHES)])


def _edge_state() -> pa.Table:
    rows: list[dict[str, Any]] = [
        # The ends of a long: sizes of 2**64 and 2**63 wrap as Java's long arithmetic does.
        {
            "group_id": "g",
            "topic_id": "t",
            "partition": 0,
            "deleted": False,
            "state_batches": [
                _batch(LONG_MIN, LONG_MAX, AVAILABLE, 1),
                _batch(LONG_MIN, LONG_MAX, AVAILABLE, 1),
                _batch(0, LONG_MAX, AVAILABLE, 1),
                _batch(LONG_MAX, LONG_MAX, AVAILABLE, 2),
                _batch(LONG_MIN, LONG_MIN, AVAILABLE, 2),
                _batch(LONG_MAX, LONG_MIN, ARCHIVED, 5),
                _batch(5, 4, ARCHIVED, 5),
                _batch(LONG_MIN, -1, ACKNOWLEDGED, 3),
                _batch(LONG_MIN, -1, ACKNOWLEDGED, 3),
                _batch(LONG_MIN, -1, ACKNOWLEDGED, 3),
            ],
        },
        # Deleted unknown: live. A null batch, null fields, states Kafka does not name.
        {
            "group_id": "g",
            "topic_id": "t",
            "partition": 1,
            "deleted": None,
            "state_batches": [
                None,
                None,
                _batch(None, 10, ARCHIVED, 1),
                _batch(3, None, ARCHIVED, 1),
                _batch(1, 2, None, 1),
                _batch(1, 4, ARCHIVED, None),
                _batch(1, 4, 9, 0),
                _batch(7, 8, -1, 0),
                _batch(0, 0, ARCHIVED, 1),
            ],
        },
        {
            "group_id": "g",
            "topic_id": "t",
            "partition": 2,
            "deleted": True,
            "state_batches": [_batch(0, 9, ARCHIVED, 7)],
        },
        {"group_id": "g", "topic_id": "t", "partition": 3, "deleted": False, "state_batches": None},
        {"group_id": "g", "topic_id": "t", "partition": 4, "deleted": False, "state_batches": []},
        # A null key, and a key given twice (its rows group together).
        {
            "group_id": None,
            "topic_id": "t",
            "partition": None,
            "deleted": False,
            "state_batches": [_batch(1, 1, ARCHIVED, 4)],
        },
        {
            "group_id": "h",
            "topic_id": "t",
            "partition": 0,
            "deleted": False,
            "state_batches": [_batch(1, 5, ARCHIVED, 3)],
        },
        {
            "group_id": "h",
            "topic_id": "t",
            "partition": 0,
            "deleted": False,
            "state_batches": [_batch(8, 9, ARCHIVED, 3), _batch(20, 29, ARCHIVED, 4)],
        },
    ]
    return pa.Table.from_pylist(rows, schema=_EDGE_STATE_SCHEMA)


@pytest.mark.spark
def test_delivery_counts_of_edge_cases_equal_the_dataframe_ones(spark: SparkSession) -> None:
    table = _edge_state()
    found = _assert_counts_equal(arrow_frame(spark, table), table)
    by_group = {
        (r["partition"], r["delivery_state"], r["delivery_count"]): r["offsets"]
        for r in found.to_pylist()
        if r["group_id"] == "g"
    }
    # 2**64 + 2**64 + 2**63 wraps to Long.MIN_VALUE; 1 + 1; 0 + 0; 3 * 2**63 wraps too.
    assert by_group[(0, AVAILABLE, 1)] == LONG_MIN
    assert by_group[(0, AVAILABLE, 2)] == 2
    assert by_group[(0, ARCHIVED, 5)] == 0
    assert by_group[(0, ACKNOWLEDGED, 3)] == LONG_MIN
    assert (1, None, None) in by_group
    assert 2 not in {p for p, _, _ in by_group}


@pytest.mark.spark
def test_delivery_counts_of_an_empty_state_are_empty(spark: SparkSession, sample: Sample) -> None:
    _assert_counts_equal(sample.state.limit(0), sample.state.limit(0).toArrow())
    none = _EDGE_STATE_SCHEMA.empty_table()
    _assert_counts_equal(arrow_frame(spark, none), none)
    deleted = _edge_state().slice(2, 1)
    assert _assert_counts_equal(arrow_frame(spark, deleted), deleted).num_rows == 0


# reasoned_intervals and final_state_columns


def _assert_intervals_equal(records: DataFrame, table: pa.Table) -> pa.Table:
    expected = ranges.reasoned_intervals(records, LIMIT).toArrow()
    found = ranges_arrow.reasoned_intervals(table, LIMIT)
    assert found.schema == expected.schema
    assert _rows(found) == _rows(expected)
    return found


def _assert_final_equal(state: DataFrame, table: pa.Table) -> pa.Table:
    expected = ranges.final_state_columns(state).toArrow()
    found = ranges_arrow.final_state_columns(table)
    assert found.schema == expected.schema
    assert _rows(found) == _rows(expected)
    return found


def _range_rows(table: pa.Table) -> list[dict[str, Any]]:
    typed = table.select(ranges_arrow.RANGES_SCHEMA.names).cast(ranges_arrow.RANGES_SCHEMA)
    return _rows(typed)


def _assert_ranges_equal(
    records: DataFrame, state: DataFrame, record_table: pa.Table, state_table: pa.Table
) -> pa.Table:
    expected = ranges.archived_ranges(records, state, LIMIT).toArrow()
    found = ranges_arrow.archived_ranges(
        ranges_arrow.reasoned_intervals(record_table, LIMIT),
        ranges_arrow.final_state_columns(state_table),
    )
    assert _range_rows(found) == _range_rows(expected)
    return found


def test_reasons_are_the_dataframe_ones() -> None:
    assert ranges_arrow.REASON_DELIVERY_LIMIT == ranges.REASON_DELIVERY_LIMIT
    assert ranges_arrow.REASON_BELOW_LIMIT == ranges.REASON_BELOW_LIMIT
    assert ranges_arrow.REASON_NEVER_DELIVERED == ranges.REASON_NEVER_DELIVERED


@pytest.mark.spark
def test_intervals_and_final_state_of_the_sample_equal_the_dataframe_ones(sample: Sample) -> None:
    records, state = sample.records.toArrow(), sample.state.toArrow()
    intervals = _assert_intervals_equal(sample.records, records)
    assert intervals.num_rows > 100
    assert set(intervals.column("reason").to_pylist()) >= {
        ranges.REASON_DELIVERY_LIMIT,
        ranges.REASON_BELOW_LIMIT,
    }
    final = _assert_final_equal(sample.state, state)
    assert any(final.column("_archived").to_pylist())
    found = _assert_ranges_equal(sample.records, sample.state, records, state)
    assert found.num_rows > 100
    assert set(found.column("settled").to_pylist()) == {True, False}


_EDGE_RECORDS_SCHEMA = pa.schema(
    [
        *_KEY_FIELDS,
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("source_timestamp", _TIMESTAMP),
        ("record_type", pa.string()),
        ("state_batches", _BATCHES),
    ]
)


def _record(
    partition: int | None,
    offset: int,
    record_type: str | None,
    batches: list[dict[str, Any] | None] | None,
    group: str | None = "g",
) -> dict[str, Any]:
    return {
        "group_id": group,
        "topic_id": "t",
        "partition": partition,
        "source_partition": 0 if offset % 2 else 1,
        "source_offset": offset,
        "source_timestamp": _at(offset),
        "record_type": record_type,
        "state_batches": batches,
    }


def _edge_records(with_nulls: bool) -> pa.Table:
    """Records of every kind; `with_nulls`: null keys, batches and batch fields too (which
    `ranges_arrow.archived_ranges` does not take: decoded batches have none)."""
    rows = [
        _record(
            0,
            1,
            SNAPSHOT,
            [
                _batch(0, 4, ARCHIVED, 1),
                _batch(5, 9, ARCHIVED, LIMIT),
                _batch(10, 10, ARCHIVED, 0),
                _batch(11, 12, ARCHIVED, -1),
                _batch(20, 19, ARCHIVED, LIMIT),
                _batch(30, 39, ACKNOWLEDGED, 1),
                _batch(LONG_MAX - 1, LONG_MAX, ARCHIVED, LIMIT + 2),
            ],
        ),
        _record(0, 2, UPDATE, [_batch(3, 7, ARCHIVED, 2), _batch(13, 15, ARCHIVED, 1)]),
        _record(0, 3, UPDATE, None),
        _record(0, 4, UPDATE, []),
        _record(0, 5, TOMBSTONE, [_batch(0, 99, ARCHIVED, 1)]),
        _record(1, 6, SNAPSHOT, [_batch(100, 109, ARCHIVED, LIMIT)]),
        _record(2, 7, UPDATE, [_batch(0, 0, ARCHIVED, 1)]),
        _record(3, 8, SNAPSHOT, [_batch(50, 59, ARCHIVED, 1), _batch(60, 60, AVAILABLE, 0)]),
    ]
    if with_nulls:
        rows += [
            _record(
                0,
                9,
                SNAPSHOT,
                [
                    None,
                    _batch(None, 3, ARCHIVED, 1),
                    _batch(3, None, ARCHIVED, 1),
                    _batch(3, 4, None, 1),
                    _batch(3, 4, ARCHIVED, None),
                ],
            ),
            _record(0, 10, None, [_batch(0, 1, ARCHIVED, 1)]),
            _record(None, 11, UPDATE, [_batch(0, 1, ARCHIVED, 1)], group=None),
        ]
    return pa.Table.from_pylist(rows, schema=_EDGE_RECORDS_SCHEMA)


_EDGE_FINAL_SCHEMA = pa.schema(
    [
        *_KEY_FIELDS,
        ("deleted", pa.bool_()),
        ("start_offset", pa.int64()),
        ("effective_start_offset", pa.int64()),
        ("state_batches", _BATCHES),
    ]
)


def _state(
    partition: int,
    deleted: bool | None,
    start: int | None,
    batches: list[dict[str, Any] | None] | None,
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


def _edge_final(with_nulls: bool) -> pa.Table:
    """The state of `_edge_records`' share-partitions (partition 2 has none); `with_nulls`:
    Archived batches with null fields too."""
    rows = [
        _state(
            0,
            False,
            6,
            [
                None,
                _batch(8, 9, ARCHIVED, LIMIT),
                _batch(10, 10, ACKNOWLEDGED, 1),
                _batch(12, 20, ARCHIVED, 1),
                _batch(3, 4, None, 1),
            ],
        ),
        _state(1, True, 100, [_batch(100, 109, ARCHIVED, LIMIT)]),
        _state(3, None, None, None),
    ]
    if with_nulls:
        rows += [
            _state(4, False, None, []),
            _state(5, False, 7, [_batch(None, 9, ARCHIVED, 1), _batch(5, None, AVAILABLE, 1)]),
            _state(6, None, None, [_batch(None, 1, AVAILABLE, 1)]),
            _state(7, True, None, [_batch(LONG_MIN, LONG_MAX, ARCHIVED, 1)]),
        ]
    return pa.Table.from_pylist(rows, schema=_EDGE_FINAL_SCHEMA)


@pytest.mark.spark
def test_intervals_and_final_state_of_edge_cases_equal_the_dataframe_ones(
    spark: SparkSession,
) -> None:
    records = _edge_records(with_nulls=True)
    intervals = _assert_intervals_equal(arrow_frame(spark, records), records)
    assert set(intervals.column("reason").to_pylist()) == {
        ranges.REASON_DELIVERY_LIMIT,
        ranges.REASON_BELOW_LIMIT,
        ranges.REASON_NEVER_DELIVERED,
    }
    final = _edge_final(with_nulls=True)
    found = _assert_final_equal(arrow_frame(spark, final), final)
    # A slice of the state (its lists at an offset) gives the rows of the slice.
    assert _rows(ranges_arrow.final_state_columns(final.slice(1))) == _rows(found.slice(1))
    bounds = dict(
        zip(found.column("partition").to_pylist(), found.column("_bound").to_pylist(), strict=True)
    )
    assert bounds == {0: 3, 1: None, 3: None, 4: None, 5: 5, 6: None, 7: None}


@pytest.mark.spark
def test_ranges_of_edge_cases_equal_the_dataframe_ones(spark: SparkSession) -> None:
    records, final = _edge_records(with_nulls=False), _edge_final(with_nulls=False)
    found = _assert_ranges_equal(
        arrow_frame(spark, records), arrow_frame(spark, final), records, final
    )
    # A deleted share-partition, one without a state and one without batches are there.
    assert {1, 2, 3} <= set(found.column("partition").to_pylist())


@pytest.mark.spark
def test_no_records_and_an_empty_state_give_empty_tables(
    spark: SparkSession, sample: Sample
) -> None:
    records, state = sample.records.limit(0), sample.state.limit(0)
    assert _assert_intervals_equal(records, records.toArrow()).num_rows == 0
    assert _assert_final_equal(state, state.toArrow()).num_rows == 0
    found = _assert_ranges_equal(records, state, records.toArrow(), state.toArrow())
    assert found.num_rows == 0
    # Records whose batches hold nothing Archived, against an empty state.
    edge = _edge_records(with_nulls=False)
    none = pa.Table.from_pylist(edge.slice(2, 2).to_pylist(), schema=edge.schema)
    empty = _EDGE_FINAL_SCHEMA.empty_table()
    assert _assert_intervals_equal(arrow_frame(spark, none), none).num_rows == 0
    _assert_final_equal(arrow_frame(spark, empty), empty)


# pruning_cutoff


def _pruning_rows(table: pa.Table) -> list[dict[str, Any]]:
    return _rows(table.cast(pruning_arrow.PRUNING_SCHEMA))


def _assert_pruning_equal(
    placements: DataFrame, positions: DataFrame, placement_table: pa.Table, position_table: pa.Table
) -> pa.Table:
    expected = pruning.pruning_cutoff(placements, positions).toArrow()
    found = pruning_arrow.pruning_cutoff(placement_table, position_table)
    assert found.schema == pruning_arrow.PRUNING_SCHEMA
    assert _pruning_rows(found) == _pruning_rows(expected)
    return found


@pytest.mark.spark
def test_pruning_cutoff_of_the_sample_equals_the_dataframe_one(sample: Sample) -> None:
    found = _assert_pruning_equal(
        sample.placements, sample.positions, sample.placements.toArrow(), sample.positions.toArrow()
    )
    rows = found.to_pylist()
    assert len(rows) > 1
    assert any(r["prunable"] and r["held_by_group_id"] for r in rows)
    assert any(r["records_before_cutoff"] for r in rows)


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
            "source_timestamp": None if event[0] is None else _at(event[0]),
            "record_type": event[1],
        },
    }


def _edge_placements() -> pa.Table:
    rows = [
        # Held by the lowest tracked snapshot; a deleted share-partition besides.
        _placement(0, 0, (15, UPDATE), (10, SNAPSHOT)),
        _placement(0, 1, (20, SNAPSHOT), (20, SNAPSHOT)),
        _placement(0, 2, (30, TOMBSTONE), (30, TOMBSTONE)),
        # Every share-partition deleted: the last tombstone's offset.
        _placement(1, 0, (7, TOMBSTONE), (7, TOMBSTONE)),
        _placement(1, 1, (3, TOMBSTONE), (3, TOMBSTONE)),
        # Untracked and live: no snapshot or tombstone, no cut-off.
        _placement(2, 0, (4, UPDATE), None),
        _placement(2, 1, (5, None), None),
        # A cut-off of 0: nothing to prune.
        _placement(3, 0, (2, UPDATE), (0, SNAPSHOT)),
        # No exported position in this partition: no row.
        _placement(5, 0, (9, SNAPSHOT), (9, SNAPSHOT)),
        # A null partition joins nothing.
        _placement(None, 0, (1, SNAPSHOT), (1, SNAPSHOT)),
    ]
    return pa.Table.from_pylist(rows, schema=PLACEMENTS_SCHEMA)


_POSITIONS_SCHEMA = pa.schema([("source_partition", pa.int32()), ("source_offset", pa.int64())])


def _edge_positions() -> pa.Table:
    rows = [
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
        [{"source_partition": p, "source_offset": o} for p, o in rows], schema=_POSITIONS_SCHEMA
    )


@pytest.mark.spark
def test_pruning_cutoff_of_edge_cases_equals_the_dataframe_one(spark: SparkSession) -> None:
    placements, positions = _edge_placements(), _edge_positions()
    found = _assert_pruning_equal(
        arrow_frame(spark, placements), arrow_frame(spark, positions), placements, positions
    )
    by_partition = {r["source_partition"]: r for r in found.to_pylist()}
    assert set(by_partition) == {0, 1, 2, 3, 4, None}
    assert by_partition[0]["cutoff_offset"] == 10
    assert by_partition[0]["records_before_cutoff"] == 4
    assert by_partition[1]["cutoff_offset"] == 7
    assert by_partition[2]["cutoff_offset"] is None
    assert by_partition[3]["prunable"] is False


@pytest.mark.spark
def test_pruning_cutoff_without_placements_or_positions(spark: SparkSession) -> None:
    placements, positions = _edge_placements(), _edge_positions()
    no_placements = PLACEMENTS_SCHEMA.empty_table()
    no_positions = _POSITIONS_SCHEMA.empty_table()
    found = _assert_pruning_equal(
        arrow_frame(spark, no_placements), arrow_frame(spark, positions), no_placements, positions
    )
    assert found.column("cutoff_offset").null_count == found.num_rows > 0
    for placed, position_table in ((placements, no_positions), (no_placements, no_positions)):
        empty = _assert_pruning_equal(
            arrow_frame(spark, placed),
            arrow_frame(spark, position_table),
            placed,
            position_table,
        )
        assert empty.num_rows == 0


def test_pruning_cutoff_counts_a_million_positions() -> None:
    """A million positions over a few partitions, counted per partition."""
    import numpy as np

    n = 1_000_000
    positions = pa.table(
        {
            "source_partition": pa.array(np.arange(n) % 4, pa.int32()),
            "source_offset": pa.array(np.arange(n) // 4, pa.int64()),
        }
    )
    found = pruning_arrow.pruning_cutoff(_edge_placements(), positions)
    rows = {r["source_partition"]: r for r in found.to_pylist()}
    assert rows[0]["exported_records"] == n // 4
    assert rows[0]["records_before_cutoff"] == 10
    assert rows[1]["records_before_cutoff"] == 7
    assert rows[2]["records_before_cutoff"] == 0
