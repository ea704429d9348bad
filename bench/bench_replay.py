"""Replay benchmark (`make bench`): decode + replay of a simulated export at three sizes.

For sizes N/2, N and 2N records (default N = 10,000,000 over 20,000 share-partitions, the
share-partitions scaled with the size so logs keep their length distribution), it
generates a skewed export with `sharestate.sample.simulate` (cached in bench-data/), then in one
Spark session on local[2], after one untimed pass over the N/2 export, measures:

* decode: the decode step alone, decoded records to Spark's `noop` sink;
* decode+replay: decode, replay, `share_partition_history` and `share_partition_state`
  both to `noop`, the fold computed once (as the job does: the history first, and the
  state from the rows its pass left behind); not what `compute` adds for the audits (it
  caches the decoded rows on disk for the six tables that read them), which the whole-job
  benchmark (`bench/bench_job.py`) counts;

and reports records/s, the growth of time with size (a ratio above 2.0 per doubling would
be worse than linear), and peak memory: the driver JVM (which in local mode also runs the
tasks), the Python driver and the Python workers.

Kafka's own replay rate on the same records: the first records of the N export (a prefix
of its state-topic partitions, in log order) go to a records file that the Java harness
(tests/kafka/kafka_harness) replays with Kafka's ShareCoordinatorShard, single thread. That
needs Maven and Java; without them (or with --no-kafka) the rate Kafka reached on the
committed corpus (tests/kafka/replay_corpus/4.4.0/replay_bench.json) is used, and the report
says so. Results go to bench-data/replay-results.json and, with the date, commit, machine and
settings, to bench/results/ (`bench_results.py`).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_results import machine, spark_settings, write_result  # noqa: E402
from pyspark import StorageLevel  # noqa: E402

from sharestate.decode.spark import Decoded, decode_share_state  # noqa: E402
from sharestate.io import count_rows, deduplicate, read_export  # noqa: E402
from sharestate.job import JobConfig  # noqa: E402
from sharestate.jvm import Tee  # noqa: E402
from sharestate.kafka.schemas import SHARE_STATE_TOPIC  # noqa: E402
from sharestate.replay import replay  # noqa: E402
from sharestate.sample.simulate import SimulationSpec, simulate, write_export  # noqa: E402

DATA = ROOT / "bench-data"
HARNESS = ROOT / "tests" / "kafka" / "kafka_harness"
KAFKA_RELEASE = "4.4.0"


def _export(records: int, share_partitions: int, seed: int) -> tuple[Path, dict[str, Any]]:
    spec = SimulationSpec(records=records, share_partitions=share_partitions, seed=seed)
    folder = DATA / f"replay-{records}-{share_partitions}-{spec.skew}-{seed}"
    meta_file = folder / "meta.json"
    if meta_file.exists():
        return folder / "share_state", json.loads(meta_file.read_text())
    started = time.perf_counter()
    table = simulate(spec)
    generated = time.perf_counter() - started
    write_export(table, folder / "share_state")
    meta = {
        "records": table.num_rows,
        "share_partitions": share_partitions,
        "skew": spec.skew,
        "records_per_snapshot": spec.records_per_snapshot,
        "seed": seed,
        "generation_seconds": round(generated, 1),
    }
    meta_file.write_text(json.dumps(meta, indent=2))
    return folder / "share_state", meta


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _python_worker_peaks() -> list[float]:
    peaks = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            if b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline:
                peaks.append(_peak_rss_mib(int(proc.name)))
        except OSError:
            continue
    return peaks


def bench_session(app_name: str) -> Any:
    """The benchmarks' Spark session: local[2] with the project's defaults and jars."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from sharestate.job.session import local_session, spark_conf_files

    spark = local_session(
        app_name=app_name,
        conf_file=spark_conf_files(ROOT),
        conf={"spark.master": "local[2]", "spark.ui.enabled": "false"},
        jars_dir=ROOT / ".jars",
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _time_it(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _measure(spark: Any, export: Path) -> dict[str, float]:
    config = JobConfig(share_state=str(export))

    def decoded() -> Decoded:
        # The decode as the job runs it (duplicates counted, and dropped if any), without
        # the rest of pipeline.decode_inputs (which also prepares the audits: it caches the
        # decoded rows for the six tables that read them).
        export_rows = read_export(
            spark, str(export), what="--share-state", topic=SHARE_STATE_TOPIC
        ).rows
        unique = deduplicate(export_rows, count_rows(export_rows))
        return decode_share_state(unique, config.kafka_version)

    def release(*tees: Tee | None) -> None:
        for tee in tees:
            if tee is not None:
                tee.unpersist()

    def decode_only() -> None:
        decode = decoded()
        decode.records.write.format("noop").mode("overwrite").save()
        release(decode.tee)

    def decode_and_replay() -> None:
        # As the job replays (pipeline.replay_decoded): the history written straight from
        # the fold, then the state cached and written (on the JVM, from the rows the
        # history's pass left behind, see sharestate.replay.Replayed).
        decode = decoded()
        replayed = replay(decode.records)
        replayed.history.write.format("noop").mode("overwrite").save()
        state = replayed.state.persist(StorageLevel.MEMORY_AND_DISK)
        state.write.format("noop").mode("overwrite").save()
        state.unpersist()
        release(decode.tee, replayed.tee)

    return {"decode_seconds": _time_it(decode_only), "replay_seconds": _time_it(decode_and_replay)}


def _kafka_rate(export: Path, records: int, no_kafka: bool) -> dict[str, Any]:
    committed = json.loads(
        (
            ROOT / "tests" / "kafka" / "replay_corpus" / KAFKA_RELEASE / "replay_bench.json"
        ).read_text()
    )
    fallback = {
        "source": "tests/kafka/replay_corpus/4.4.0/replay_bench.json"
        " (Kafka's corpus, not these records)",
        "records_per_sec": committed["replay_only"]["records_per_sec_median"],
    }
    if no_kafka or not shutil.which("mvn") or not shutil.which("java"):
        return fallback
    import pyarrow.dataset as ds

    records_file = DATA / "kafka-replay-records.jsonl"
    table = ds.dataset(export).to_table(columns=["key", "value", "partition", "offset"])
    table = table.sort_by([("partition", "ascending"), ("offset", "ascending")]).slice(0, records)
    with records_file.open("w") as out:
        for key, value in zip(
            table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True
        ):
            line = {"key_hex": key.hex(), "value_hex": None if value is None else value.hex()}
            out.write(json.dumps(line) + "\n")
    script = (
        f'source "{HARNESS}/harness_lib.sh" && build_harness {KAFKA_RELEASE} >&2 && '
        f'run_harness {KAFKA_RELEASE} replay-bench "{records_file}"'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        fallback["harness_error"] = done.stderr.strip().splitlines()[-3:]
        return fallback
    measured = json.loads(done.stdout)
    return {
        "source": f"Kafka {KAFKA_RELEASE} ShareCoordinatorShard on the first {table.num_rows:,} "
        "records of the N export",
        "records_per_sec": measured["replay_only"]["records_per_sec_median"],
        "deserialize_and_replay_per_sec": measured["deserialize_and_replay"][
            "records_per_sec_median"
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--share-partitions", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=932)
    parser.add_argument("--kafka-records", type=int, default=1_000_000)
    parser.add_argument("--no-kafka", action="store_true", help="skip Kafka's replay rate")
    args = parser.parse_args()
    DATA.mkdir(exist_ok=True)
    sizes = [(args.records // 2, args.share_partitions // 2), (args.records, args.share_partitions)]
    sizes.append((args.records * 2, args.share_partitions * 2))
    # The simulator holds a whole export in memory: it runs in a child process, so the peak
    # resident size of this process below is the Spark driver's alone.
    exports = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool:
        for records, share_partitions in sizes:
            print(f"export: {records:,} records over {share_partitions:,} share-partitions ...")
            exports.append(pool.submit(_export, records, share_partitions, args.seed).result())

    spark = bench_session("sharestate-bench-replay")
    jvm = spark.sparkContext._jvm
    jvm_pid = int(jvm.ProcessHandle.current().pid())
    # One untimed pass first: the JVM compiles the hot loops on it, so the first timed size
    # is not charged for that and the growth ratios compare like with like.
    _measure(spark, exports[0][0])
    runs = []
    for path, meta in exports:
        timing = _measure(spark, path)
        rate = meta["records"] / timing["replay_seconds"]
        runs.append({**meta, **timing, "decode_replay_records_per_sec": rate})
        print(
            f"{meta['records']:>11,} records: decode {timing['decode_seconds']:6.1f} s, "
            f"decode+replay {timing['replay_seconds']:6.1f} s = {rate:,.0f} records/s"
        )
    memory = {
        "driver_jvm_peak_rss_mib": round(_peak_rss_mib(jvm_pid), 1),
        "driver_jvm_max_heap_mib": jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20,
        "python_driver_peak_rss_mib": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
        ),
        "python_worker_peak_rss_mib": [round(p, 1) for p in _python_worker_peaks()],
    }
    machine_info, session_settings = machine(spark), spark_settings(spark)
    spark.stop()
    kafka = _kafka_rate(exports[1][0], args.kafka_records, args.no_kafka)
    middle = runs[1]
    result = {
        "runs": runs,
        "growth": {
            "half_to_n_time_ratio": runs[1]["replay_seconds"] / runs[0]["replay_seconds"],
            "n_to_double_time_ratio": runs[2]["replay_seconds"] / runs[1]["replay_seconds"],
            "note": "2.0 per doubling is linear",
        },
        "memory": memory,
        "kafka": kafka,
        "ratio_to_kafka": middle["decode_replay_records_per_sec"] / kafka["records_per_sec"],
        "goals": {"records_per_sec": 250_000, "ratio_to_kafka": 0.5, "driver_memory_mib": 2048},
    }
    (DATA / "replay-results.json").write_text(json.dumps(result, indent=2))
    settings = {
        "command": "bench/bench_replay.py",
        **vars(args),
        "sizes": [records for records, _ in sizes],
        "spark": session_settings,
    }
    write_result("replay", settings, result, machine_info)
    print(
        json.dumps(
            {k: result[k] for k in ("growth", "memory", "kafka", "ratio_to_kafka")}, indent=2
        )
    )


if __name__ == "__main__":
    main()
