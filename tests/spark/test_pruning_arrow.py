"""The pruning cut-off computed in Arrow (`sharestate.audits.pruning_arrow`, what an
incremental run does on the driver) gives the rows of its DataFrame twin
(`sharestate.audits.pruning.pruning_cutoff`, what a full run does) on a sample export:
from every position, and with each partition's positions cut at a seeded point into a
stored part (the table an earlier run wrote) and new ones."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate import audits
from sharestate.audits import pruning_arrow
from sharestate.audits.findings.records import gap_ranges
from sharestate.decode.columns import LOG_ORDER
from sharestate.io.store import arrow_frame
from tests.support.computed import computed_sample


@dataclass(frozen=True)
class Sample:
    placements: pa.Table
    positions: DataFrame
    gaps: pa.Table
    expected: list[dict[str, Any]]


@pytest.fixture(scope="module")
def sample(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    with computed_sample(spark, tmp_path_factory.mktemp("pruning-sample")) as results:
        placements = audits.share_partition_placements(results.share_partition_segments)
        positions = audits.exported_positions(
            results.share_state_records, results.quarantine, "share_state"
        ).cache()
        expected = _rows_of(audits.pruning_cutoff(placements, positions))
        yield Sample(placements.toArrow(), positions, gap_ranges(positions.toArrow()), expected)
        positions.unpersist()


def _rows_of(df: DataFrame) -> list[dict[str, Any]]:
    return sorted((r.asDict() for r in df.collect()), key=lambda r: r["source_partition"])


def _rows(spark: SparkSession, table: pa.Table) -> list[dict[str, Any]]:
    """Arrow rows as Spark collects them (timestamps in the session's zone)."""
    assert table.schema == pruning_arrow.PRUNING_SCHEMA
    return _rows_of(arrow_frame(spark, table))


@pytest.mark.spark
def test_cutoff_from_every_position_equals_the_dataframe_one(
    spark: SparkSession, sample: Sample
) -> None:
    nothing_stored = pruning_arrow.PRUNING_SCHEMA.empty_table()
    found = pruning_arrow.carried_pruning_cutoff(
        sample.placements, nothing_stored, sample.positions.toArrow(), sample.gaps
    )
    # The sample holds partitions Kafka can prune, held by a tracked share-partition.
    assert len(sample.expected) > 1
    assert any(r["prunable"] and r["held_by_group_id"] for r in sample.expected)
    assert any(r["records_before_cutoff"] for r in sample.expected)
    assert _rows(spark, found) == sample.expected


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2])
def test_stored_extents_widened_by_new_positions_equal_the_dataframe_one(
    spark: SparkSession, sample: Sample, seed: int
) -> None:
    rng = random.Random(seed)
    bounds = sample.positions.groupBy("source_partition").agg(
        F.min("source_offset").alias("lo"), F.max("source_offset").alias("hi")
    )
    cuts = spark.createDataFrame(
        [(r["source_partition"], rng.randint(r["lo"], r["hi"] + 1)) for r in bounds.collect()],
        "source_partition int, _cut long",
    )
    placed = sample.positions.join(cuts, "source_partition")
    older = placed.filter(F.col("source_offset") < F.col("_cut")).select(*LOG_ORDER)
    newer = placed.filter(F.col("source_offset") >= F.col("_cut")).select(*LOG_ORDER)
    # Only the stored table's extents carry on: its cut-offs are computed again.
    stored = audits.pruning_cutoff(arrow_frame(spark, sample.placements), older).toArrow()
    found = pruning_arrow.carried_pruning_cutoff(
        sample.placements, stored, newer.toArrow(), sample.gaps
    )
    assert 0 < newer.count() < sample.positions.count()
    assert _rows(spark, found) == sample.expected


@pytest.mark.spark
def test_positions_without_placements_have_no_cutoff(spark: SparkSession, sample: Sample) -> None:
    none = sample.placements.slice(0, 0)
    expected = _rows_of(audits.pruning_cutoff(arrow_frame(spark, none), sample.positions))
    found = pruning_arrow.carried_pruning_cutoff(
        none, pruning_arrow.PRUNING_SCHEMA.empty_table(), sample.positions.toArrow(), sample.gaps
    )
    assert all(r["cutoff_offset"] is None for r in expected)
    assert _rows(spark, found) == expected
