"""The archived ranges computed in Arrow (`sharestate.audits.ranges_arrow`, what an
incremental run does on the driver) give the rows of their DataFrame twins
(`sharestate.audits.ranges`, what a full run does): from every record of a sample export,
and with the records cut per share-partition at seeded random points into a stored part
(its ranges, as an earlier run wrote them) and a new part."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.audits import ranges, ranges_arrow
from sharestate.decode.columns import KEY
from sharestate.io.store import arrow_frame
from tests.support.computed import computed_sample

#: Low, so that the sample's records reach it and every reason has ranges.
LIMIT = 3
IDENTITY = (*KEY, "reason", "first_offset")


@dataclass(frozen=True)
class Sample:
    records: DataFrame
    state: DataFrame


@pytest.fixture(scope="module")
def sample(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sample]:
    with computed_sample(spark, tmp_path_factory.mktemp("ranges-sample")) as results:
        yield Sample(results.share_state_records, results.share_partition_state)


def _rows(table: pa.Table) -> list[dict[str, object]]:
    typed = table.select(ranges_arrow.RANGES_SCHEMA.names).cast(ranges_arrow.RANGES_SCHEMA)
    rows: list[dict[str, object]] = typed.sort_by([(c, "ascending") for c in IDENTITY]).to_pylist()
    return rows


def _split(records: DataFrame, seed: int) -> tuple[DataFrame, DataFrame]:
    """Each share-partition's records cut at a random offset: (before, from it on)."""
    rng = random.Random(seed)
    offsets = records.groupBy(*KEY).agg(F.collect_list("source_offset").alias("o")).collect()
    cuts = [
        (*row[: len(KEY)], rng.choice([*sorted(row["o"]), max(row["o"]) + 1])) for row in offsets
    ]
    cut = records.sparkSession.createDataFrame(cuts, [*KEY, "_cut"])
    placed = records.join(cut, list(KEY))
    older = placed.filter(F.col("source_offset") < F.col("_cut")).drop("_cut")
    newer = placed.filter(F.col("source_offset") >= F.col("_cut")).drop("_cut")
    return older, newer


def _intervals(records: DataFrame) -> pa.Table:
    return ranges.reasoned_intervals(records, LIMIT).toArrow()


@pytest.mark.spark
def test_ranges_of_every_record_equal_the_dataframe_ones(sample: Sample) -> None:
    expected = ranges.archived_ranges(sample.records, sample.state, LIMIT).toArrow()
    found = ranges_arrow.archived_ranges(
        _intervals(sample.records), ranges.final_state_columns(sample.state).toArrow()
    )
    assert found.num_rows == expected.num_rows > 100
    reasons = set(found.column("reason").to_pylist())
    assert reasons >= {ranges.REASON_DELIVERY_LIMIT, ranges.REASON_BELOW_LIMIT}
    # Ranges of several intervals, settled ones and ones still in the state are there.
    assert max(found.column("sightings").to_pylist()) > 1
    assert set(found.column("settled").to_pylist()) == {True, False}
    assert _rows(found) == _rows(expected)


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2])
def test_new_intervals_merged_with_stored_ranges_equal_the_dataframe_ones(
    spark: SparkSession, sample: Sample, seed: int
) -> None:
    older, newer = _split(sample.records, seed)
    stored = ranges.archived_ranges(older, sample.state, LIMIT).toArrow()
    expected = ranges.archived_ranges(
        newer, sample.state, LIMIT, stored=arrow_frame(spark, stored)
    ).toArrow()
    found = ranges_arrow.archived_ranges(
        _intervals(newer), ranges.final_state_columns(sample.state).toArrow(), stored=stored
    )
    assert found.num_rows == expected.num_rows > 100
    assert _rows(found) == _rows(expected)


@pytest.mark.spark
def test_no_intervals_and_no_state_give_no_ranges(sample: Sample) -> None:
    none = sample.records.limit(0)
    found = ranges_arrow.archived_ranges(
        _intervals(none), ranges.final_state_columns(sample.state.limit(0)).toArrow()
    )
    assert found.num_rows == 0
    assert found.schema == ranges_arrow.RANGES_SCHEMA
