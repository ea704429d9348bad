"""`--mode incremental`: a full run over the first part of an export, then an incremental
run over the whole export, gives the same tables as one full run over the whole export."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from sharestate.job import JobConfig, cli, main
from sharestate.sample.exports import SampleSpec, generate

SKIPPED = {"run_summary", "_checkpoint"}


def _write(folder: Path, table: object) -> str:
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet")  # type: ignore[arg-type]
    return str(folder)


def _with_gaps(state: pa.Table) -> pa.Table:
    """The export without a few offsets of its two longest partitions: lost records, some
    before the first run's boundary (offset 30), one at it, some after it."""
    counts = Counter(state.column("partition").to_pylist())
    (first, _), (second, _) = counts.most_common(2)
    dropped = {(first, 10), (first, 11), (first, 30), (first, 45), (second, 29), (second, 40)}
    keep = [
        (p, o) not in dropped
        for p, o in zip(
            state.column("partition").to_pylist(), state.column("offset").to_pylist(), strict=True
        )
    ]
    assert state.num_rows - sum(keep) == len(dropped)
    return state.filter(pa.array(keep))


@pytest.mark.spark
def test_incremental_run_equals_a_full_run(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, offsets = generate(
        SampleSpec(records=1_500, share_partitions=30, records_per_snapshot=4)
    )
    state = _with_gaps(state)
    # The first run sees each partition's first 30 rows; the second the whole export.
    early_state = state.filter(state.column("offset").to_numpy() < 30)
    assert 0 < early_state.num_rows < state.num_rows
    early_offsets = offsets.filter(offsets.column("offset").to_numpy() < 8)
    first = (_write(tmp_path / "a" / "s", early_state), _write(tmp_path / "a" / "o", early_offsets))
    whole = (_write(tmp_path / "b" / "s", state), _write(tmp_path / "b" / "o", offsets))

    def run(export: tuple[str, str], output: Path, mode: str) -> dict[str, object]:
        config = JobConfig(
            share_state=export[0], consumer_offsets=export[1], output=str(output), mode=mode
        )
        return main(spark, config)

    run(first, tmp_path / "inc", "full")
    caplog.set_level(logging.INFO, logger="sharestate")
    caplog.clear()
    summary = run(whole, tmp_path / "inc", "incremental")
    assert summary["mode"] == "incremental"
    share_state = summary["inputs"]["share_state"]  # type: ignore[index]
    assert share_state["already_processed"] == early_state.num_rows
    assert share_state["rows_read"] == state.num_rows - early_state.num_rows
    # The stage log counts the rows this run appended, not the table's.
    appended = f"wrote share_state_records: {share_state['decoded']:,} rows (appended) in "
    assert any(m.startswith(appended) for m in caplog.messages), caplog.messages
    run(whole, tmp_path / "full", "full")
    tables = sorted(p.name for p in (tmp_path / "full").iterdir() if p.is_dir())
    assert {"share_partition_state", "share_partition_history", "findings"} <= set(tables)
    # The carried tables are put to the test: gaps before, at and after the boundary, and
    # records before the pruning cut-off, which the incremental run counts from the gaps.
    findings = spark.read.format("delta").load(str(tmp_path / "full" / "findings"))
    assert findings.filter("code = 'source_offset_gap' AND source = 'share_state'").count() == 5
    pruning = spark.read.format("delta").load(str(tmp_path / "full" / "pruning_cutoff"))
    assert pruning.agg({"records_before_cutoff": "sum"}).first()[0] > 0
    for name in tables:
        if name in SKIPPED:
            continue
        full = spark.read.format("delta").load(str(tmp_path / "full" / name))
        incremental = spark.read.format("delta").load(str(tmp_path / "inc" / name))
        print(f"comparing {name}")
        assert_df_equality(incremental, full, ignore_row_order=True, ignore_nullable=True)
    # Nothing new: a rerun changes nothing.
    again = run(whole, tmp_path / "inc", "incremental")
    assert again["inputs"]["share_state"]["rows_read"] == 0  # type: ignore[index]
    history = spark.read.format("delta").load(str(tmp_path / "inc" / "share_partition_history"))
    assert (
        history.count()
        == spark.read.format("delta")
        .load(str(tmp_path / "full" / "share_partition_history"))
        .count()
    )


def test_incremental_needs_delta_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = cli.main(
        [
            "replay",
            "--share-state",
            "x",
            "--output",
            str(tmp_path),
            "--mode",
            "incremental",
            "--output-format",
            "parquet",
        ]
    )
    assert code == 2
    assert "--mode incremental needs --output-format delta" in capsys.readouterr().err
