"""The exported positions the finding rules read, as the driver computes them in Arrow
(`findings.records.exported_positions`), are those Spark's `pruning.exported_positions`
gives from the same rows (the pruning cut-off reads those): with nulls, several sources,
rows of another topic, and nothing at all. (The rules' other inputs: tests/pure.)"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate.audits.findings import records
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
