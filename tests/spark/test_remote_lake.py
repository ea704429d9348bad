"""An export and an output on a remote file system (a real HDFS mini-cluster,
`tests/support/hdfs.py`): an incremental run reads only what its stream delivers there,
not the whole export, and the tables end as a full run's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate.io.store import arrow_frame
from sharestate.job.config import JobConfig
from sharestate.job.run import main
from sharestate.sample.exports import SampleSpec, generate
from tests.support.hdfs import mini_hdfs

#: Written by every run with its own time: compared apart.
RUN_TABLES = {"run_summary", "_checkpoint"}
#: The tables every run writes (output-tables.md).
TABLES = (
    "share_state_records",
    "share_partition_history",
    "share_partition_state",
    "share_partition_segments",
    "delivery_counts",
    "poison_messages",
    "archived_messages",
    "pruning_cutoff",
    "quarantine",
    "findings",
    "_placements",
)


@pytest.fixture(scope="module")
def hdfs() -> Iterator[str]:
    with mini_hdfs() as url:
        yield url


def _split(records: int, seed: int) -> tuple[pa.Table, pa.Table]:
    """A sample export: each partition's offsets below a cut first, the rest later."""
    state, _ = generate(SampleSpec(records=records, share_partitions=24, seed=seed))
    offsets = sorted(state.column("offset").to_pylist())
    first = pc.less(state.column("offset"), offsets[len(offsets) * 2 // 3])
    return state.filter(first), state.filter(pc.invert(first))


def _rows(df: DataFrame) -> Counter[str]:
    return Counter(
        json.dumps(row.asDict(recursive=True), sort_keys=True, default=str) for row in df.collect()
    )


def _run(spark: SparkSession, share_state: str, output: str, mode: str) -> dict[str, Any]:
    return main(spark, JobConfig(share_state=share_state, output=output, mode=mode))


@pytest.mark.spark
# The file source on HDFS in `make test`; Delta's in `make test-slow`.
@pytest.mark.parametrize("fmt", ["parquet", pytest.param("delta", marks=pytest.mark.slow)])
def test_an_increment_on_hdfs_reads_what_is_new(
    spark: SparkSession, hdfs: str, fmt: str, tmp_path: Path
) -> None:
    early, late = _split(900, seed=17)
    export, output = f"{hdfs}/{fmt}/export", f"{hdfs}/{fmt}/out"
    arrow_frame(spark, early).write.format(fmt).save(export)
    assert _run(spark, export, output, "incremental")["mode"] == "full"

    arrow_frame(spark, late).write.format(fmt).mode("append").save(export)
    summary = _run(spark, export, output, "incremental")
    inputs = summary["inputs"]["share_state"]
    assert summary["mode"] == "incremental", summary
    # The stream delivered the new rows only: the export was not read again.
    assert inputs["rows_read"] == late.num_rows and not inputs["export_read_whole"], inputs
    assert inputs["already_processed"] == 0

    # The reference: a full run over the same export, its tables local (delta-rs commits).
    full = str(tmp_path / "full")
    _run(spark, export, full, "full")
    for name in TABLES:
        got = spark.read.format("delta").load(f"{output}/{name}")
        want = spark.read.format("delta").load(f"{full}/{name}")
        assert got.columns == want.columns, name
        assert _rows(got) == _rows(want), name
