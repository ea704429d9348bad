"""The job on a Spark Connect session (SHARESTATE_SESSION=connect or serverless, `make test`).

What a Connect session changes, checked on a local Connect server started by the tests (a
process of its own, Spark's default settings, no JVM jar):

* the tables written over Connect are a classic session's: the same rows and the same Delta
  schema and protocol as a classic run of the console command (a process of its own, with
  the JVM jar), and no collated string type, so delta-rs, polars and DuckDB read them;
* the console command and `jobs/replay_share_state.py` run against the server, named by
  `--remote` and by `SPARK_REMOTE`; `sharestate follow --once` rounds over an export that
  grows between them (the inputs' streams run on the server);
* an output only the server reaches (what a remote server's local-looking paths are, as a
  Databricks volume seen from a laptop): a full and an incremental run through Spark alone
  (Delta lock, Spark's MERGE), and Parquet output refused before any work;
* on a session that refuses caching and settings (SHARESTATE_SESSION=serverless): a full
  run and an incremental chain end with a classic full run's tables, and the log says once
  what the session refused.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from sharestate.backend import LOCAL_FILES_VARIABLE, backend
from sharestate.job import main as job_main
from sharestate.sample.exports import SampleSpec
from tests.support.exports import Export, growing_export
from tests.support.paths import ROOT
from tests.support.tables import assert_same_rows

pytestmark = pytest.mark.spark

#: Written by every run with its own time: compared apart.
RUN_TABLES = {"run_summary", "_checkpoint"}


def _remote() -> str:
    url = os.environ.get("SHARESTATE_TEST_REMOTE")
    if not url:
        pytest.skip("needs SHARESTATE_SESSION=connect or serverless (a Spark Connect server)")
    return url


def _tables(output: Path) -> list[str]:
    return sorted(
        p.name
        for p in output.iterdir()
        if (p / "_delta_log").is_dir()
        and p.name not in RUN_TABLES
        and not p.name.startswith("_run")
    )


def _assert_same_tables(got: Path, want: Path) -> None:
    assert _tables(got) == _tables(want)
    for name in _tables(want):
        assert_same_rows(got / name, want / name)


def _log_actions(table: Path, kind: str) -> list[dict[str, Any]]:
    """Every `kind` action (metaData, protocol) of a Delta table's commits, in order."""
    found = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if kind in action:
                found.append(action[kind])
    return found


def _schema_and_protocol(table: Path) -> tuple[Any, Any]:
    (schema, *_) = [json.loads(m["schemaString"]) for m in _log_actions(table, "metaData")][-1:]
    return schema, _log_actions(table, "protocol")[-1]


def _sharestate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    # A process of its own chooses its session itself (the tests' process is a Connect
    # client: PySpark marks it so in the environment).
    environment.pop("SPARK_CONNECT_MODE_ENABLED", None)
    environment.pop("SPARK_REMOTE", None)
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**environment, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Export, Export]:
    return growing_export(tmp_path_factory.mktemp("connect"), SampleSpec(records=600))


@pytest.fixture(scope="module")
def classic_output(
    exports: tuple[Export, Export], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The whole export's tables as the console command writes them on its own classic
    session (with the JVM jar)."""
    _remote()
    whole = exports[1]
    output = tmp_path_factory.mktemp("classic") / "out"
    done = _sharestate(
        "-m",
        "sharestate",
        "replay",
        "--share-state",
        whole.share_state,
        "--consumer-offsets",
        whole.consumer_offsets,
        "--output",
        str(output),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((output / "run_summary.json").read_text())["engine"]["name"] == "jvm"
    return output


@pytest.mark.connect
def test_tables_written_over_connect_are_a_classic_sessions(
    spark: SparkSession, exports: tuple[Export, Export], classic_output: Path, tmp_path: Path
) -> None:
    assert backend(spark).connect
    output = tmp_path / "out"
    summary = job_main(spark, exports[1].config(output))
    assert summary["engine"]["name"] == "python"
    _assert_same_tables(output, classic_output)
    for name in [*_tables(output), *RUN_TABLES]:
        log = "".join(p.read_text() for p in (output / name / "_delta_log").glob("*.json"))
        assert "collate" not in log, name
        assert _schema_and_protocol(output / name) == _schema_and_protocol(classic_output / name), (
            name
        )
    # Readers without collation support read every table: delta-rs, polars (delta-rs
    # underneath) and DuckDB (the table's data files, as delta-rs lists them).
    for name in _tables(output):
        table = DeltaTable(str(output / name))
        rows = table.to_pyarrow_table().num_rows
        assert pl.read_delta(str(output / name)).height == rows, name
        files = [str(output / name / f) for f in table.file_uris()] if rows else []
        if files:
            counted = duckdb.sql(f"SELECT count(*) FROM read_parquet({files!r})").fetchall()
            assert counted == [(rows,)], name


@pytest.mark.connect
def test_the_console_command_and_the_job_script_run_on_a_connect_server(
    exports: tuple[Export, Export], classic_output: Path, tmp_path: Path
) -> None:
    url = _remote()
    whole = exports[1]
    inputs = ["--share-state", whole.share_state, "--consumer-offsets", whole.consumer_offsets]
    by_option = tmp_path / "by-option"
    done = _sharestate(
        "-m", "sharestate", "replay", *inputs, "--output", str(by_option), "--remote", url
    )
    assert done.returncode == 0, done.stderr[-3000:]
    by_variable = tmp_path / "by-variable"
    done = _sharestate(
        str(ROOT / "jobs" / "replay_share_state.py"),
        *inputs,
        "--output",
        str(by_variable),
        env={"SPARK_REMOTE": url},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for output in (by_option, by_variable):
        summary = json.loads((output / "run_summary.json").read_text())
        assert summary["engine"]["name"] == "python", output.name
        _assert_same_tables(output, classic_output)


@pytest.mark.connect
def test_follow_rounds_run_on_a_connect_server(
    spark: SparkSession, exports: tuple[Export, Export], classic_output: Path, tmp_path: Path
) -> None:
    """Two `follow --once` rounds on the server, the export grown between them: a full
    round that starts the streams, then an incremental one they deliver the new files to.
    (`spark` starts the server.)"""
    url = _remote()
    early, whole = exports
    state, offsets, output = (
        tmp_path / "share_state",
        tmp_path / "consumer_offsets",
        tmp_path / "out",
    )
    shutil.copytree(early.share_state, state)
    shutil.copytree(early.consumer_offsets, offsets)

    def round_() -> dict[str, Any]:
        done = _sharestate(
            "-m",
            "sharestate",
            "follow",
            "--once",
            "--share-state",
            str(state),
            "--consumer-offsets",
            str(offsets),
            "--output",
            str(output),
            "--remote",
            url,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        summary: dict[str, Any] = json.loads((output / "run_summary.json").read_text())
        return summary

    assert round_()["mode"] == "full"
    for grown, folder in ((whole.share_state, state), (whole.consumer_offsets, offsets)):
        shutil.copy(Path(grown) / "part-0.parquet", folder / "part-1.parquet")
    summary = round_()
    assert summary["mode"] == "incremental", summary
    inputs = summary["inputs"]["share_state"]
    assert not inputs["export_read_whole"] and inputs["already_processed"] > 0, inputs
    _assert_same_tables(output, classic_output)


@pytest.mark.connect
def test_an_output_only_the_server_reaches_is_written_through_spark(
    spark: SparkSession,
    exports: tuple[Export, Export],
    classic_output: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(LOCAL_FILES_VARIABLE, "0")
    assert not backend(spark).local_files
    early, whole = exports
    output = tmp_path / "out"
    caplog.set_level(logging.INFO, logger="sharestate")
    assert job_main(spark, early.config(output, mode="incremental"))["mode"] == "full"
    summary = job_main(spark, whole.config(output, mode="incremental"))
    assert summary["mode"] == "incremental"
    assert {change["writer"] for change in summary["changes"]} == {"spark"}
    # The lock was a Delta table's row, released after each run.
    assert DeltaTable(str(output / "_run_lock")).to_pyarrow_table().num_rows == 0
    assert not (output / "_lock").exists()
    _assert_same_tables(output, classic_output)

    url = _remote()
    done = _sharestate(
        "-m",
        "sharestate",
        "replay",
        "--share-state",
        whole.share_state,
        "--output",
        str(tmp_path / "parquet-out"),
        "--output-format",
        "parquet",
        "--remote",
        url,
        env={LOCAL_FILES_VARIABLE: "0"},
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "--output-format parquet: this Spark Connect session cannot rename files" in line
    assert not (tmp_path / "parquet-out").exists()


@pytest.mark.serverless
def test_refused_caching_and_settings_do_not_fail_a_run(
    spark: SparkSession,
    exports: tuple[Export, Export],
    classic_output: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.support.serverless import REFUSED

    if os.environ.get("SHARESTATE_SESSION") != "serverless":
        pytest.skip("needs SHARESTATE_SESSION=serverless")
    # What the session cannot do is said once a process: this test's runs say it anew.
    monkeypatch.setattr("sharestate.backend._said", set())
    early, whole = exports
    caplog.set_level(logging.INFO, logger="sharestate")
    full = tmp_path / "full"
    job_main(spark, whole.config(full))
    _assert_same_tables(full, classic_output)
    chain = tmp_path / "chain"
    assert job_main(spark, early.config(chain, mode="incremental"))["mode"] == "full"
    assert job_main(spark, whole.config(chain, mode="incremental"))["mode"] == "incremental"
    _assert_same_tables(chain, classic_output)
    assert REFUSED.get("persist", 0) > 0 and REFUSED.get("conf.set", 0) > 0
    said = [m for m in caplog.messages if "refuses" in m]
    assert any(m.startswith("the session refuses to cache results") for m in said)
    assert len(said) == len(set(said)), "each refusal is said once"


@pytest.mark.connect
def test_arrow_tables_from_connect_keep_their_rows(spark: SparkSession) -> None:
    """An empty Arrow table becomes an empty DataFrame with its columns on either session."""
    from sharestate.io.store import arrow_frame

    empty = pa.table({"a": pa.array([], pa.int64()), "b": pa.array([], pa.string())})
    frame = arrow_frame(spark, empty)
    assert frame.columns == ["a", "b"] and frame.count() == 0
