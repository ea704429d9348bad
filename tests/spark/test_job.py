"""The job as users run it: console command, config file, output tables, spark-submit."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from datetime import UTC
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate import places
from sharestate.errors import InvalidConfigError
from sharestate.io.checkpoint import Extent, read_checkpoint
from sharestate.job import JobConfig, cli, compute, summarize
from sharestate.job import main as job_main
from sharestate.job.config import build_config, read_config_file
from sharestate.job.session import read_spark_defaults
from sharestate.places import arrow_frame
from sharestate.sample.exports import SampleSpec, write_sample
from tests.conftest import SESSION
from tests.support.paths import ROOT
from tests.support.tables import assert_same_rows

pytestmark = pytest.mark.spark

TABLES = (
    "share_state_records",
    "share_partition_state",
    "share_partition_history",
    "share_group_records",
    "quarantine",
    "delivery_counts",
    "share_partition_segments",
    "pruning_cutoff",
    "share_groups",
    "findings",
    "run_summary",
)
#: Written on every run, possibly empty.
MAYBE_EMPTY = ("poison_messages", "archived_messages")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sample")
    write_sample(root, SampleSpec(records=600))
    return root


# On Spark Connect: Delta output in test_connect.py, Parquet output here where serverless
# refuses caching and settings.
@pytest.mark.parametrize(
    "output_format", ["delta", pytest.param("parquet", marks=pytest.mark.serverless)]
)
def test_replay_writes_every_table(
    spark: SparkSession,
    sample: Path,
    tmp_path: Path,
    output_format: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    session_kind: str,
) -> None:
    caplog.set_level(logging.INFO, logger="sharestate")
    out = tmp_path / "out"
    code = cli.main(
        [
            "replay",
            "--share-state",
            str(sample / "share_state"),
            "--consumer-offsets",
            str(sample / "consumer_offsets"),
            "--output",
            str(out),
            "--output-format",
            output_format,
        ]
    )
    assert code == 0
    logged = caplog.messages
    for table in TABLES:
        rows = spark.read.format(output_format).load(str(out / table)).count()
        assert rows > 0, table
        if table != "run_summary":  # each stage's log line says what its table holds
            assert any(m.startswith(f"wrote {table}: {rows:,} rows in ") for m in logged), table
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["inputs"]["share_state"]["reconciled"]
    # The tests' classic session has the JVM jar: the run says it ran the JVM fast paths, in
    # the log (first), the summary and the printed summary; a Connect session has no JVM to
    # call, and the run says it ran the Python paths.
    if session_kind == "classic":
        assert summary["engine"]["name"] == "jvm"
        assert summary["engine"]["detail"].startswith("JVM fast paths (sharestate-jvm.jar)")
    else:
        assert summary["engine"]["name"] == "python"
        assert summary["engine"]["detail"].startswith("Python paths only")
    engine_line = logged.index(f"engine: {summary['engine']['detail']}")
    assert engine_line < min(i for i, m in enumerate(logged) if m.startswith("reading "))
    assert f"  engine: {summary['engine']['detail']}\n" in capsys.readouterr().out
    poison, archived = (
        spark.read.format(output_format).load(str(out / table)).count() for table in MAYBE_EMPTY
    )
    assert (poison, archived) == (
        summary["poison_messages"]["ranges"],
        summary["archived_messages"]["ranges"],
    )
    if session_kind == "serverless" and output_format == "parquet":
        # Serverless refuses the setting that makes Parquet timestamps INT64: the run goes on
        # with the session's INT96 and says so once.
        refusals = [
            m for m in logged if "refuses the setting spark.sql.parquet.outputTimestampType" in m
        ]
        assert len(refusals) == 1, logged
    else:
        _readers_see_utc_timestamps(out, output_format)
    _run_summary_is_typed(spark, out, output_format, summary)
    findings = spark.read.format(output_format).load(str(out / "findings")).count()
    assert findings == sum(summary["findings"]["by_severity"].values())
    decoded = spark.read.format(output_format).load(str(out / "share_state_records"))
    assert decoded.count() == summary["inputs"]["share_state"]["decoded"]
    batches_type = dict(decoded.dtypes)["state_batches"]
    assert batches_type == (
        "array<struct<first_offset:bigint,last_offset:bigint,delivery_state:int,delivery_count:int>>"
    )
    if output_format == "delta":
        per_record = {"source_partition", "source_offset", "source_timestamp"}
        assert _columns_with_stats(out / "share_state_records") == per_record
        assert _columns_with_stats(out / "share_group_records") == per_record
        assert _columns_with_stats(out / "quarantine") == {"source", *per_record}
        # Small tables keep Delta's default: the first 32 columns.
        assert {"group_id", "topic_id", "partition"} <= _columns_with_stats(
            out / "share_partition_state"
        )


def _data_files(table: Path) -> list[Path]:
    return sorted(p for p in table.glob("*.parquet"))


def _readers_see_utc_timestamps(out: Path, output_format: str) -> None:
    """Timestamps are INT64 microseconds adjusted to UTC in either format: pyarrow, pandas
    and DuckDB read timestamp[us, UTC] (legacy INT96 came without a time zone)."""
    import duckdb

    for table, column in (
        ("share_state_records", "source_timestamp"),
        ("run_summary", "run_at"),
        ("_checkpoint", "written_at"),
    ):
        files = _data_files(out / table)
        assert files, table
        schema = pq.read_schema(files[0])
        assert str(schema.field(column).type) == "timestamp[us, tz=UTC]", (table, column)
        parquet_type = pq.ParquetFile(files[0]).schema.column(schema.get_field_index(column))
        assert parquet_type.physical_type == "INT64", (table, column)
        if output_format == "parquet":  # a Delta table's folder is read through its log
            frame = pd.read_parquet(out / table, columns=[column])
            assert str(frame[column].dtype) == "datetime64[us, UTC]", (table, column)
            described = duckdb.sql(
                f"DESCRIBE SELECT {column} FROM read_parquet('{out / table}/*.parquet')"
            ).fetchall()
            assert described[0][1] == "TIMESTAMP WITH TIME ZONE", (table, described)


def _run_summary_is_typed(
    spark: SparkSession, out: Path, output_format: str, summary: dict[str, Any]
) -> None:
    """The run_summary table: typed columns with the summary's numbers, and the JSON."""
    table = spark.read.format(output_format).load(str(out / "run_summary"))
    types = dict(table.dtypes)
    assert types["run_at"] == "timestamp" and types["poison_ranges"] == "bigint"
    (row,) = table.collect()
    assert json.loads(row["summary_json"]) == summary
    assert row["run_at"].astimezone(UTC).isoformat() == summary["run_at"]
    share_state = summary["inputs"]["share_state"]
    assert row["inputs"]["share_state"]["rows_read"] == share_state["rows_read"]
    assert row["inputs"]["share_state"]["reconciled"] is True
    assert row["inputs"]["share_state"]["backfilled"] is None  # incremental runs only
    assert row["engine"] == summary["engine"]["name"] and row["mode"] == "full"
    assert row["delivery_count_limit"] == summary["delivery_count_limit"] == 5
    assert row["poison_ranges"] == summary["poison_messages"]["ranges"]
    assert dict(row["findings_by_severity"]) == summary["findings"]["by_severity"]
    assert row["share_groups"] == summary["share_groups"]["groups"]
    assert row["total_lag"] is None and row["changes"] is None  # no --end-offsets; full run


def _as_of_values(sample: Path) -> list[str | None]:
    """No --as-of, an offset and a time that each cut the sample's state log part-way."""
    table = pq.read_table(sample / "share_state", columns=["offset", "timestamp"])
    offsets = sorted(table.column("offset").to_pylist())
    times = sorted(table.column("timestamp").to_pylist())
    middle_time = times[len(times) // 2].replace(tzinfo=UTC)
    return [None, str(offsets[len(offsets) // 2]), middle_time.isoformat()]


# --as-of by offset and by time: `make test-slow` (the plain run stays in `make test`); on a
# Connect session the run by offset (the plain one is test_connect.py's).
@pytest.mark.parametrize(
    "as_of_index",
    [
        0,
        pytest.param(1, marks=pytest.mark.slow if SESSION == "classic" else pytest.mark.connect),
        pytest.param(2, marks=pytest.mark.slow),
    ],
)
def test_written_tables_equal_computed_ones(
    spark: SparkSession, sample: Path, tmp_path: Path, as_of_index: int
) -> None:
    """The job audits the per-record tables as it wrote them (`audit_written`), a notebook's
    `compute` the DataFrames it decoded and replayed: the same tables, --as-of or not."""
    config = JobConfig(
        share_state=str(sample / "share_state"),
        consumer_offsets=str(sample / "consumer_offsets"),
        output=str(tmp_path / "out"),
        as_of=_as_of_values(sample)[as_of_index],
    )
    summary = job_main(spark, config)
    computed = compute(spark, config)
    counted = summarize(computed)  # a notebook's counts are the run's
    assert {key: summary[key] for key in counted} == counted
    replayed, records = (
        spark.read.format("delta").load(str(tmp_path / "out" / name)).count()
        for name in ("share_partition_history", "share_state_records")
    )
    assert 0 < replayed < records if config.as_of else replayed == records
    try:
        for name, rows in computed.tables().items():
            df = rows if isinstance(rows, DataFrame) else arrow_frame(spark, rows)
            written = spark.read.format("delta").load(str(tmp_path / "out" / name))
            assert_df_equality(written, df, ignore_row_order=True, ignore_nullable=True)
    finally:
        computed.unpersist()


def test_a_run_on_the_driver_writes_the_tables_of_a_run_in_spark(
    spark: SparkSession, sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full run over few rows (`places.DRIVER_ROWS`) works on the driver: its audits read
    the written tables as Arrow, every table but the two per-record ones comes there and is
    committed by delta-rs, and its summary is counted there. A run over more works in
    Spark's tasks (the audits' per-key steps, the per-record tables' writes): the same
    tables and summary (the lag table too: end offsets for half the topic-partitions)."""
    outputs = {"small": tmp_path / "small", "spark": tmp_path / "spark"}
    ends = tmp_path / "end_offsets"
    ends.mkdir()
    state = compute(spark, JobConfig(share_state=str(sample / "share_state")))
    keys = sorted({(r.topic_id, r.partition) for r in state.share_partition_state.collect()})
    state.unpersist()
    pq.write_table(
        pa.table(
            {
                "topic_id": [topic for topic, _ in keys[::2]],
                "partition": pa.array([partition for _, partition in keys[::2]], pa.int32()),
                "end_offset": [5_000] * len(keys[::2]),
            }
        ),
        ends / "part-0.parquet",
    )
    summaries = {}
    for kind, output in outputs.items():
        if kind == "spark":
            monkeypatch.setattr(places, "DRIVER_ROWS", -1)
        config = JobConfig(
            share_state=str(sample / "share_state"),
            consumer_offsets=str(sample / "consumer_offsets"),
            end_offsets=str(ends),
            output=str(output),
        )
        summary = job_main(spark, config)
        assert summary["worked_on"] == ("driver" if kind == "small" else "spark")
        summaries[kind] = {k: v for k, v in summary.items() if k not in ("run_at", "worked_on")}
    assert summaries["small"] == summaries["spark"]
    assert summaries["small"]["lag"]["share_partitions"] > 0
    for table in (*TABLES, *MAYBE_EMPTY, "share_partition_lag"):
        if table != "run_summary":
            assert_same_rows(outputs["small"] / table, outputs["spark"] / table)
    writers = {
        kind: {
            table: DeltaTable(str(output / table)).history(1)[0].get("engineInfo", "")
            for table in ("share_state_records", "poison_messages", "quarantine")
        }
        for kind, output in outputs.items()
    }
    assert writers["small"]["share_state_records"].startswith("Apache-Spark")
    assert all(
        writers["small"][t].startswith("delta-rs") for t in ("poison_messages", "quarantine")
    )
    # In Spark, the tables of a row per record (and the quarantine) are Spark's writes; the
    # audit tables come to the driver, where they are computed, and are committed there.
    assert writers["spark"]["share_state_records"].startswith("Apache-Spark")
    assert writers["spark"]["quarantine"].startswith("Apache-Spark")
    assert writers["spark"]["poison_messages"].startswith("delta-rs")
    assert DeltaTable(str(outputs["small"] / "poison_messages")).metadata().partition_columns == [
        "settled"
    ]
    # The checkpoint's extents, found on the driver (from pruning_cutoff, and the group
    # records with the quarantine), are those Spark finds from the written tables.
    checkpoint = read_checkpoint(spark, str(outputs["small"]))
    assert checkpoint is not None
    written = {
        name: spark.read.format("delta").load(str(outputs["small"] / name))
        for name in ("share_state_records", "share_group_records", "quarantine")
    }
    for source, records in (
        ("share_state", "share_state_records"),
        ("consumer_offsets", "share_group_records"),
    ):
        # The exported positions, counted here in Spark SQL: the records' and the
        # quarantined rows' of that input (not those of another topic).
        quarantined = written["quarantine"].filter(
            (F.col("source") == source) & (F.col("reason_kind") != "wrong topic")
        )
        positions = (
            written[records]
            .select("source_partition", "source_offset")
            .unionByName(quarantined.select("source_partition", "source_offset"))
        )
        found = {
            row["source_partition"]: Extent(row["first"], row["last"], row["rows"])
            for row in positions.groupBy("source_partition")
            .agg(
                F.min("source_offset").alias("first"),
                F.max("source_offset").alias("last"),
                F.count(F.lit(1)).alias("rows"),
            )
            .collect()
        }
        assert found and checkpoint.extents[source] == found


@pytest.mark.slow  # the decode's own test of the same (tests/spark/test_spark_decode.py) stays
def test_duplicated_and_shuffled_exports_give_the_same_tables(
    spark: SparkSession, sample: Path, tmp_path: Path
) -> None:
    """Exports that repeat rows and list them out of order (at-least-once export jobs) give
    the job's every table as the clean exports do; only the run summary counts the
    duplicates."""
    messy = {}
    for name in ("share_state", "consumer_offsets"):
        clean = spark.read.parquet(str(sample / name))
        messy[name] = str(tmp_path / "messy" / name)
        repeated = clean.union(clean.sample(fraction=0.5, seed=3)).orderBy(F.rand(5))
        repeated.repartition(3).write.parquet(messy[name])
    outputs = {"clean": tmp_path / "clean-out", "messy": tmp_path / "messy-out"}
    duplicates = {}
    for kind, inputs in (("clean", sample), ("messy", tmp_path / "messy")):
        config = JobConfig(
            share_state=str(inputs / "share_state"),
            consumer_offsets=str(inputs / "consumer_offsets"),
            output=str(outputs[kind]),
        )
        summary = job_main(spark, config)
        duplicates[kind] = [summary["inputs"][name]["duplicates_dropped"] for name in messy]
    # (The sample repeats one share-state row already.)
    assert all(m > c for m, c in zip(duplicates["messy"], duplicates["clean"], strict=True))
    for table in (*TABLES, *MAYBE_EMPTY):
        if table == "run_summary":
            continue
        clean, repeated = (
            spark.read.format("delta").load(str(outputs[kind] / table)) for kind in outputs
        )
        assert_df_equality(repeated, clean, ignore_row_order=True)


def _table_rows(spark: SparkSession, output: Path, output_format: str) -> dict[str, list[str]]:
    """Every table of an output (the checkpoint too), as its rows' texts in a fixed order."""
    return {
        table: sorted(
            repr(row)
            for row in spark.read.format(output_format).load(str(output / table)).collect()
        )
        for table in (*TABLES, *MAYBE_EMPTY, "_checkpoint")
    }


@pytest.mark.parametrize(
    "output_format",
    [
        # On the Connect server in `make test` (the same put-back: the local output is
        # committed by delta-rs there too); on the classic session in `make test-slow`.
        pytest.param(
            "delta", marks=pytest.mark.slow if SESSION == "classic" else pytest.mark.connect
        ),
        pytest.param("parquet", marks=pytest.mark.slow),
    ],
)
def test_a_failed_run_leaves_the_earlier_output_and_a_rerun_writes_it_again(
    spark: SparkSession,
    sample: Path,
    tmp_path: Path,
    output_format: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run that fails after writing some tables puts them back: the output is the earlier
    run's, every table of it. Run again on the same input, the job writes the same tables."""
    output = tmp_path / "out"
    config = JobConfig(
        share_state=str(sample / "share_state"),
        consumer_offsets=str(sample / "consumer_offsets"),
        output=str(output),
        output_format=output_format,
    )
    job_main(spark, config)
    before = _table_rows(spark, output, output_format)

    def failing_audits(*args: object, **kwargs: object) -> None:
        raise RuntimeError("audits failed (injected)")

    monkeypatch.setattr("sharestate.job.run.audit_written", failing_audits)
    caplog.set_level(logging.WARNING, logger="sharestate")
    # Another state (--as-of half-way), so the tables it writes before failing differ.
    with pytest.raises(RuntimeError, match="injected"):
        job_main(spark, JobConfig(**{**config.__dict__, "as_of": _as_of_values(sample)[1]}))
    put_back = [r.getMessage() for r in caplog.records if "putting back" in r.getMessage()]
    assert put_back == ["the run failed: putting back the 5 table(s) it had written"]
    assert _table_rows(spark, output, output_format) == before
    assert not [p.name for p in output.iterdir() if ".sharestate-" in p.name]
    monkeypatch.undo()

    job_main(spark, config)
    again = _table_rows(spark, output, output_format)
    # The summary and the checkpoint say when they were written (the checkpoint also which
    # Delta versions, and putting back made versions); the offsets reached are the same.
    assert again.pop("run_summary") != before.pop("run_summary")
    assert [_checkpointed(row) for row in again.pop("_checkpoint")] == [
        _checkpointed(row) for row in before.pop("_checkpoint")
    ]
    assert again == before


def _checkpointed(row_text: str) -> str:
    """A checkpoint row's text up to the offset it reached."""
    return row_text.split(", state_version=")[0]


def _columns_with_stats(table: Path) -> set[str]:
    """The columns of the files' statistics in a Delta table's log (each file has the same)."""
    columns: set[str] = set()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            added = json.loads(line).get("add")
            if added and added.get("stats"):
                stats = json.loads(added["stats"])
                columns |= set(stats["nullCount"]) | set(stats.get("minValues", {}))
    return columns


def test_option_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert (
        cli.main(
            ["replay", "--share-state", "x", "--output", str(tmp_path), "--kafka-version", "3.9"]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "share groups (KIP-932) first shipped in Kafka 4.0" in err
    assert cli.main(["replay", "--share-state", "x"]) == 2
    assert "--output is required" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["replay", "--output-format", "csv"])
    assert exit_info.value.code == 2


def test_missing_input_is_one_line_and_exit_2(
    spark: SparkSession, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = cli.main(
        ["replay", "--share-state", str(tmp_path / "missing"), "--output", str(tmp_path / "o")]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sharestate: error: --share-state") or "no such file" in err
    assert "\n" not in err


def test_as_of_takes_an_offset_or_a_timestamp() -> None:
    assert JobConfig(share_state="x", as_of="1234").as_of_offset == 1234
    moment = JobConfig(share_state="x", as_of="2026-11-21T14:05:00").as_of_timestamp
    assert moment is not None and moment.isoformat() == "2026-11-21T14:05:00+00:00"
    with pytest.raises(InvalidConfigError, match="--as-of 'yesterday'"):
        JobConfig(share_state="x", as_of="yesterday")


def test_config_file_with_command_line_override(tmp_path: Path) -> None:
    example = read_config_file(ROOT / "conf" / "sharestate.example.toml")
    config = build_config(example, {"output_format": "parquet", "delivery_count_limit": None})
    assert (config.output_format, config.delivery_count_limit) == ("parquet", 5)
    bad = tmp_path / "bad.toml"
    bad.write_text('share_state = "x"\nshare_stat = "typo"\n')
    with pytest.raises(InvalidConfigError, match="unknown key\\(s\\) share_stat"):
        read_config_file(bad)


def test_the_local_session_has_both_files_settings(spark: SparkSession) -> None:
    job = read_spark_defaults(ROOT / "conf" / "spark-job.conf")
    for key in ("spark.databricks.delta.snapshotPartitions", "spark.sql.adaptive.enabled"):
        assert spark.conf.get(key) == job[key]
    assert spark.sparkContext.getConf().get("spark.ui.showConsoleProgress") == "false"


def test_spark_submit_runs_the_job_script(sample: Path, tmp_path: Path) -> None:
    """The spark-submit entry with nothing but jars and a master: it sets Delta's session
    settings itself, logs the job's stages as the console command does, and draws no
    progress bar."""
    spark_submit = Path(sys.executable).parent / "spark-submit"
    jars = ",".join(str(p) for p in sorted((ROOT / ".jars").glob("*.jar")))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    out = tmp_path / "submitted"
    result = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            "--jars",
            jars,
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            str(ROOT / "jobs" / "replay_share_state.py"),
            "--share-state",
            str(sample / "share_state"),
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-3000:]
    assert "sharestate run summary" in result.stdout
    assert (out / "share_state_records" / "_delta_log").is_dir()
    assert " sharestate reading and decoding " in console
    assert re.search(r" sharestate wrote share_state_records: [\d,]+ rows in ", console)
    assert "[Stage " not in console, "no progress bar"
    assert "already exists on this machine" not in console  # BlockManager, JVM tee hand-over
    assert "Truncated the string representation" not in console
    assert " INFO " not in console.split("Setting Spark log level")[-1], "Spark's log at WARN"
    bad = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            str(ROOT / "jobs" / "replay_share_state.py"),
            "--share-state",
            str(sample / "share_state"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert bad.returncode == 2
    # spark-submit's PythonRunner merges the script's stderr into its stdout.
    assert "--output is required" in bad.stdout + bad.stderr
