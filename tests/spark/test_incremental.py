"""`--mode incremental`: runs over an export that grows end with the tables one full run over
the whole export writes, whatever the points the export was cut at, with rows that arrive
late (backfill), and after a killed run; a run with nothing new writes nothing; two runs at
once on one output do not mix."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharestate.audits import groups_arrow
from sharestate.audits.findings import PER_SHARE_PARTITION_RULES, FindingRule
from sharestate.decode.tables import decode_consumer_offsets_table, decode_share_state_table
from sharestate.io import store as store_module
from sharestate.io.lock import OutputLockedError, output_lock
from sharestate.job import cli, driver_increment
from sharestate.job import increment as increment_module
from sharestate.job import incremental as incremental_module
from sharestate.job.config import JobConfig
from sharestate.job.run import main
from sharestate.kafka.records import decode_share_state
from sharestate.sample.exports import SampleSpec, generate
from tests.support.cli import run_sharestate
from tests.support.paths import ROOT
from tests.support.tables import assert_same_tables, delta_tables


def _write(folder: Path, name: str, table: pa.Table) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / name)


def _record_kinds(state: pa.Table) -> list[str]:
    kinds = []
    for key, value in zip(
        state.column("key").to_pylist(), state.column("value").to_pylist(), strict=True
    ):
        try:
            kinds.append(decode_share_state(key, value)["record_type"])
        except Exception:
            kinds.append("damaged")
    return kinds


def _cuts(state: pa.Table, runs: int, rng: random.Random) -> dict[int, list[int]]:
    """Per state-topic partition, `runs - 1` offsets the export is cut at: some just before
    a tombstone or a snapshot (a re-initialization), the rest anywhere (inside segments)."""
    partitions = state.column("partition").to_pylist()
    offsets = state.column("offset").to_pylist()
    kinds = _record_kinds(state)
    by_partition: dict[int, list[int]] = {}
    starts: dict[int, list[int]] = {}
    for partition, offset, kind in zip(partitions, offsets, kinds, strict=True):
        by_partition.setdefault(partition, []).append(offset)
        if kind in ("tombstone", "snapshot"):
            starts.setdefault(partition, []).append(offset)
    cuts: dict[int, list[int]] = {}
    for partition, seen in by_partition.items():
        low, high = min(seen), max(seen) + 1
        chosen = set(rng.sample(starts.get(partition, []), min(2, len(starts.get(partition, [])))))
        while len(chosen) < runs - 1 and high - low > runs:
            chosen.add(rng.randrange(low + 1, high))
        cuts[partition] = sorted(chosen)[: runs - 1]
    return cuts


def _chunk(table: pa.Table, cuts: dict[int, list[int]], run: int) -> pa.Array:
    """Rows of `table` in run `run`'s window (between the run's cut and the next)."""
    partitions = table.column("partition").to_pylist()
    offsets = table.column("offset").to_pylist()
    keep = []
    for partition, offset in zip(partitions, offsets, strict=True):
        bounds = [float("-inf"), *cuts.get(partition, []), float("inf")]
        keep.append(bounds[run] <= offset < bounds[run + 1] if run + 1 < len(bounds) else False)
    return pa.array(keep)


def _positions(table: pa.Table) -> list[tuple[int, int]]:
    return list(
        zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
    )


def _plan(state: pa.Table, offsets: pa.Table, runs: int, seed: int) -> list[dict[str, pa.Table]]:
    """The files each run finds new in the exports. Rows of the busiest partition are held
    back from the first run and arrive later, below the checkpoint: the partition's first
    rows (a late first file) and a range from inside the first window (a gap filled)."""
    rng = random.Random(seed)
    cuts, offset_cuts = _cuts(state, runs, rng), _cuts(offsets, runs, rng)
    busiest = Counter(state.column("partition").to_pylist()).most_common(1)[0][0]
    first_window = sorted(o for p, o in _positions(state) if p == busiest and o < cuts[busiest][0])
    held = set(first_window[:2]) | set(first_window[len(first_window) // 2 :][:3])
    is_held = pa.array([p == busiest and o in held for p, o in _positions(state)])
    plan: list[dict[str, pa.Table]] = []
    for run in range(runs):
        files = {"s": state.filter(pc.and_(_chunk(state, cuts, run), pc.invert(is_held)))}
        if run % 2 == 0:  # the group metadata arrives in fewer, larger files
            window = _chunk(offsets, offset_cuts, run), _chunk(offsets, offset_cuts, run + 1)
            files["o"] = offsets.filter(pc.or_(*window))
        if run == runs - 3:
            files["s-late"] = state.filter(is_held)
        plan.append(files)
    return plan


def _run(spark: SparkSession, export: Path, output: Path, mode: str) -> dict[str, Any]:
    return main(
        spark,
        JobConfig(
            share_state=str(export / "s"),
            consumer_offsets=str(export / "o"),
            output=str(output),
            mode=mode,
        ),
    )


@pytest.mark.spark
@pytest.mark.parametrize(
    ("seed", "writer"),
    [
        # On Spark Connect the chains are test_connect.py's (the Spark writer's, and one
        # where serverless refuses caching and settings). Two more seeds, one of them
        # through Spark's Delta writer: `make test-slow`.
        (11, "delta-rs"),
        pytest.param(23, "delta-rs", marks=pytest.mark.slow),
        pytest.param(37, "spark", marks=pytest.mark.slow),
    ],
    ids=str,
)
def test_runs_over_a_growing_export_end_as_one_full_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, writer: str
) -> None:
    if writer == "spark":
        # The output as a cluster's would be: read and changed through Spark's Delta
        # reader and writer, not delta-rs on the driver.
        monkeypatch.setattr("sharestate.io.store.is_local", lambda path, spark=None: False)
    state, offsets = generate(
        SampleSpec(records=1_500, share_partitions=48, records_per_snapshot=4, seed=seed)
    )
    assert {"snapshot", "tombstone", "update"} <= set(_record_kinds(state))
    plan = _plan(state, offsets, runs=6, seed=seed)
    export, output = tmp_path / "export", tmp_path / "incremental"
    backfilled = 0
    carried_codes: set[str] = set()
    for run, files in enumerate(plan):
        for name, table in files.items():
            _write(export / name[0], f"run-{run}-{name}.parquet", table)
        summary = _run(spark, export, output, "incremental")
        carried_codes |= _codes(spark, output, PER_SHARE_PARTITION_RULES)
        if run == 0:
            assert summary["mode"] == "full"  # nothing to go on from yet
            continue
        assert summary["mode"] == "incremental", summary
        inputs = summary["inputs"]["share_state"]
        assert inputs["reconciled"] and inputs["already_processed"] == 0
        backfilled += inputs["backfilled"]
        if "s-late" in files:
            assert inputs["backfilled"] == files["s-late"].num_rows
            findings = spark.read.format("delta").load(str(output / "findings"))
            applied = findings.filter("code = 'backfill_applied'").collect()
            assert [(r.severity, r.source, r.affected) for r in applied] == [
                ("info", "share_state", files["s-late"].num_rows)
            ]
    assert backfilled == plan[-3]["s-late"].num_rows > 0
    # The runs' findings had rows of rules whose untouched share-partitions' rows are
    # carried from run to run: the carrying is part of what the equality below checks.
    assert carried_codes, "no per-share-partition finding in any run"
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")


@pytest.mark.spark
def test_findings_of_untouched_share_partitions_are_carried(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The second run's records are the last few of one state-topic partition: the other
    # share-partitions' rows of the per-share-partition rules come from the first run.
    # Another partition's export starts after its first records (as after Kafka pruned
    # the log), so that some share-partitions' first records are updates.
    state, offsets = generate(
        SampleSpec(records=1_500, share_partitions=48, records_per_snapshot=4, seed=11)
    )
    busiest, pruned = [p for p, _ in Counter(state.column("partition").to_pylist()).most_common(2)]
    head = sorted(o for p, o in _positions(state) if p == pruned)[:6]
    state = state.filter(pa.array([not (p == pruned and o in head) for p, o in _positions(state)]))
    tail = sorted(o for p, o in _positions(state) if p == busiest)[-3:]
    is_tail = pa.array([p == busiest and o in tail for p, o in _positions(state)])
    export, output = tmp_path / "export", tmp_path / "incremental"
    _write(export / "o", "all.parquet", offsets)
    _write(export / "s", "first.parquet", state.filter(pc.invert(is_tail)))
    _run(spark, export, output, "incremental")
    _write(export / "s", "second.parquet", state.filter(is_tail))
    assert _run(spark, export, output, "incremental")["mode"] == "incremental"
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")
    touched = {
        (row.group_id, row.topic_id, row.partition)
        for row in spark.read.format("delta")
        .load(str(output / "share_partition_history"))
        .filter(f"source_partition = {busiest} AND source_offset IN ({', '.join(map(str, tail))})")
        .collect()
    }
    codes = [rule.code.value for rule in PER_SHARE_PARTITION_RULES]
    carried = [
        row
        for row in spark.read.format("delta")
        .load(str(output / "findings"))
        .filter(F.col("code").isin(codes))
        .collect()
        if (row.group_id, row.topic_id, row.partition) not in touched
    ]
    assert carried, "no per-share-partition finding of an untouched share-partition"


@pytest.mark.spark
def test_a_share_partition_on_two_state_topic_partitions_is_replayed_again(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The busiest share-partition's later records are on a lower state-topic partition (as
    # after the topic's partition count changed), and the second run brings more of them:
    # in log order they come before its stored records on its first partition, so going on
    # from the stored state would give another history than a full run.
    state, offsets = generate(
        SampleSpec(records=1_500, share_partitions=48, records_per_snapshot=4, seed=11)
    )
    keys = [bytes(k) for k in state.column("key").to_pylist()]
    rows = [i for i, k in enumerate(keys) if k == Counter(keys).most_common(1)[0][0]]
    later = rows[len(rows) // 2 :]
    home = state.column("partition")[rows[0]].as_py()
    lower = min(set(state.column("partition").to_pylist()) - {home})
    assert lower < home
    top = max(o for p, o in _positions(state) if p == lower)
    moved = state.take(later)
    fields = moved.schema
    moved = moved.set_column(
        fields.get_field_index("partition"),
        "partition",
        pa.array([lower] * moved.num_rows, fields.field("partition").type),
    ).set_column(
        fields.get_field_index("offset"),
        "offset",
        pa.array(range(top + 1, top + 1 + moved.num_rows), fields.field("offset").type),
    )
    stays = pa.array([i not in set(later) for i in range(state.num_rows)])
    half = moved.num_rows // 2
    export, output = tmp_path / "export", tmp_path / "incremental"
    _write(export / "o", "all.parquet", offsets)
    _write(export / "s", "first.parquet", pa.concat_tables([state.filter(stays), moved[:half]]))
    _run(spark, export, output, "incremental")
    _write(export / "s", "moved.parquet", moved[half:])
    split = increment_module.split_keys
    again: list[int] = []

    def counted(increment: Any, *args: Any) -> None:
        split(increment, *args)
        again.append(increment.again_count)

    monkeypatch.setattr(driver_increment, "split_keys", counted)
    assert _run(spark, export, output, "incremental")["mode"] == "incremental"
    assert again == [1]
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")


@pytest.mark.spark
def test_runs_with_end_offsets_end_as_one_full_run(spark: SparkSession, tmp_path: Path) -> None:
    # The lag is written whole each run, from the state and --end-offsets; rows that give
    # only a topic's name take its id from the group records, stored and new.
    state, offsets = generate(SampleSpec(records=600, share_partitions=12, records_per_snapshot=4))
    records = decode_share_state_table(state).records
    named = groups_arrow.topic_names(decode_consumer_offsets_table(offsets).records)
    names = dict(
        zip(
            named.column("topic_id").to_pylist(),
            named.column("topic_name").to_pylist(),
            strict=True,
        )
    )
    pairs = sorted(
        set(
            zip(
                records.column("topic_id").to_pylist(),
                records.column("partition").to_pylist(),
                strict=True,
            )
        )
    )
    ends = [
        {
            "topic_id": None if i % 2 and topic in names else topic,
            "topic": names.get(topic) if i % 2 else None,
            "partition": partition,
            "end_offset": 100 + i,
        }
        for i, (topic, partition) in enumerate(pairs)
    ]
    assert any(end["topic_id"] is None for end in ends)
    end_offsets = tmp_path / "end_offsets"
    _write(end_offsets, "ends.parquet", pa.Table.from_pylist(ends))
    half, offsets_half = pc.less(state.column("offset"), 20), pc.less(offsets.column("offset"), 8)
    export = tmp_path / "export"

    def run(output: Path, mode: str) -> dict[str, Any]:
        return main(
            spark,
            JobConfig(
                share_state=str(export / "s"),
                consumer_offsets=str(export / "o"),
                end_offsets=str(end_offsets),
                output=str(output),
                mode=mode,
            ),
        )

    _write(export / "s", "a.parquet", state.filter(half))
    _write(export / "o", "a.parquet", offsets.filter(offsets_half))
    run(tmp_path / "incremental", "incremental")
    _write(export / "s", "b.parquet", state.filter(pc.invert(half)))
    _write(export / "o", "b.parquet", offsets.filter(pc.invert(offsets_half)))
    summary = run(tmp_path / "incremental", "incremental")
    assert summary["mode"] == "incremental"
    assert summary["lag"]["with_lag"] > 0, summary["lag"]
    run(tmp_path / "full", "full")
    assert_same_tables(tmp_path / "incremental", tmp_path / "full")


def _codes(spark: SparkSession, output: Path, rules: Sequence[FindingRule[Any]]) -> set[str]:
    """The codes of `rules` among the output's findings."""
    findings = spark.read.format("delta").load(str(output / "findings"))
    codes = {rule.code.value for rule in rules}
    return {row.code for row in findings.select("code").distinct().collect()} & codes


def _history_versions(output: Path) -> dict[str, int]:
    versions = {}
    for table in output.iterdir():
        log = table / "_delta_log"
        if log.is_dir():
            versions[table.name] = len(list(log.glob("*.json")))
    return versions


@pytest.mark.spark
def test_nothing_new_writes_nothing(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state, offsets = generate(SampleSpec(records=400, share_partitions=8))
    _write(tmp_path / "export" / "s", "a.parquet", state)
    _write(tmp_path / "export" / "o", "a.parquet", offsets)
    output = tmp_path / "out"
    _run(spark, tmp_path / "export", output, "incremental")
    before = _history_versions(output)
    caplog.set_level(logging.INFO, logger="sharestate")
    caplog.clear()  # only this run's lines (an earlier test may have set the level)
    again = _run(spark, tmp_path / "export", output, "incremental")
    assert again["nothing_new"] is True
    assert _history_versions(output) == before  # not one commit on any table
    assert not any(m.startswith("wrote ") for m in caplog.messages)
    # The command line tells it before starting Spark (no session is built).
    code = run_sharestate(
        "replay",
        "--share-state",
        str(tmp_path / "export" / "s"),
        "--consumer-offsets",
        str(tmp_path / "export" / "o"),
        "--output",
        str(output),
        "--mode",
        "incremental",
    )
    assert code.returncode == 0, code.stderr
    assert "nothing new in the exports since" in code.stdout
    assert "SparkContext" not in code.stderr
    assert _history_versions(output) == before


@pytest.mark.spark
def test_a_killed_run_is_put_back_by_the_next(spark: SparkSession, tmp_path: Path) -> None:
    state, offsets = generate(SampleSpec(records=600, share_partitions=12, records_per_snapshot=4))
    half = pc.less(state.column("offset"), 20)
    export = tmp_path / "export"
    _write(export / "s", "a.parquet", state.filter(half))
    _write(export / "o", "a.parquet", offsets)
    output = tmp_path / "out"
    _run(spark, export, output, "incremental")
    # A run killed after some commits: rows in two tables the checkpoint does not cover.
    from deltalake import write_deltalake

    for name in ("share_state_records", "findings"):
        table = DeltaTable(str(output / name)).to_pyarrow_table()
        write_deltalake(str(output / name), table.slice(0, 3), mode="append")
    _write(export / "s", "b.parquet", state.filter(pc.invert(half)))
    summary = _run(spark, export, output, "incremental")
    assert summary["mode"] == "incremental"
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")


@pytest.mark.spark
def test_an_increment_larger_than_an_increment_takes_runs_as_a_full_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, offsets = generate(SampleSpec(records=600, share_partitions=12, records_per_snapshot=4))
    first = pc.less(state.column("offset"), 10)
    export, output = tmp_path / "export", tmp_path / "out"
    _write(export / "s", "a.parquet", state.filter(first))
    _write(export / "o", "a.parquet", offsets)
    _run(spark, export, output, "incremental")
    _write(export / "s", "b.parquet", state.filter(pc.invert(first)))
    arrived = state.num_rows - pc.sum(first.cast("int64")).as_py()
    monkeypatch.setattr(incremental_module, "LARGE_INCREMENT_ROWS", arrived - 1)
    summary = _run(spark, export, output, "incremental")
    assert summary["mode"] == "full"
    # Told from the new file before Spark reads it.
    assert summary["full_run_because"] == (
        f"{arrived:,} rows in new files above the offsets processed, more than an increment"
        f" takes ({arrived - 1:,})"
    )
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")
    # The next run is incremental again, from the full run's checkpoint.
    _write(export / "o", "b.parquet", offsets.slice(0, 2))
    monkeypatch.setattr(incremental_module, "LARGE_INCREMENT_ROWS", 250_000)
    assert _run(spark, export, output, "incremental")["mode"] == "incremental"


@pytest.mark.spark
def test_more_rows_delivered_than_an_increment_takes_make_a_full_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, offsets = generate(SampleSpec(records=600, share_partitions=12, records_per_snapshot=4))
    first = pc.less(state.column("offset"), 10)
    export, output = tmp_path / "export", tmp_path / "out"
    _write(export / "s", "a.parquet", state.filter(first))
    _write(export / "o", "a.parquet", offsets)
    _run(spark, export, output, "incremental")
    _write(export / "s", "b.parquet", state.filter(pc.invert(first)))
    arrived = state.num_rows - pc.sum(first.cast("int64")).as_py()
    # Not told from the new files before reading (as for an export that is not local): the
    # streams deliver the rows, and there are more than an increment takes.
    monkeypatch.setattr(incremental_module, "is_local", lambda path, spark=None: False)
    monkeypatch.setattr(incremental_module, "LARGE_INCREMENT_ROWS", arrived - 1)
    summary = _run(spark, export, output, "incremental")
    assert summary["mode"] == "full"
    assert summary["full_run_because"] == (
        f"the inputs' streams delivered more rows than an increment takes ({arrived - 1:,})"
    )
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")


@pytest.mark.spark
def test_a_step_that_fails_beside_others_leaves_the_output_as_it_was(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    state, offsets = generate(SampleSpec(records=600, share_partitions=12, records_per_snapshot=4))
    half = pc.less(state.column("offset"), 20)
    export, output = tmp_path / "export", tmp_path / "out"
    _write(export / "s", "a.parquet", state.filter(half))
    _write(export / "o", "a.parquet", offsets)
    _run(spark, export, output, "incremental")
    before = {
        name: DeltaTable(str(output / name)).to_pyarrow_table() for name in delta_tables(output)
    }
    _write(export / "s", "b.parquet", state.filter(pc.invert(half)))

    def ranges_fail(*args: object) -> None:
        time.sleep(1)  # the steps beside it commit meanwhile
        raise RuntimeError("ranges failed (injected)")

    monkeypatch.setattr("sharestate.job.incremental.write_ranges", ranges_fail)
    caplog.set_level(logging.WARNING, logger="sharestate")
    with pytest.raises(RuntimeError, match="injected"):
        _run(spark, export, output, "incremental")
    put_back = [m for m in caplog.messages if "putting back" in m and "table(s)" in m]
    assert len(put_back) == 1, caplog.messages  # the steps beside it had committed
    after = {
        name: DeltaTable(str(output / name)).to_pyarrow_table() for name in delta_tables(output)
    }
    assert after == before
    monkeypatch.undo()
    _run(spark, export, output, "incremental")
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")


@pytest.mark.spark
def test_runs_that_compact_their_tables_end_as_one_full_run(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Any partition with two small files is compacted: the runs after the first compact.
    monkeypatch.setattr(store_module, "COMPACT_ABOVE_FILES", 1)
    state, offsets = generate(SampleSpec(records=600, share_partitions=12, records_per_snapshot=4))
    offset = state.column("offset")
    export, output = tmp_path / "export", tmp_path / "out"
    _write(export / "o", "a.parquet", offsets)
    for name, low, high in (("a", 0, 15), ("b", 15, 30), ("c", 30, None)):
        arrived = pc.greater_equal(offset, low)
        if high is not None:
            arrived = pc.and_(arrived, pc.less(offset, high))
        _write(export / "s", f"{name}.parquet", state.filter(arrived))
        _run(spark, export, output, "incremental")
    compacted = [
        name
        for name in delta_tables(output)
        if any(
            commit["operation"] == "OPTIMIZE" for commit in DeltaTable(str(output / name)).history()
        )
    ]
    assert "share_state_records" in compacted
    assert len(DeltaTable(str(output / "share_state_records")).file_uris()) == 1
    _run(spark, export, tmp_path / "full", "full")
    assert_same_tables(output, tmp_path / "full")


_HOLD_THE_LOCK = """
import sys, time
from sharestate.io.lock import output_lock
with output_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(300)
"""


def test_a_second_run_on_the_same_output_stops_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out"
    replay = ["replay", "--share-state", str(tmp_path / "nowhere"), "--output", str(output)]
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_THE_LOCK, str(output)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputLockedError, match="is writing there"), output_lock(str(output)):
            pass
        assert cli.main(replay) == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and f"another run (process {holder.pid} on" in error[0], error
        child = run_sharestate(*replay)
        assert child.returncode == 2
        assert "is writing there" in child.stderr.strip().splitlines()[-1]
    finally:
        holder.kill()  # as a killed run would: the kernel releases its lock
        holder.wait()
    with output_lock(str(output)):
        holder_info = json.loads((output / "_lock").read_text())
    assert holder_info["pid"] != holder.pid and {"host", "started_at"} <= set(holder_info)


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
