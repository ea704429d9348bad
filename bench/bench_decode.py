"""Decode benchmark (`make bench`): Parquet scan vs our decode vs a row-at-a-time UDF.

Generates N synthetic `__share_group_state` records (default 2,000,000) in the Kafka-record
schema, then measures in one Spark session on local[2]:

* scan:  reading key+value and discarding them (`noop` sink), the ceiling;
* ours:  the job's decode step with `--engine` (auto: the JVM fast tier when the jar is on
  the session, python: `mapInArrow`, numpy fast path + reference fallback; `both` times
  the two as ours_python and ours_jvm);
* naive: a classic row-at-a-time Python UDF calling the same reference decoder per row
  (left out with --no-naive).

Each is run --repeat times; the median is reported. The numbers that matter are the
ratios, measured in the same run (absolute rates move between runs on a shared machine).
Results also go to bench-data/decode-results.json and, with the date, commit, machine and
settings, to bench/results/ (`bench_results.py`).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_results import machine, spark_settings, write_result  # noqa: E402

from sharestate.kafka.wire import topic_id_to_str  # noqa: E402
from sharestate.sample import encode  # noqa: E402
from sharestate.sample.exports import KAFKA_EXPORT_SCHEMA  # noqa: E402

FILES = 8  # a multiple of the 2 cores, one Spark partition each


def _pool(size: int, rng: random.Random) -> tuple[list[bytes], list[bytes]]:
    """Distinct realistic records: mostly updates with 0-6 batches, some snapshots with more."""
    topics = [topic_id_to_str(rng.randbytes(16)) for _ in range(20)]
    keys: list[bytes] = []
    values: list[bytes] = []
    for _ in range(size):
        group = f"group-{rng.randrange(100)}"
        topic, partition = rng.choice(topics), rng.randrange(100)
        start = rng.randrange(10**9)
        snapshot = rng.random() < 0.1
        n_batches = rng.randint(0, 40) if snapshot else rng.choice([0, 1, 1, 2, 2, 3, 6])
        batches = []
        first = start
        for _ in range(n_batches):
            last = first + rng.randrange(20)
            batches.append((first, last, rng.choice([0, 2, 4]), rng.randint(1, 5)))
            first = last + 1 + rng.randrange(5)
        dcc = rng.randrange(500) if rng.random() < 0.5 else None
        if snapshot:
            keys.append(encode.share_state_key(0, group, topic, partition))
            values.append(
                encode.share_snapshot_value(
                    snapshot_epoch=rng.randrange(1000),
                    state_epoch=1,
                    leader_epoch=3,
                    start_offset=start,
                    batches=batches,
                    create_timestamp=1_760_000_000_000,
                    write_timestamp=1_760_000_000_000,
                    delivery_complete_count=dcc,
                    layout="4.2",
                )
            )
        else:
            keys.append(encode.share_state_key(1, group, topic, partition))
            values.append(
                encode.share_update_value(
                    snapshot_epoch=rng.randrange(1000),
                    leader_epoch=3,
                    start_offset=rng.choice([-1, start]),
                    batches=batches,
                    delivery_complete_count=dcc,
                    layout="4.2",
                )
            )
    return keys, values


def generate(path: Path, records: int, seed: int) -> None:
    if path.exists() and (path / "_SUCCESS_N").read_text() == str(records):
        return
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.parquet"):
        old.unlink()
    rng = random.Random(seed)
    keys, values = _pool(20_000, rng)
    per_file = records // FILES
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for f in range(FILES):
        n = per_file if f < FILES - 1 else records - per_file * (FILES - 1)
        idx = [rng.randrange(len(keys)) for _ in range(n)]
        table = pa.Table.from_pydict(
            {
                "key": pa.array([keys[i] for i in idx], pa.binary()),
                "value": pa.array([values[i] for i in idx], pa.binary()),
                "topic": pa.array(["__share_group_state"] * n),
                "partition": pa.array([f] * n, pa.int32()),
                "offset": pa.array(range(n), pa.int64()),
                "timestamp": pa.array([start] * n, pa.timestamp("us", tz="UTC")),
                "timestampType": pa.array([0] * n, pa.int32()),
                "headers": pa.array([[]] * n, KAFKA_EXPORT_SCHEMA.field("headers").type),
            },
            schema=KAFKA_EXPORT_SCHEMA,
        )
        pq.write_table(table, path / f"part-{f:05d}.parquet", row_group_size=64 * 1024)
    (path / "_SUCCESS_N").write_text(str(records))


def _timed_rounds(actions: dict[str, Any], repeat: int) -> dict[str, list[float]]:
    """Run every action once per round, rounds interleaved, so load from elsewhere on the
    machine hits all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in actions}
    for _ in range(repeat):
        for name, action in actions.items():
            began = time.perf_counter()
            action()
            times[name].append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--data", default=str(ROOT / "bench-data" / "decode"))
    parser.add_argument("--engine", choices=["auto", "python", "jvm", "both"], default="auto")
    parser.add_argument("--no-naive", action="store_true", help="skip the row-at-a-time UDF")
    args = parser.parse_args()

    data = Path(args.data)
    began = time.perf_counter()
    generate(data, args.records, args.seed)
    prepared = time.perf_counter() - began
    print(f"data: {args.records:,} records in {data} ({prepared:.1f}s to prepare)")

    from pyspark.sql import functions as F

    from sharestate.decode import spark as spark_decode
    from sharestate.decode.columns import SHARE_STATE_RESULT_FIELDS
    from sharestate.job.session import local_session
    from sharestate.kafka.records import decode_share_state

    largest = max(p.stat().st_size for p in data.glob("*.parquet"))
    spark = local_session(
        app_name="sharestate-bench",
        conf={
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.files.maxPartitionBytes": str(largest + 1),
            "spark.sql.files.openCostInBytes": str(largest + 1),
            "spark.driver.memory": "4g",
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(data))
    partitions = df.rdd.getNumPartitions()

    def scan() -> None:
        df.select("key", "value").write.format("noop").mode("overwrite").save()

    def ours(engine: str) -> Any:
        def run() -> None:
            decoded = spark_decode.decode_share_state(df, engine=engine)
            decoded.all_rows.write.format("noop").mode("overwrite").save()

        return run

    engines = ["python", "jvm"] if args.engine == "both" else [args.engine]
    ours_actions = {
        ("ours" if len(engines) == 1 else f"ours_{engine}"): ours(engine) for engine in engines
    }

    # The naive UDF returns exactly what our decoder returns, same types.
    row_type = spark_decode.spark_type(SHARE_STATE_RESULT_FIELDS)
    n_fields = len(SHARE_STATE_RESULT_FIELDS)

    def decode_row(key: bytes | None, value: bytes | None) -> tuple[Any, ...]:
        try:
            row = decode_share_state(key, value)
        except Exception as err:
            return (*(None,) * (n_fields - 1), str(err))
        return (*(row[f.name] for f in row_type.fields[:-1]), None)

    naive_udf = F.udf(decode_row, row_type, useArrow=False)

    def naive() -> None:
        df.select(naive_udf("key", "value").alias("r")).select("r.*").write.format("noop").mode(
            "overwrite"
        ).save()

    for action in ours_actions.values():
        action()  # warm up Python workers and the JIT once, outside the timings
    results: dict[str, Any] = {
        "records": args.records,
        "partitions": partitions,
        "repeat": args.repeat,
        "engine": args.engine,
        "seconds": {},
    }
    actions = {"scan": scan, **ours_actions}
    if not args.no_naive:
        actions["naive_row_udf"] = naive
    results["seconds"] = _timed_rounds(actions, args.repeat)
    for name, times in results["seconds"].items():
        runs = [round(t, 2) for t in times]
        print(f"  {name:14s} median {statistics.median(times):7.2f}s  runs {runs}")
    median = {k: statistics.median(v) for k, v in results["seconds"].items()}
    rate = {k: args.records / v for k, v in median.items()}
    results["records_per_second"] = rate
    print(f"\nrecords/s on local[2], {partitions} input partitions, median of {args.repeat}:")
    for name in rate:
        print(f"  {name:14s} {rate[name]:>12,.0f}")
    if "ours_jvm" in rate:
        results["jvm_vs_python"] = rate["ours_jvm"] / rate["ours_python"]
        print(f"ours_jvm / ours_python = {results['jvm_vs_python']:.2f}x")
    for name in ours_actions:
        if "naive_row_udf" in rate:
            results[f"{name}_vs_naive"] = rate[name] / rate["naive_row_udf"]
            print(f"{name} / naive row UDF = {results[f'{name}_vs_naive']:.2f}x   (goal >= 5x)")
        results[f"{name}_vs_scan"] = rate[name] / rate["scan"]
        print(f"{name} / scan          = {results[f'{name}_vs_scan']:.0%}   (goal >= 30%)")
    out = ROOT / "bench-data" / "decode-results.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    settings = {"command": "bench/bench_decode.py", **vars(args), "spark": spark_settings(spark)}
    write_result("decode", settings, results, machine(spark))
    spark.stop()


if __name__ == "__main__":
    main()
