"""Following Kafka (`make bench`): the lag of `sharestate follow` on a real broker while
share groups write.

A broker of its own (tests/support/broker.py, Kafka's released jars), `sharestate follow
--every EVERY` on its `kafka://` (a process of its own, the project's session), and a steady
share-group workload beside it (Workload.java: RATE records a second for SECONDS, GROUPS
share groups of CONSUMERS consumers accepting, releasing and rejecting). Per record of
`__share_group_state` written after the follow's first round: the seconds from its write
(its timestamp, set by the broker) to the commit of `share_partition_history` that first
holds it (tests/support/following.py). After the follow stops, a full run over the topic:
the followed tables must equal it.

Goal (issue 41): the job keeps up with the workload, and every record's lag stays under two
trigger intervals.
Results go to bench/results/ (date, commit, machine, settings).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_results import machine_of_processes, write_result  # noqa: E402

from sharestate.job.config import parse_span  # noqa: E402
from tests.support.broker import BASE_PROPERTIES, DEFAULT_VERSION, Broker, artifacts  # noqa: E402
from tests.support.cli import run_sharestate  # noqa: E402
from tests.support.following import follow_beside, record_lags  # noqa: E402
from tests.support.tables import assert_same_tables  # noqa: E402

DELIVERY_COUNT_LIMIT = 5


def _quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", default="10s", help="follow's trigger interval")
    parser.add_argument("--rate", type=int, default=100, help="records a second produced")
    parser.add_argument("--seconds", type=int, default=120, help="how long the workload runs")
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2, help="per group")
    parser.add_argument("--seed", type=int, default=41)
    args = parser.parse_args()
    every = parse_span(args.every, "--every")
    work = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    broker = Broker(artifacts(DEFAULT_VERSION), work / "broker")
    broker.start()
    try:
        output = work / "followed"
        followed = follow_beside(
            broker,
            output,
            lambda: broker.run_workload(
                work / "workload.json",
                topic="work",
                groups=args.groups,
                consumers=args.consumers,
                rate=args.rate,
                seconds=args.seconds,
                seed=args.seed,
            ),
            every=args.every,
            quiet_seconds=3 * every,
            delivery_count_limit=DELIVERY_COUNT_LIMIT,
        )
        lags = record_lags(output)
        full = run_sharestate(
            "replay",
            "--share-state",
            f"kafka://{broker.bootstrap}",
            "--output",
            str(work / "full"),
            "--delivery-count-limit",
            str(DELIVERY_COUNT_LIMIT),
            "--state-topic-partitions",
            BASE_PROPERTIES["share.coordinator.state.topic.num.partitions"],
            timeout=900,
        )
        equal: bool | str = True
        try:
            assert full.returncode == 0, full.stdout + full.stderr
            assert_same_tables(output, work / "full")
        except AssertionError as differs:
            equal = str(differs)[:2000]
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    results: dict[str, Any] = {
        "workload": followed.load,
        "follow_exit_code": followed.returncode,
        "rounds_during_and_after_load": followed.rounds - followed.rounds_before_load,
        "load_seconds": round(followed.load_seconds, 1),
        "records_measured": len(lags),
        "lag_seconds": {
            "median": round(statistics.median(lags), 2) if lags else None,
            "p95": round(_quantile(lags, 0.95), 2) if lags else None,
            "max": round(max(lags), 2) if lags else None,
        },
        "two_intervals_seconds": 2 * every,
        "tables_equal_full_run": equal,
    }
    results["goals"] = {
        "lag_under_two_intervals": bool(lags) and max(lags) < 2 * every,
        "tables_equal_full_run": equal is True,
    }
    settings = {"command": "bench/bench_follow.py", **vars(args)}
    path = write_result("follow", settings, results, machine_of_processes())
    print(f"wrote {path}")
    print({key: results[key] for key in ("records_measured", "lag_seconds", "goals")})


if __name__ == "__main__":
    main()
