"""The `run_summary` table of an incremental run: the same typed columns as a full run's
(tests/spark/test_job.py checks those), with what only an incremental run has (its
commits, rows already processed or backfilled), the engine, timestamps as INT64 UTC; and a
run that finds nothing new writes nothing, not even the summary."""

from __future__ import annotations

import json
import logging
from datetime import UTC
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sharestate.io.checkpoint import read_checkpoint
from sharestate.job import main
from sharestate.sample.exports import SampleSpec
from tests.support.exports import growing_export

pytestmark = pytest.mark.spark


def _delta_version(table: Path) -> int:
    return max(int(p.stem) for p in (table / "_delta_log").glob("*.json"))


def _timestamp_column_types(table: Path, column: str) -> set[tuple[str, str]]:
    """(Arrow type, Parquet physical type) of `column` in every data file of `table`."""
    found = set()
    for file in table.glob("*.parquet"):
        schema = pq.read_schema(file)
        physical = pq.ParquetFile(file).schema.column(schema.get_field_index(column))
        found.add((str(schema.field(column).type), physical.physical_type))
    return found


def test_an_incremental_runs_summary_is_typed_and_nothing_new_writes_nothing(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    early, whole = growing_export(
        tmp_path / "export", SampleSpec(records=800, share_partitions=16, records_per_snapshot=4)
    )
    output = tmp_path / "out"
    main(spark, early.config(output))
    caplog.set_level(logging.INFO, logger="sharestate")
    caplog.clear()  # only this run's lines (an earlier test may have set the level)
    summary = main(spark, whole.config(output, mode="incremental"))
    assert summary["mode"] == "incremental"
    assert caplog.messages.count(f"engine: {summary['engine']['detail']}") == 1
    assert summary["engine"]["name"] == "jvm"

    (row,) = spark.read.format("delta").load(str(output / "run_summary")).collect()
    assert json.loads(row["summary_json"]) == summary
    assert json.loads((output / "run_summary.json").read_text()) == summary
    assert row["run_at"].astimezone(UTC).isoformat() == summary["run_at"]
    assert (row["mode"], row["engine"], row["delivery_count_limit"]) == ("incremental", "jvm", 5)
    share_state = summary["inputs"]["share_state"]
    typed = row["inputs"]["share_state"]
    for key in ("rows_read", "decoded", "already_processed", "backfilled", "export_read_whole"):
        assert typed[key] == share_state[key], key
    assert share_state["already_processed"] > 0 and typed["reconciled"] is True
    assert [c.asDict() for c in row["changes"]] == summary["changes"] and summary["changes"]
    assert row["poison_ranges"] == summary["poison_messages"]["ranges"]
    assert dict(row["findings_by_severity"]) == summary["findings"]["by_severity"]
    # Whichever writer committed it, run_at and written_at are INT64 microseconds, UTC.
    utc_micros = {("timestamp[us, tz=UTC]", "INT64")}
    assert _timestamp_column_types(output / "run_summary", "run_at") == utc_micros
    assert _timestamp_column_types(output / "_checkpoint", "written_at") <= utc_micros
    # The checkpoint names this run's summary with its tables.
    checkpoint = read_checkpoint(spark, str(output))
    assert checkpoint is not None
    assert checkpoint.table_versions["run_summary"] == _delta_version(output / "run_summary")

    versions = {t.name: _delta_version(t) for t in output.iterdir() if (t / "_delta_log").is_dir()}
    summary_file = (output / "run_summary.json").read_text()
    caplog.clear()
    again = main(spark, whole.config(output, mode="incremental"))
    assert again.get("nothing_new") is True
    after = {t.name: _delta_version(t) for t in output.iterdir() if (t / "_delta_log").is_dir()}
    assert after == versions, "nothing new: no commit on any table, run_summary included"
    assert (output / "run_summary.json").read_text() == summary_file
    assert not [m for m in caplog.messages if m.startswith("engine: ")], "no work, no preflight"
