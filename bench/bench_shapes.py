"""Shapes benchmark (`make bench`): increments of any size, and a run's fixed cost on a
small export (issue 40), beside the 10M-record shape of bench_incremental.py.

Each run is a fresh `sharestate replay` process (`python -m sharestate`, the console
command's own classic session with the JVM jar), one after another; the driver JVM's peak
resident memory is read from /proc while it runs.

* Big increment: a 2,000,000-record export over 4,000 share-partitions with
  `__consumer_offsets`. A full run over its older half, then `--mode incremental` over the
  whole export (1,000,000 new records in one run), then a full run over the whole export
  into another output: the increment's tables equal the full run's, its time and driver
  peak against the full run's (goals: at most 1.2x, no higher).
* Moved export: the same export read from another path (a folder of links to its files:
  every file looks new, every row is already processed), `--mode incremental` on the full
  run's output: at most 1.2x the full run, the tables unchanged.
* Small export: 500,000 records over 1,000 share-partitions. A full run, and its time
  outside reading, decoding, replaying and the two per-record tables (the process's time
  less the span from "reading and decoding" to "wrote share_partition_history" in its
  log; goal: at most 15 s); then 10,000 newer records arrive and a fresh
  `--mode incremental` process applies them (goal: at most 15 s). Three turns of both;
  the goals are judged on the medians.

Results go to bench/results/ (`bench_results.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_incremental import _newest  # noqa: E402
from bench_results import machine_of_processes, write_result  # noqa: E402
from bench_sessions import _arrive  # noqa: E402

from sharestate.sample.exports import SampleSpec, generate  # noqa: E402
from sharestate.sample.simulate import write_export  # noqa: E402
from tests.support.tables import assert_same_rows  # noqa: E402

DATA = ROOT / "bench-data"
BIG = (2_000_000, 4_000)
SMALL = (500_000, 1_000)
SMALL_NEW = 10_000
#: Turns of the small export's runs; its goals are judged on the medians.
SMALL_TURNS = 3
GOALS = {
    "big_increment_over_full": 1.2,
    "moved_export_over_full": 1.2,
    "small_fixed_seconds": 15.0,
    "small_fresh_increment_seconds": 15.0,
}
#: The job's log lines: "2026-11-28 03:24:35,875 sharestate <message>".
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) sharestate (.*)$")
RUN_TABLES = {"run_summary", "_checkpoint", "_run_lock"}


class _PeakMemory:
    """The highest VmHWM of java processes descended from `pid`, read every half second."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            for status in _descendants(self.pid):
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                if fields.get("Name", "").strip() == "java" and "VmHWM" in fields:
                    mib = int(fields["VmHWM"].split()[0]) / 1024
                    self.peak_mib = max(self.peak_mib, mib)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(self.peak_mib, 1)


def _descendants(root: int) -> list[str]:
    """The /proc status text of every process below `root`."""
    statuses: dict[int, str] = {}
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            text = (proc / "status").read_text()
        except OSError:
            continue
        ppid = re.search(r"^PPid:\s+(\d+)", text, re.MULTILINE)
        if ppid:
            statuses[int(proc.name)] = text
            parents[int(proc.name)] = int(ppid.group(1))
    found = []
    for pid, text in statuses.items():
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor != root and ancestor > 1:
            ancestor = parents.get(ancestor)
        if ancestor == root:
            found.append(text)
    return found


def _replay(share_state: Path, offsets: Path, output: Path, mode: str) -> dict[str, Any]:
    """One `sharestate replay` process: its seconds, driver peak, log and summary."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sharestate",
            "replay",
            "--share-state",
            str(share_state),
            "--consumer-offsets",
            str(offsets),
            "--output",
            str(output),
            "--mode",
            mode,
        ],
        cwd=ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    memory = _PeakMemory(process.pid)
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    peak = memory.stop()
    if process.returncode != 0:
        raise RuntimeError(f"{mode} run failed ({process.returncode}):\n{stderr[-4000:]}")
    summary = json.loads((output / "run_summary.json").read_text())
    return {
        "seconds": round(seconds, 2),
        "driver_jvm_peak_mib": peak,
        "mode": summary.get("mode"),
        "full_run_because": summary.get("full_run_because"),
        "log": [match.groups() for match in map(LOG_LINE.match, stderr.splitlines()) if match],
        "stdout_lines": len(stdout.splitlines()),
    }


def _span(log: list[tuple[str, str]], first: str, last: str) -> float:
    """Seconds from the log line starting with `first` to the one starting with `last`."""

    def at(prefix: str) -> datetime:
        for stamp, message in log:
            if message.startswith(prefix):
                return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f")
        raise RuntimeError(f"no log line starts with {prefix!r}")

    return (at(last) - at(first)).total_seconds()


def _same_tables(got: Path, want: Path) -> bool:
    # The tables only: the output also holds the streams' checkpoints (`_streams`).
    names = sorted(
        p.name for p in want.iterdir() if (p / "_delta_log").is_dir() and p.name not in RUN_TABLES
    )
    try:
        for name in names:
            assert_same_rows(got / name, want / name)
    except AssertionError as err:
        print(f"tables differ: {err}", flush=True)
        return False
    return True


def _export(records: int, share_partitions: int, seed: int, newest: int) -> Path:
    """bench-data/shapes-<records>-<share_partitions>-<seed>/: `s/` (the export less its
    newest `newest` records), `new.parquet` (those), `o/` (consumer offsets)."""
    folder = DATA / f"shapes-{records}-{share_partitions}-{seed}"
    if (folder / "meta.json").exists():
        return folder
    state, offsets = generate(
        SampleSpec(records=records, share_partitions=share_partitions, seed=seed)
    )
    late = _newest(state, newest)
    write_export(state.filter(pc.invert(late)), folder / "s")
    write_export(offsets, folder / "o", files=1)
    pq.write_table(state.filter(late), folder / "new.parquet", write_page_index=True)
    meta = {"records": state.num_rows, "newest": int(pc.sum(late).as_py())}
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def _without_log(run: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in run.items() if key != "log"}


def _big(seed: int, work: Path) -> dict[str, Any]:
    records, keys = BIG
    folder = _export(records, keys, seed, records // 2)
    offsets = folder / "o"
    for name in ("incremental", "full"):
        shutil.rmtree(work / name, ignore_errors=True)
    _arrive(folder, False)
    half = _replay(folder / "s", offsets, work / "incremental", "full")
    _arrive(folder, True)
    try:
        increment = _replay(folder / "s", offsets, work / "incremental", "incremental")
        full = _replay(folder / "s", offsets, work / "full", "full")
        equal = _same_tables(work / "incremental", work / "full")
        moved = work / "moved-export"
        shutil.rmtree(moved, ignore_errors=True)
        moved.mkdir()
        for file in (folder / "s").iterdir():
            (moved / file.name).symlink_to(file)
        before = work / "full-before-moved"
        shutil.rmtree(before, ignore_errors=True)
        shutil.copytree(work / "full", before)
        again = _replay(moved, offsets, work / "full", "incremental")
        unchanged = _same_tables(work / "full", before)
    finally:
        _arrive(folder, False)
    return {
        "records": records,
        "share_partitions": keys,
        "half_full": _without_log(half),
        "increment": _without_log(increment),
        "full": _without_log(full),
        "increment_tables_equal_full": equal,
        "moved_export": _without_log(again),
        "moved_export_tables_unchanged": unchanged,
        "increment_over_full": round(increment["seconds"] / full["seconds"], 2),
        "increment_peak_over_full_peak": round(
            increment["driver_jvm_peak_mib"] / full["driver_jvm_peak_mib"], 2
        ),
        "moved_export_over_full": round(again["seconds"] / full["seconds"], 2),
    }


def _small(seed: int, work: Path) -> dict[str, Any]:
    """SMALL_TURNS turns of the small export's full run and fresh increment, one after
    another: the goals are judged on the medians (single runs on these machines spread by
    a second or more)."""
    records, keys = SMALL
    folder = _export(records, keys, seed, SMALL_NEW)
    output = work / "small"
    turns = []
    for _ in range(SMALL_TURNS):
        shutil.rmtree(output, ignore_errors=True)
        _arrive(folder, False)
        full = _replay(folder / "s", folder / "o", output, "full")
        inside = _span(full["log"], "reading and decoding", "wrote share_partition_history")
        _arrive(folder, True)
        try:
            increment = _replay(folder / "s", folder / "o", output, "incremental")
        finally:
            _arrive(folder, False)
        turns.append(
            {
                "full": _without_log(full),
                "full_read_decode_replay_per_record_tables_seconds": round(inside, 2),
                "full_fixed_seconds": round(full["seconds"] - inside, 2),
                "fresh_increment": _without_log(increment),
                "fresh_increment_log": increment["log"],
            }
        )
    return {
        "records": records,
        "share_partitions": keys,
        "turns": turns,
        "full_seconds": statistics.median(t["full"]["seconds"] for t in turns),
        "full_fixed_seconds": statistics.median(t["full_fixed_seconds"] for t in turns),
        "fresh_increment_seconds": statistics.median(
            t["fresh_increment"]["seconds"] for t in turns
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args()
    work = DATA / "shapes-work"
    work.mkdir(parents=True, exist_ok=True)
    small = _small(args.seed, work)
    print("small", json.dumps(small), flush=True)
    big = _big(args.seed, work)
    print("big", json.dumps(big), flush=True)
    results = {
        "big": big,
        "small": small,
        "goals": GOALS,
        "met": {
            "big_increment_over_full": big["increment_over_full"]
            <= GOALS["big_increment_over_full"],
            "big_increment_peak": big["increment_peak_over_full_peak"] <= 1.0,
            "moved_export_over_full": big["moved_export_over_full"]
            <= GOALS["moved_export_over_full"],
            "small_fixed_seconds": small["full_fixed_seconds"] <= GOALS["small_fixed_seconds"],
            "small_fresh_increment_seconds": small["fresh_increment_seconds"]
            <= GOALS["small_fresh_increment_seconds"],
        },
    }
    print(json.dumps(results["met"], indent=2))
    write_result(
        "shapes",
        {
            "seed": args.seed,
            "master": "local[2] (conf/spark-local.conf)",
            "processes": "each run a fresh `python -m sharestate replay`, JVM jar on",
        },
        results,
        machine_of_processes(),
    )


if __name__ == "__main__":
    main()
