"""Whole-job benchmark (`make bench`): the job end to end (incremental runs:
bench_incremental.py).

On the simulated export of bench_replay.py (N records, default 10,000,000 over 20,000
share-partitions; cached in bench-data/), in one Spark session on local[2]:

* stages: decode alone, decode + replay (both to Spark's `noop` sink), then the whole job
  (decode, replay, every audit table, Delta writes, summary): records/s end to end and
  the share of the time per stage (decode; replay = decode+replay - decode; audits and
  writes = job - decode+replay).

Results go to bench-data/job-results.json and, with the date, commit, machine and settings,
to bench/results/ (`bench_results.py`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_replay import DATA, _export, _measure, bench_session  # noqa: E402
from bench_results import machine, spark_settings, write_result  # noqa: E402

from sharestate.job import JobConfig  # noqa: E402
from sharestate.job import main as run_job  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--share-partitions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=932)
    args = parser.parse_args()
    DATA.mkdir(exist_ok=True)
    export, meta = _export(args.records, args.share_partitions, args.seed)

    spark = bench_session("sharestate-bench-job")
    stages = _measure(spark, export)
    out = DATA / "job-output"

    def timed(share_state: Path, output: Path, mode: str) -> float:
        started = time.perf_counter()
        run_job(spark, JobConfig(share_state=str(share_state), output=str(output), mode=mode))
        return time.perf_counter() - started

    shutil.rmtree(out, ignore_errors=True)
    full = timed(export, out / "full", "full")
    machine_info, session_settings = machine(spark), spark_settings(spark)
    spark.stop()
    records = meta["records"]
    result = {
        "records": records,
        "job_seconds": full,
        "job_records_per_sec": records / full,
        "share_of_time": {
            "decode": stages["decode_seconds"] / full,
            "replay": (stages["replay_seconds"] - stages["decode_seconds"]) / full,
            "audits_and_writes": (full - stages["replay_seconds"]) / full,
        },
        "stage_seconds": stages,
        "goals": {"job_records_per_sec": 200_000},
    }
    (DATA / "job-results.json").write_text(json.dumps(result, indent=2))
    settings = {
        "command": "bench/bench_job.py",
        **vars(args),
        "output_format": "delta",
        "spark": session_settings,
    }
    write_result("job", settings, result, machine_info)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
