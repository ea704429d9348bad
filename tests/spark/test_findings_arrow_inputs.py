"""The inputs a small run computes in Arrow for the finding rules' twins
(`findings_arrow.records.quarantine_kinds` and `exported_positions`) are the tables their
Spark versions give from the same rows: with nulls, several sources, rows of another topic,
and nothing at all."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate.audits.findings import records as spark_records
from sharestate.audits.findings_arrow import records
from sharestate.audits.pruning import exported_positions

QUARANTINE_SCHEMA = (
    "source string, source_partition int, source_offset long, reason string, reason_kind string"
)
QUARANTINE = [
    ("share_state", 0, 16, "truncated: 3 bytes", "truncated"),
    ("share_state", 0, 4, "truncated: 1 byte", "truncated"),
    ("share_state", 2, 1, "truncated: 2 bytes", "truncated"),
    ("share_state", None, 9, "truncated: ?", "truncated"),
    ("share_state", 1, 7, "unknown record type 99", "unknown record type"),
    ("share_state", 1, None, "unknown record type 98", "unknown record type"),
    ("share_state", 1, 3, "unknown record type 97", "unknown record type"),
    ("share_state", 3, 0, "a __consumer_offsets key", "wrong topic"),
    ("share_state", 3, 5, "no reason kind", None),
    ("consumer_offsets", 3, 9, "unknown record type 99", "unknown record type"),
    ("consumer_offsets", 3, 2, "a __share_group_state key", "wrong topic"),
    ("consumer_offsets", 0, 2, "truncated: 1 byte", "truncated"),
    (None, 4, 1, "no source", "truncated"),
    (None, None, None, "nothing known", None),
]
RECORDS = [(0, 1), (0, 2), (2, 0), (1, None)]


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.to_pylist()
    return sorted(rows, key=lambda row: tuple("" if v is None else str(v) for v in row.values()))


def _assert_same(found: pa.Table, expected: DataFrame) -> None:
    arrow = expected.toArrow()
    assert found.schema == arrow.schema
    assert _rows(found) == _rows(arrow)


def _quarantine(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, QUARANTINE_SCHEMA)


@pytest.mark.spark
@pytest.mark.parametrize(
    "rows",
    [
        QUARANTINE,
        QUARANTINE[:1],
        [q for q in QUARANTINE if q[0] == "consumer_offsets"],
        [],
    ],
    ids=["several sources and nulls", "one row", "one source", "empty"],
)
def test_quarantine_kinds_are_sparks(spark: SparkSession, rows: list[tuple[Any, ...]]) -> None:
    quarantine = _quarantine(spark, rows)
    _assert_same(
        records.quarantine_kinds(quarantine.toArrow()), spark_records.quarantine_kinds(quarantine)
    )


@pytest.mark.spark
def test_the_first_quarantined_row_is_first_in_log_order_nulls_first(spark: SparkSession) -> None:
    kinds = records.quarantine_kinds(_quarantine(spark, QUARANTINE).toArrow())
    first = {
        (r["source"], r["reason_kind"]): (
            r["rows"],
            r["first_source_partition"],
            r["first_source_offset"],
        )
        for r in kinds.to_pylist()
    }
    assert first[("share_state", "truncated")] == (4, None, 9)
    assert first[("share_state", "unknown record type")] == (3, 1, None)
    assert first[(None, None)] == (1, None, None)


@pytest.mark.spark
@pytest.mark.parametrize("source", ["share_state", "consumer_offsets", "other"])
@pytest.mark.parametrize(
    "quarantined", [QUARANTINE, [], None], ids=["quarantine", "empty quarantine", "none"]
)
def test_exported_positions_are_sparks(
    spark: SparkSession, source: str, quarantined: list[tuple[Any, ...]] | None
) -> None:
    exported = spark.createDataFrame(RECORDS, "source_partition int, source_offset long")
    quarantine = None if quarantined is None else _quarantine(spark, quarantined)
    found = records.exported_positions(
        exported.toArrow(), None if quarantine is None else quarantine.toArrow(), source
    )
    _assert_same(found, exported_positions(exported, quarantine, source))


@pytest.mark.spark
def test_exported_positions_keep_sparks_nullability(spark: SparkSession) -> None:
    """Decoded records whose positions are never null: the union is nullable only when the
    quarantine's positions are."""
    exported = spark.range(3).selectExpr(
        "cast(0 as int) as source_partition", "id as source_offset"
    )
    strict = _quarantine(spark, QUARANTINE[:2]).selectExpr(
        "source",
        "coalesce(source_partition, 0) as source_partition",
        "coalesce(source_offset, 0L) as source_offset",
        "reason_kind",
    )
    for quarantine in (None, strict, _quarantine(spark, QUARANTINE)):
        found = records.exported_positions(
            exported.toArrow(), None if quarantine is None else quarantine.toArrow(), "share_state"
        )
        _assert_same(found, exported_positions(exported, quarantine, "share_state"))


@pytest.mark.spark
def test_gap_ranges_are_sparks(spark: SparkSession) -> None:
    """Repeated offsets and nulls count towards a partition's rows, as in Spark (a repeat can
    hide a gap); rows without a partition are in none."""
    positions = spark.createDataFrame(
        [
            *[(0, o) for o in (0, 0, 2)],  # a repeat hides the gap
            *[(1, o) for o in (0, None, 3, 9, 10)],
            *[(2, o) for o in (None, 1, 4, 4, 7)],
            *[(None, o) for o in (0, 5)],
            *[(3, o) for o in range(5)],
            (4, None),
        ],
        "source_partition int, source_offset long",
    )
    found = records.gap_ranges(positions.toArrow())
    assert found.schema == spark_records.gap_ranges(positions).toArrow().schema
    assert _rows(found) == _rows(spark_records.gap_ranges(positions).toArrow())
    assert found.num_rows == 4
    assert _rows(records.gap_ranges(positions.limit(0).toArrow())) == []
