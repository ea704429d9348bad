"""Sessions benchmark (`make bench`): the job on the sessions its users have.

On a sample export (`sharestate sample`'s generator: default 1,000,000 share-state records
over 2,000 share-partitions, with `__consumer_offsets`), each run a fresh `sharestate replay`
process (`python -m sharestate`), one after another in this order:

* (a) classic: the console command's own local session (conf/spark-job.conf,
  conf/spark-local.conf) with the JVM jar;
* (b) classic without the jar (`SHARESTATE_JARS` names a folder of the other jars): the
  Python paths;
* (c) Spark Connect: `--remote sc://localhost:PORT`, a local Connect server started before
  (as a user's server already runs; its start is not timed) with Spark's default settings,
  the Delta and Kafka jars and no JVM jar, and the same driver memory as (a) and (b).

Each variant: a full run over the history (the export less its newest 10,000 records), then
the 10,000 newest records arrive as a new file and an incremental run goes on from it.
Goals (issue 39): (c) within 1.5x of (b) for the full run and within 2x for the increment;
(a) beside them. Ratios are of this one run. Results go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_incremental import _newest  # noqa: E402
from bench_results import machine_of_processes, write_result  # noqa: E402

from sharestate.job.session import read_spark_defaults  # noqa: E402
from sharestate.sample.exports import SampleSpec, generate  # noqa: E402
from sharestate.sample.simulate import write_export  # noqa: E402
from tests.support.connect_server import ConnectServer  # noqa: E402

DATA = ROOT / "bench-data"
NEW = 10_000
VARIANTS = ("a", "b", "c")
GOALS = {"full": 1.5, "increment": 2.0}


def _layout(records: int, share_partitions: int, seed: int) -> Path:
    """bench-data/sessions-<records>-<share_partitions>-<seed>/: `s/` (the share-state
    history), `o/` (consumer offsets), `new.parquet` (the newest NEW records)."""
    folder = DATA / f"sessions-{records}-{share_partitions}-{seed}"
    if (folder / "meta.json").exists():
        return folder
    state, offsets = generate(
        SampleSpec(records=records + NEW, share_partitions=share_partitions, seed=seed)
    )
    newest = _newest(state, NEW)
    write_export(state.filter(pc.invert(newest)), folder / "s")
    write_export(offsets, folder / "o", files=1)
    pq.write_table(state.filter(newest), folder / "new.parquet", write_page_index=True)
    meta = {"history": state.num_rows - int(pc.sum(newest).as_py()), "new": NEW}
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def _arrive(folder: Path, arrived: bool) -> None:
    target = folder / "s" / "new.parquet"
    if arrived and not target.exists():
        os.link(folder / "new.parquet", target)
    elif not arrived and target.exists():
        target.unlink()


def _jars_without_jvm_jar(work: Path) -> Path:
    folder = work / "jars-without-jvm-jar"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for jar in (ROOT / ".jars").glob("*.jar"):
        if jar.name != "sharestate-jvm.jar":
            (folder / jar.name).symlink_to(jar)
    return folder


def _replay(folder: Path, output: Path, mode: str, env: dict[str, str], *extra: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sharestate",
            "replay",
            "--share-state",
            str(folder / "s"),
            "--consumer-offsets",
            str(folder / "o"),
            "--output",
            str(output),
            "--mode",
            mode,
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{mode} run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    summary = json.loads((output / "run_summary.json").read_text())
    if mode == "incremental" and summary.get("mode") != "incremental":
        raise RuntimeError(f"the increment ran as {summary.get('mode')}")
    return round(seconds, 2)


def _variant(name: str, folder: Path, work: Path, server: ConnectServer | None) -> dict[str, Any]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_REMOTE", None)
    extra: list[str] = []
    if name == "b":
        env["SHARESTATE_JARS"] = str(_jars_without_jvm_jar(work))
    if name == "c":
        assert server is not None
        extra = ["--remote", server.url]
    output = work / f"out-{name}"
    shutil.rmtree(output, ignore_errors=True)
    _arrive(folder, False)
    full = _replay(folder, output, "full", env, *extra)
    _arrive(folder, True)
    try:
        increment = _replay(folder, output, "incremental", env, *extra)
    finally:
        _arrive(folder, False)
    return {"full_seconds": full, "increment_seconds": increment}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--share-partitions", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=39)
    args = parser.parse_args()
    folder = _layout(args.records, args.share_partitions, args.seed)
    work = DATA / "sessions-work"
    work.mkdir(parents=True, exist_ok=True)
    local = read_spark_defaults(ROOT / "conf" / "spark-local.conf")
    results: dict[str, Any] = {}
    for name in VARIANTS:
        server = None
        if name == "c":
            server = ConnectServer(driver_memory=local["spark.driver.memory"])
        try:
            results[name] = _variant(name, folder, work, server)
        finally:
            if server is not None:
                server.stop()
        print(name, results[name], flush=True)
    ratios = {
        "full_c_over_b": round(results["c"]["full_seconds"] / results["b"]["full_seconds"], 2),
        "increment_c_over_b": round(
            results["c"]["increment_seconds"] / results["b"]["increment_seconds"], 2
        ),
    }
    results["ratios"] = ratios
    results["goals"] = {
        "full_c_over_b_at_most": GOALS["full"],
        "increment_c_over_b_at_most": GOALS["increment"],
        "met": ratios["full_c_over_b"] <= GOALS["full"]
        and ratios["increment_c_over_b"] <= GOALS["increment"],
    }
    print(json.dumps(results, indent=2))
    write_result(
        "sessions",
        {
            "records": json.loads((folder / "meta.json").read_text()),
            "share_partitions": args.share_partitions,
            "seed": args.seed,
            "master": "local[2]",
            "connect_server": "local[2], Spark's default settings, driver memory "
            + local["spark.driver.memory"],
            "processes": "each run a fresh `python -m sharestate replay`",
        },
        results,
        machine_of_processes(),
    )


if __name__ == "__main__":
    main()
