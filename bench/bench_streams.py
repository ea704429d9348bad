"""Incremental runs on the inputs' streams (`make bench`): the same 10,000-record increments
on a local Parquet folder and a local Delta export, and both on HDFS (a real mini-cluster,
`tests/support/hdfs.py`), with the output local and with it on HDFS too, in one Spark
session.

The history is bench_shapes' 500,009-record export (1,000 share-partitions; cached in
bench-data/) less its newest 30,000 records, which arrive as three increments of about
10,000, one per turn; each run goes on from the one before (nothing is copied between
turns). Per place: the full run over the history, then the three increments: seconds
(their median is the measure), the streams' seconds (the job's log), the rows read.

Goal (issue 41): an export on the remote file system of the tests, the increment within
1.5x of the same increment on local files (before the streams, a run there read the whole
export). With the output there too, its tables are changed through Spark's Delta writer
instead of delta-rs on the driver: that ratio is recorded beside.
Results go to bench/results/ (date, commit, machine, settings).
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import write_deltalake

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_incremental import _newest  # noqa: E402
from bench_replay import bench_session  # noqa: E402
from bench_results import machine, spark_settings, write_result  # noqa: E402
from bench_shapes import _export  # noqa: E402

from sharestate.io.store import arrow_frame  # noqa: E402
from sharestate.job import JobConfig  # noqa: E402
from sharestate.job import main as run_job  # noqa: E402
from tests.support.hdfs import mini_hdfs  # noqa: E402

INCREMENT, TURNS = 10_000, 3
#: name -> (export format, export on HDFS, output on HDFS).
PLACES: dict[str, tuple[str, bool, bool]] = {
    "local-parquet": ("parquet", False, False),
    "local-delta": ("delta", False, False),
    "hdfs-parquet-local-output": ("parquet", True, False),
    "hdfs-delta-local-output": ("delta", True, False),
    "hdfs-parquet": ("parquet", True, True),
    "hdfs-delta": ("delta", True, True),
}
_STREAMS = re.compile(r"ran the inputs' streams in ([0-9.]+) s")


class _Log(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def take(self) -> list[str]:
        taken, self.messages = self.messages, []
        return taken


def _layout(records: int, share_partitions: int, seed: int) -> tuple[pa.Table, list[pa.Table]]:
    """The history and the TURNS increments, newest last."""
    folder = _export(records, share_partitions, seed, newest=INCREMENT)
    table = pa.concat_tables(
        [ds.dataset(folder / "s").to_table(), pq.read_table(folder / "new.parquet")],
        promote_options="default",
    )
    increments = []
    for _ in range(TURNS):
        newest = _newest(table, INCREMENT)
        increments.insert(0, table.filter(newest))
        table = table.filter(pc.invert(newest))
    return table, increments


def _add(spark: Any, fmt: str, remote: bool, export: str, rows: pa.Table, turn: int) -> None:
    """`rows` arrive in the export as an exporter adds them: a new file, or a commit."""
    if remote:
        arrow_frame(spark, rows).write.format(fmt).mode("append").save(export)
    elif fmt == "parquet":
        Path(export).mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, f"{export}/part-{turn:03d}.parquet")
    else:
        write_deltalake(export, rows, mode="append")


def _run(spark: Any, export: str, output: str, log: _Log) -> dict[str, Any]:
    log.take()
    started = time.perf_counter()
    summary = run_job(spark, JobConfig(share_state=export, output=output, mode="incremental"))
    seconds = time.perf_counter() - started
    streams = [float(m.group(1)) for line in log.take() if (m := _STREAMS.search(line))]
    inputs = summary.get("inputs", {}).get("share_state", {})
    return {
        "seconds": round(seconds, 2),
        "mode": summary.get("mode"),
        "streams_seconds": streams[0] if streams else None,
        "rows_read": inputs.get("rows_read"),
        "already_processed": inputs.get("already_processed"),
    }


def _place(
    spark: Any,
    place: str,
    roots: tuple[str, str],
    history: pa.Table,
    increments: list[pa.Table],
    log: _Log,
) -> dict[str, Any]:
    fmt, remote_export, remote_output = PLACES[place]
    export = f"{roots[remote_export]}/{place}/export"
    output = f"{roots[remote_output]}/{place}/out"
    _add(spark, fmt, remote_export, export, history, 0)
    full = _run(spark, export, output, log)
    turns = []
    for turn, rows in enumerate(increments, start=1):
        _add(spark, fmt, remote_export, export, rows, turn)
        turns.append(_run(spark, export, output, log))
        print(f"{place}: turn {turn}: {turns[-1]}", flush=True)
    return {
        "full_history": full,
        "turns": turns,
        "increment_seconds": statistics.median(t["seconds"] for t in turns),
        "increment_rows": [r.num_rows for r in increments],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--share-partitions", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument(
        "--places",
        default=",".join(PLACES),
        help="the places to measure, comma-separated (default: all); the ratios need all",
    )
    args = parser.parse_args()
    places = args.places.split(",")
    if unknown := sorted(set(places) - set(PLACES)):
        parser.error(f"unknown places {unknown}; known: {', '.join(PLACES)}")
    logging.basicConfig(level=logging.WARNING)
    log = _Log()
    logging.getLogger("sharestate").addHandler(log)
    logging.getLogger("sharestate").setLevel(logging.INFO)
    history, increments = _layout(args.records, args.share_partitions, args.seed)
    spark = bench_session("bench-streams")
    local = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    results: dict[str, Any] = {}
    try:
        with mini_hdfs() as hdfs:
            for place in places:
                roots = (str(local), f"{hdfs}/bench")
                results[place] = _place(spark, place, roots, history, increments, log)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    goals: dict[str, bool] = {}
    for fmt in ("parquet", "delta"):
        if f"local-{fmt}" not in results:
            continue
        here = results[f"local-{fmt}"]["increment_seconds"]
        for variant, place in (("export", f"hdfs-{fmt}-local-output"), ("both", f"hdfs-{fmt}")):
            if place in results:
                ratio = results[place]["increment_seconds"] / here
                results[f"hdfs_{variant}_over_local_{fmt}"] = round(ratio, 2)
        if f"hdfs_export_over_local_{fmt}" in results:
            within = results[f"hdfs_export_over_local_{fmt}"] <= 1.5
            goals[f"hdfs_export_{fmt}_within_1_5x_of_local"] = within
    results["goals"] = goals
    settings = {
        "command": "bench/bench_streams.py",
        "records": args.records,
        "share_partitions": args.share_partitions,
        "seed": args.seed,
        "places": places,
        "history_records": history.num_rows,
        "increment": INCREMENT,
        "turns": TURNS,
        "spark": spark_settings(spark),
    }
    path = write_result("streams", settings, results, machine(spark))
    print(f"wrote {path}")
    for key, value in results.items():
        if key.startswith("hdfs_") or key == "goals":
            print(key, value)


if __name__ == "__main__":
    main()
