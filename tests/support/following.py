"""`sharestate follow` on `kafka://` while share consumers write: the follow process started
on a broker no share group has used yet, a short warm-up workload (Workload.java) for its
first round, then a load run beside it (Driver.java's scenario, or a longer workload), and
each record's lag from its write in `__share_group_state` to the first commit of the output
that holds it. Used by the real-broker test of following and by bench/bench_follow.py."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from deltalake import DeltaTable

from tests.support.broker import BASE_PROPERTIES, Broker
from tests.support.cli import start_sharestate

#: The table whose commits tell when a record reached the output: one row per applied record.
HISTORY_TABLE = "share_partition_history"


@dataclass
class Followed:
    """What a follow beside the scenario did."""

    #: What the load returned (its JSON).
    load: Any
    console: str
    returncode: int
    #: run_summary commits: one per round that wrote tables.
    rounds: int
    #: run_summary commits when the load started (the first round's included).
    rounds_before_load: int
    load_seconds: float


def commits(table: Path) -> int:
    """How many commits a Delta table has (0 before its first)."""
    log = table / "_delta_log"
    return len(list(log.glob("*.json"))) if log.is_dir() else 0


class _Console:
    """A child's stdout, read as it comes (a thread), so a test can wait for a line."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert child.stdout is not None
        stdout = child.stdout
        self.reader = threading.Thread(target=lambda: self.lines.extend(stdout), daemon=True)
        self.reader.start()

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(
        self, condition: Callable[[], bool], child: subprocess.Popen[str], what: str
    ) -> None:
        deadline = time.monotonic() + 300
        while not condition():
            if child.poll() is not None:
                self.reader.join(5)
                raise AssertionError(f"follow ended early ({child.returncode}): {self.text()}")
            if time.monotonic() > deadline:
                child.kill()
                self.reader.join(5)
                raise AssertionError(f"no {what} in 300 s: {self.text()}")
            time.sleep(0.2)


def follow_beside(
    broker: Broker,
    output: Path,
    load: Callable[[], Any],
    *,
    every: str,
    quiet_seconds: float,
    delivery_count_limit: int,
    before_load: Callable[[], Any] | None = None,
) -> Followed:
    """Start `sharestate follow --every EVERY` on the broker's `kafka://` and wait for its
    first round, which finds no `__share_group_state` yet (no share group has stored state);
    run a warm-up workload (its group deleted at the end, so it does not hold back Kafka's
    pruning) and wait for the round that reads it (a full run); call `before_load`; run
    `load` beside the rounds; then wait until no round has written for `quiet_seconds` and stop
    the process with SIGTERM (between rounds)."""
    child = start_sharestate(
        "follow",
        "--share-state",
        f"kafka://{broker.bootstrap}",
        "--output",
        str(output),
        "--every",
        every,
        "--delivery-count-limit",
        str(delivery_count_limit),
        "--state-topic-partitions",
        BASE_PROPERTIES["share.coordinator.state.topic.num.partitions"],
    )
    summary = output / "run_summary"
    console = _Console(child)
    try:
        console.wait_for(lambda: "looking again next round" in console.text(), child, "first round")
        broker.run_workload(
            output.parent / f"{output.name}-warm-up.json",
            topic="warm-up",
            groups=1,
            consumers=1,
            rate=20,
            seconds=1,
            seed=1,
            delete=True,
        )
        console.wait_for(lambda: commits(summary) >= 1, child, "round over the warm-up")
        if before_load is not None:
            before_load()
        rounds_before_load = commits(summary)
        started = time.monotonic()
        loaded = load()
        load_seconds = time.monotonic() - started
        seen, since = commits(summary), time.monotonic()
        while time.monotonic() - since < quiet_seconds:
            if child.poll() is not None:
                console.reader.join(5)
                raise AssertionError(f"follow ended early: {console.text()}")
            if (now := commits(summary)) != seen:
                seen, since = now, time.monotonic()
            time.sleep(0.2)
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        console.reader.join(10)
    return Followed(
        loaded,
        console.text(),
        child.returncode,
        commits(summary),
        rounds_before_load,
        load_seconds,
    )


def record_lags(output: Path) -> list[float]:
    """Per record written after the output's first commit: the seconds from its write (its
    timestamp in `__share_group_state`, which the broker sets when it appends it) to the
    commit of `share_partition_history` that first holds its row."""
    table = output / HISTORY_TABLE
    history = sorted(DeltaTable(str(table)).history(), key=lambda commit: commit["version"])
    first_commit_ms = history[0]["timestamp"]
    seen: set[tuple[int, int]] = set()
    lags: list[float] = []
    for commit in history:
        rows = DeltaTable(str(table), version=commit["version"]).to_pyarrow_table(
            columns=["source_partition", "source_offset", "source_timestamp"]
        )
        written_ms = pc.cast(rows["source_timestamp"], "timestamp[ms]").cast("int64")
        for partition, offset, written in zip(
            rows["source_partition"].to_pylist(),
            rows["source_offset"].to_pylist(),
            written_ms.to_pylist(),
            strict=True,
        ):
            if (partition, offset) in seen:
                continue
            seen.add((partition, offset))
            if written > first_commit_ms:
                lags.append((commit["timestamp"] - written) / 1000)
    return lags
