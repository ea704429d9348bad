"""Incremental runs read what the inputs' streams deliver (`sharestate.io.streams`): Spark's
Delta source over a Delta export (compaction costs nothing; a commit that deletes rows
makes a full run), its file source over a Parquet folder (an export moved to another path
is read once whole and changes nothing); `sharestate follow` runs them round after round."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from sharestate.job.config import JobConfig
from sharestate.job.run import main
from sharestate.sample.exports import SampleSpec, generate
from tests.support.cli import start_sharestate
from tests.support.following import commits
from tests.support.tables import assert_same_tables, delta_tables


def _run(spark: SparkSession, share_state: Path, output: Path, mode: str) -> dict[str, Any]:
    return main(spark, JobConfig(share_state=str(share_state), output=str(output), mode=mode))


def _versions(output: Path) -> dict[str, int]:
    return {name: DeltaTable(str(output / name)).version() for name in delta_tables(output)}


def _state(records: int, seed: int) -> tuple[pa.Table, pa.Table]:
    """A sample export split in two: what the first run finds, and what arrives after."""
    state, _ = generate(SampleSpec(records=records, share_partitions=24, seed=seed))
    # Each partition's offsets below the cut first, the rest later: nothing arrives below
    # the checkpoint.
    offsets = sorted(state.column("offset").to_pylist())
    first = pc.less(state.column("offset"), offsets[len(offsets) * 2 // 3])
    return state.filter(first), state.filter(pc.invert(first))


@pytest.mark.spark
def test_a_delta_export_compacted_and_then_changed(spark: SparkSession, tmp_path: Path) -> None:
    export, output = tmp_path / "export", tmp_path / "out"
    early, late = _state(900, seed=5)
    for part in range(2):  # two commits, as an exporter appends
        write_deltalake(str(export), early.slice(part * early.num_rows // 2), mode="append")
    assert _run(spark, export, output, "incremental")["mode"] == "full"

    # New rows and a compaction (dataChange=false): the rows are applied once.
    write_deltalake(str(export), late, mode="append")
    DeltaTable(str(export)).optimize.compact()
    summary = _run(spark, export, output, "incremental")
    assert summary["mode"] == "incremental", summary
    assert summary["inputs"]["share_state"]["already_processed"] == 0
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")

    # A compaction alone delivers nothing: no table changes, and the next run knows it
    # before it starts a stream (the checkpoint took the export's new version).
    DeltaTable(str(export)).optimize.compact(target_size=1)
    before = _versions(output)
    assert _run(spark, export, output, "incremental").get("nothing_new") is True
    assert _versions(output) == before

    # A commit that deletes rows is a change the stream cannot apply: a full run, saying so.
    DeltaTable(str(export)).delete("partition = 0")
    summary = _run(spark, export, output, "incremental")
    assert summary["mode"] == "full"
    assert "DELTA_SOURCE" in summary["full_run_because"], summary["full_run_because"]
    assert "changed, not only grew" in summary["full_run_because"]
    _run(spark, export, tmp_path / "full-after", "full")
    assert_same_tables(output, tmp_path / "full-after")


@pytest.mark.spark
def test_a_moved_parquet_export_is_read_once_whole(spark: SparkSession, tmp_path: Path) -> None:
    export, output = tmp_path / "export", tmp_path / "out"
    early, late = _state(600, seed=9)
    export.mkdir()
    pq.write_table(early, export / "part-0.parquet")
    assert _run(spark, export, output, "incremental")["mode"] == "full"

    moved = tmp_path / "moved"
    shutil.copytree(export, moved)
    summary = _run(spark, moved, output, "incremental")
    inputs = summary["inputs"]["share_state"]
    assert summary["mode"] == "incremental", summary
    assert inputs["export_read_whole"] and inputs["already_processed"] == early.num_rows
    assert inputs["decoded"] == inputs["quarantined"] == 0

    # After the move the new stream goes on: new files only.
    pq.write_table(late, moved / "part-1.parquet")
    summary = _run(spark, moved, output, "incremental")
    inputs = summary["inputs"]["share_state"]
    assert not inputs["export_read_whole"] and inputs["already_processed"] == 0
    assert summary["mode"] == "incremental"
    _run(spark, moved, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")


def _wait_for(condition: Callable[[], bool], child: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 240
    while not condition():
        if child.poll() is not None:
            pytest.fail(f"follow ended early ({child.returncode}): {child.communicate()[0]}")
        if time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"no {what} in 240 s: {child.communicate()[0]}")
        time.sleep(0.5)


@pytest.mark.spark
def test_follow_applies_what_arrives_and_stops_between_rounds_on_sigterm(
    spark: SparkSession, tmp_path: Path
) -> None:
    export, output = tmp_path / "export", tmp_path / "out"
    early, late = _state(600, seed=13)
    export.mkdir()
    pq.write_table(early, export / "part-0.parquet")
    child = start_sharestate(
        "follow", "--share-state", str(export), "--output", str(output), "--every", "1s"
    )
    _wait_for(lambda: commits(output / "run_summary") >= 1, child, "first round")
    pq.write_table(late, export / "part-1.parquet")
    _wait_for(
        lambda: (
            DeltaTable(str(output / "run_summary")).to_pyarrow_table()["mode"][0].as_py()
            == "incremental"
        ),
        child,
        "incremental round",
    )
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0, out
    assert "stopping once this round ends" in out
    assert not list(output.glob("*/_delta_log/*.tmp")), "a commit was left half-written"
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")
