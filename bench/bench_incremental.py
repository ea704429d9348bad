"""Incremental-run benchmark (`make bench`): what a scheduled run costs over a growing export.

On the simulated export of bench_replay.py (default 10,000,000 records over 20,000
share-partitions; cached in bench-data/), laid out as an exporter leaves it: the history in
the export's files, and each increment a new file (the newest records of every state-topic
partition, in proportion). In one Spark session on local[2]:

* a full run over the history (the output the increments go on from);
* increments of 10,000 and 100,000 (1%) records: seconds, the stages from the job's log,
  and what each table's change read and wrote (files, bytes, rows);
* a run with nothing new;
* a full run over everything (for the 100,000-record increment's speed-up);
* the same 10,000-record increment on a 2,500,000-record history (flat in the history);
* the 10,000-record increment again on each history, REPEATS times in turns (10M, 2.5M,
  10M, ...), each from the output before it: the medians compare the histories in the same
  session state (a single run right after its own history's full run carries that run's
  heap, which differs by history), and the 10M median is the 10 s goal's measure;
* the 100,000-record increment again on the 10M history, REPEATS times, each from the output
  before it: the median is the 10x goal's measure (the full run over everything divided by
  it), as the small increment's median is the 10 s goal's;
* as fresh processes (`sharestate replay --mode incremental`, JVM start included): nothing
  new, and 10,000 new REPEATS times (each from the output before it; the median is the
  30 s goal's measure);
* successive increments: from the output before the increments, the 10,000-record
  increment (a warm-up), then SUCCESSIVE more of 10,000 records each (cut in turn from the
  oldest of the 90,000 newer records), every run going on from the one before as a
  schedule's runs do: the export only grows and nothing is rewound (the turns above rewind
  a Delta export, which makes Delta's source load each turn's log afresh). Issue 41's
  goal (within 1.2x of the incremental run before the streams) is measured against that
  design in the same run by bench_designs.py.

`--successive-only` runs a full run over the history for each export format and then only
the successive increments, the two formats taking turns: Delta's cost against Parquet's in
one run.

With `--export-format delta` the export is a Delta table instead (written by delta-rs:
the history one commit, each increment an append); between turns the table is rewound to
the history's version, as the Parquet layout's increment files are unlinked.

Goals (issue 20; the medians where there are turns): 10,000 new on a 10M history in at most
10 s; 100,000 at least 10x faster than the full run; nothing new in at most 3 s; the
10,000-record increment within 1.3x on a 2.5M and a 10M history; fresh process: nothing new
in at most 20 s, 10,000 new in 30 s.
Results go to bench/results/ (date, commit, machine, settings).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_replay import DATA, _export, bench_session  # noqa: E402
from bench_results import machine, spark_settings, write_result  # noqa: E402

from sharestate.job import JobConfig  # noqa: E402
from sharestate.job import main as run_job  # noqa: E402
from sharestate.sample.simulate import write_export  # noqa: E402

SMALL, LARGE = 10_000, 100_000
REPEATS = 3
#: Turns of the successive protocol: SMALL new records each, every run going on from the
#: one before (as a schedule's runs do), nothing rewound.
SUCCESSIVE = 3


def _newest(table: pa.Table, count: int) -> pa.Array:
    """A mask of the newest `count` rows of `table`, in proportion per partition."""
    ends = table.group_by("partition").aggregate([("offset", "max"), ("offset", "count")])
    total = table.num_rows
    cut = {
        p: int(m) - round(count * int(n) / total)
        for p, m, n in zip(*ends.to_pydict().values(), strict=True)
    }
    limits = pc.take(
        pa.array(list(cut.values())),
        pc.index_in(table.column("partition"), value_set=pa.array(list(cut.keys()))),
    )
    return pc.greater(table.column("offset"), limits)


def _layout(records: int, share_partitions: int, seed: int) -> tuple[Path, dict[str, Any]]:
    """bench-data/incremental-<records>/: the history as the export (`export/`), and the
    two increments beside it (`inc-small.parquet`: the first SMALL of the newest LARGE
    records, `inc-rest.parquet`: the others)."""
    source, meta = _export(records, share_partitions, seed)
    folder = DATA / f"incremental-{records}-{share_partitions}-{seed}"
    if (folder / "meta.json").exists():
        return folder, json.loads((folder / "meta.json").read_text())
    table = ds.dataset(source).to_table()
    new = _newest(table, LARGE)
    history, increment = table.filter(pc.invert(new)), table.filter(new)
    small = _newest(increment, LARGE - SMALL)
    write_export(history, folder / "export")
    for name, rows in (
        ("inc-small", increment.filter(pc.invert(small))),
        ("inc-rest", increment.filter(small)),
    ):
        pq.write_table(rows, folder / f"{name}.parquet", write_page_index=True)
    meta = {
        **meta,
        "history_records": history.num_rows,
        "small_increment": increment.num_rows - pc.sum(small).as_py(),
        "large_increment": increment.num_rows,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2))
    return folder, meta


def _next_increments(folder: Path) -> list[str]:
    """SUCCESSIVE increments of SMALL records that follow `inc-small`, cut from the oldest
    records of `inc-rest.parquet` in turn (`inc-next-<k>.parquet`, made once): each turn of
    the successive protocol adds the next one to the export."""
    names = [f"inc-next-{k}" for k in range(1, SUCCESSIVE + 1)]
    if all((folder / f"{name}.parquet").exists() for name in names):
        return names
    rest = pq.read_table(folder / "inc-rest.parquet")
    for name in names:
        later = _newest(rest, rest.num_rows - SMALL)
        pq.write_table(rest.filter(pc.invert(later)), folder / f"{name}.parquet")
        rest = rest.filter(later)
    return names


#: The export's format (`--export-format`): its folder under the layout, and how the
#: increments arrive in it.
EXPORT_FORMAT = "parquet"


def _export_folder(folder: Path) -> Path:
    """The export of the layout in EXPORT_FORMAT: `export/` (Parquet files), or
    `export-delta/` (a Delta table of the same history, made once)."""
    if EXPORT_FORMAT == "parquet":
        return folder / "export"
    delta = folder / "export-delta"
    if not (delta / "_delta_log").is_dir():
        history = [
            str(path)
            for path in sorted((folder / "export").glob("*.parquet"))
            if not path.name.startswith(("inc-small", "inc-rest"))
        ]
        write_deltalake(str(delta), ds.dataset(history).to_table(), mode="overwrite")
    return delta


def _arrive(folder: Path, *names: str, grow: bool = False) -> None:
    """The export as it is once `names` (increments) have arrived. `grow`: the export held
    the first of them already (a Delta export then only gets commits for the others)."""
    if EXPORT_FORMAT == "delta":
        _arrive_delta(_export_folder(folder), folder, names, grow)
        return
    for path in folder.glob("inc-*.parquet"):
        name, arrived = path.stem, folder / "export" / path.name
        if name in names and not arrived.exists():
            os.link(path, arrived)
        elif name not in names and arrived.exists():
            arrived.unlink()


#: Called after the Delta export is rewound: Spark keeps each table's log in memory
#: (DeltaLog's cache), and a log rewound under it would read as the one it had.
FORGET_DELTA_LOGS: list[Any] = []


#: The increments appended to the Delta export since this process rewound it, in order;
#: None: not known (rewind first).
DELTA_APPENDED: list[str] | None = None


def _arrive_delta(export: Path, folder: Path, names: tuple[str, ...], grow: bool) -> None:
    """Append each of `names` as a commit of its own: with `grow`, after those this process
    appended already when they are the first of `names`; else after rewinding the Delta
    export to its history (version 0: its later commits' log entries removed)."""
    global DELTA_APPENDED
    done = DELTA_APPENDED
    if grow and done is not None and list(names[: len(done)]) == done:
        for name in names[len(done) :]:
            write_deltalake(str(export), pq.read_table(folder / f"{name}.parquet"), mode="append")
        DELTA_APPENDED = list(names)
        return
    log = export / "_delta_log"
    for entry in log.iterdir():
        if entry.name != "00000000000000000000.json" and not entry.is_dir():
            entry.unlink()
    DeltaTable(str(export))  # the rewound table opens
    for forget in FORGET_DELTA_LOGS:
        forget()
    for name in names:
        write_deltalake(str(export), pq.read_table(folder / f"{name}.parquet"), mode="append")
    DELTA_APPENDED = list(names)


class _Stages(logging.Handler):
    """The job's log lines with the seconds since the previous one."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []
        self.last = time.perf_counter()

    def emit(self, record: logging.LogRecord) -> None:
        now = time.perf_counter()
        self.lines.append((round(now - self.last, 2), record.getMessage()))
        self.last = now

    def take(self) -> list[tuple[float, str]]:
        lines, self.lines = self.lines, []
        self.last = time.perf_counter()
        return lines


def _run(spark: Any, export: Path, output: Path, mode: str, stages: _Stages) -> dict[str, Any]:
    stages.take()
    started = time.perf_counter()
    summary = run_job(spark, JobConfig(share_state=str(export), output=str(output), mode=mode))
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "stages": stages.take(),
        "summary_inputs": summary.get("inputs"),
        "nothing_new": summary.get("nothing_new", False),
        "changes": summary.get("changes"),
    }


def _fresh(export: Path, output: Path) -> dict[str, Any]:
    """`sharestate replay --mode incremental` as a new process, JVM start included."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sharestate",
            "replay",
            "--share-state",
            str(export),
            "--output",
            str(output),
            "--mode",
            "incremental",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "nothing_new": "nothing new" in done.stdout,
    }


def _history(spark: Any, records: int, args: argparse.Namespace, stages: _Stages) -> dict[str, Any]:
    """The measurements on one history size."""
    folder, meta = _layout(records, args.share_partitions, args.seed)
    export, out, copy = _export_folder(folder), folder / "out", folder / "out-before-increments"
    _arrive(folder)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(copy, ignore_errors=True)
    result: dict[str, Any] = {"meta": meta}
    result["full_history"] = _run(spark, export, out, "full", stages)
    shutil.copytree(out, copy)
    result["nothing_new_warm_up"] = _run(spark, export, out, "incremental", stages)
    _arrive(folder, "inc-small")
    result["small"] = _run(spark, export, out, "incremental", stages)
    result["nothing_new"] = _run(spark, export, out, "incremental", stages)
    if records == args.records:
        shutil.rmtree(out)
        shutil.copytree(copy, out)
        _arrive(folder, "inc-small", "inc-rest")
        result["large"] = _run(spark, export, out, "incremental", stages)
        shutil.rmtree(folder / "out-full", ignore_errors=True)
        result["full_everything"] = _run(spark, export, folder / "out-full", "full", stages)
        fresh_small = []
        for _ in range(REPEATS):
            shutil.rmtree(out)
            shutil.copytree(copy, out)
            _arrive(folder, "inc-small")
            fresh_small.append(_fresh(export, out)["seconds"])
        result["fresh_small"] = {
            "seconds": statistics.median(fresh_small),
            "turns": fresh_small,
        }
        result["fresh_nothing_new"] = _fresh(export, out)
    return result


def _repeated(
    spark: Any, folders: dict[int, Path], stages: _Stages, *increments: str
) -> dict[int, list[float]]:
    """The increment made of `increments` (their files) REPEATS times on each history, in
    turns, each run from the output as it was before the increments."""
    seconds: dict[int, list[float]] = {records: [] for records in folders}
    for _ in range(REPEATS):
        for records, folder in folders.items():
            out = folder / "out"
            shutil.rmtree(out)
            shutil.copytree(folder / "out-before-increments", out)
            _arrive(folder, *increments)
            run = _run(spark, _export_folder(folder), out, "incremental", stages)
            read = (run["summary_inputs"] or {}).get("share_state", {}).get("rows_read")
            if not read:  # a turn that read nothing measures nothing
                raise RuntimeError(f"an increment of {increments} read no rows: {run}")
            seconds[records].append(run["seconds"])
    return seconds


def _successive(
    spark: Any, folder: Path, stages: _Stages, before: dict[str, Path]
) -> dict[str, Any]:
    """Per export format (the keys of `before`, each the output a full run over the history
    wrote for it): from that output, `inc-small` arrives (a warm-up run), then each of
    `_next_increments` in turn, every run going on from the one before: the export only
    grows, nothing is rewound, and Spark's cache of a Delta export's log stays as a
    schedule's session keeps it. The formats take turns, increment by increment."""
    global EXPORT_FORMAT
    outs = {fmt: folder / f"out-successive-{fmt}" for fmt in before}
    arrived: list[str] = []
    result: dict[str, Any] = {fmt: {"turns": [], "rows_read": []} for fmt in before}
    for name in ["inc-small", *_next_increments(folder)]:
        arrived.append(name)
        for fmt, out in outs.items():
            EXPORT_FORMAT = fmt
            if name == "inc-small":
                shutil.rmtree(out, ignore_errors=True)
                shutil.copytree(before[fmt], out)
            _arrive(folder, *arrived, grow=name != "inc-small")
            run = _run(spark, _export_folder(folder), out, "incremental", stages)
            read = (run["summary_inputs"] or {}).get("share_state", {}).get("rows_read")
            if not read:  # a turn that read nothing measures nothing
                raise RuntimeError(f"the successive increment {name} read no rows: {run}")
            if name == "inc-small":
                result[fmt]["warm_up"] = run["seconds"]
                continue
            result[fmt]["turns"].append(run["seconds"])
            result[fmt]["rows_read"].append(read)
            result[fmt]["stages_last"] = run["stages"]
    for fmt in before:
        result[fmt]["median"] = statistics.median(result[fmt]["turns"])
    return result


def _successive_only(spark: Any, args: argparse.Namespace, stages: _Stages) -> dict[str, Any]:
    """`--successive-only`: a full run over the history per export format, then the
    successive protocol on both formats in turns (their ratio measured in one run)."""
    global EXPORT_FORMAT
    folder, meta = _layout(args.records, args.share_partitions, args.seed)
    before = {}
    full = {}
    for fmt in ("parquet", "delta"):
        EXPORT_FORMAT = fmt
        _arrive(folder)
        before[fmt] = folder / f"out-before-successive-{fmt}"
        shutil.rmtree(before[fmt], ignore_errors=True)
        full[fmt] = _run(spark, _export_folder(folder), before[fmt], "full", stages)["seconds"]
    successive = _successive(spark, folder, stages, before)
    return {
        "meta": meta,
        "full_history": full,
        "successive": successive,
        "seconds": {
            "successive_small_increment_median": successive[args.export_format]["median"],
            **{f"successive_{fmt}_median": successive[fmt]["median"] for fmt in successive},
        },
        "ratios": {
            "successive_delta_over_parquet": successive["delta"]["median"]
            / successive["parquet"]["median"],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--small-history", type=int, help="default: a quarter of --records")
    parser.add_argument("--share-partitions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=932)
    parser.add_argument(
        "--export-format",
        choices=("parquet", "delta"),
        default="parquet",
        help="the export's format: Parquet files, or a Delta table of the same records",
    )
    parser.add_argument(
        "--successive-only",
        action="store_true",
        help="only the successive protocol, on both export formats in turns (after a full run"
        " over the history for each); --export-format names the one its median reports",
    )
    args = parser.parse_args()
    global EXPORT_FORMAT
    EXPORT_FORMAT = args.export_format
    args.small_history = args.small_history or args.records // 4
    DATA.mkdir(exist_ok=True)
    spark = bench_session("sharestate-bench-incremental")
    FORGET_DELTA_LOGS.append(spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache)
    stages = _Stages()
    logger = logging.getLogger("sharestate")
    logger.setLevel(logging.INFO)
    logger.addHandler(stages)
    if args.successive_only:
        only = _successive_only(spark, args, stages)
        machine_info, session_settings = machine(spark), spark_settings(spark)
        spark.stop()
        _write(args, only, machine_info, session_settings)
        return
    large = _history(spark, args.records, args, stages)
    small = _history(spark, args.small_history, args, stages)
    folders = {
        records: _layout(records, args.share_partitions, args.seed)[0]
        for records in (args.records, args.small_history)
    }
    repeated = _repeated(spark, folders, stages, "inc-small")
    medians = {records: statistics.median(runs) for records, runs in repeated.items()}
    repeated_large = _repeated(
        spark, {args.records: folders[args.records]}, stages, "inc-small", "inc-rest"
    )[args.records]
    large_median = statistics.median(repeated_large)
    successive = _successive(
        spark,
        folders[args.records],
        stages,
        {args.export_format: folders[args.records] / "out-before-increments"},
    )[args.export_format]
    machine_info, session_settings = machine(spark), spark_settings(spark)
    spark.stop()
    result = {
        "successive_small_increment": successive,
        "history": {str(args.records): large, str(args.small_history): small},
        "repeated_small_increment": {str(records): runs for records, runs in repeated.items()},
        "repeated_large_increment": repeated_large,
        "seconds": {
            "small_increment": large["small"]["seconds"],
            "small_increment_median": medians[args.records],
            "small_increment_on_small_history_median": medians[args.small_history],
            "large_increment": large["large"]["seconds"],
            "large_increment_median": large_median,
            "nothing_new": large["nothing_new"]["seconds"],
            "full_run": large["full_everything"]["seconds"],
            "small_increment_on_small_history": small["small"]["seconds"],
            "fresh_nothing_new": large["fresh_nothing_new"]["seconds"],
            "fresh_small_increment": large["fresh_small"]["seconds"],
            "successive_small_increment_median": successive["median"],
        },
        "ratios": {
            "full_run_over_large_increment": large["full_everything"]["seconds"]
            / large["large"]["seconds"],
            "full_run_over_large_increment_median": large["full_everything"]["seconds"]
            / large_median,
            "small_increment_history_growth": large["small"]["seconds"] / small["small"]["seconds"],
            "small_increment_history_growth_median": medians[args.records]
            / medians[args.small_history],
        },
        "goals": {
            "small_increment_median_seconds": 10,
            "full_run_over_large_increment_median": 10,
            "nothing_new_seconds": 3,
            "small_increment_history_growth_median": 1.3,
            "fresh_nothing_new_seconds": 20,
            "fresh_small_increment_seconds": 30,
        },
    }
    _write(args, result, machine_info, session_settings)


def _write(
    args: argparse.Namespace,
    result: dict[str, Any],
    machine_info: dict[str, Any],
    session_settings: dict[str, Any],
) -> None:
    settings = {
        "command": "bench/bench_incremental.py",
        **vars(args),
        "increments": {"small": SMALL, "large": LARGE, "successive": SUCCESSIVE},
        "output_format": "delta",
        "spark": session_settings,
    }
    # Paths relative to the checkout: the results are committed.
    result = json.loads(json.dumps(result).replace(f"{ROOT}/", ""))
    write_result("incremental", settings, result, machine_info)
    print(json.dumps({k: result.get(k) for k in ("seconds", "ratios", "goals")}, indent=2))


if __name__ == "__main__":
    main()
