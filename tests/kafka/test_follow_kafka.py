"""`sharestate follow` on a real broker while share consumers write (issue 41).

A broker of its own (the module of test_kafka_broker.py has one whose scenario ran before
any test), `sharestate follow --every 2s` on its `kafka://` started before any share group
exists (its rounds wait for `__share_group_state`), a warm-up workload for its first round,
then the share-group scenario of Driver.java beside the rounds: groups, consumers that
accept, release and reject, lock time-outs, a deleted group and topic. Each round after the
first is an incremental run on Spark's Kafka source. After the last round the tables equal
a full run over a lake export of the same records (Spark's Kafka batch source to Parquet).
What following costs in time (the lag of each record) is bench/bench_follow.py's.

Then a run that fell behind: its output was made after the warm-up, the broker restarts
with pruning on and Kafka deletes records it never read; its next incremental run reports
each such hole as a `source_offset_gap` finding and goes on.

About four minutes (a broker, the scenario, a follow process, a restart): only in `make
test-kafka` (SHARESTATE_KAFKA_FULL=1). `make test` runs an incremental run on `kafka://`
in test_kafka_broker.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sharestate.io import KAFKA_OFFSET_FETCHING_CONF
from sharestate.job import JobConfig
from sharestate.job.run import main
from sharestate.kafka.schemas import SHARE_STATE_TOPIC
from tests.support.broker import (
    BASE_PROPERTIES,
    DEFAULT_VERSION,
    Broker,
    KafkaSetupMissing,
    artifacts,
    export_topic,
)
from tests.support.following import HISTORY_TABLE, Followed, follow_beside, record_lags
from tests.support.tables import assert_same_tables

#: `make test-kafka` sets this: the tests of this module run only then.
FULL = os.environ.get("SHARESTATE_KAFKA_FULL") == "1"
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not FULL, reason="slow (a broker, the scenario beside a follow process): `make test-kafka`"
    ),
]
STATE_PARTITIONS = int(BASE_PROPERTIES["share.coordinator.state.topic.num.partitions"])

SEED = 20261128
DELIVERY_COUNT_LIMIT = 3
LOCK_MS = 2000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    try:
        kafka = artifacts(DEFAULT_VERSION)
    except KafkaSetupMissing as missing:
        pytest.skip(str(missing))
    running = Broker(kafka, tmp_path_factory.mktemp("kafka-follow"))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _run(spark: SparkSession, share_state: str, output: Path, mode: str) -> dict[str, Any]:
    config = JobConfig(
        share_state=share_state,
        output=str(output),
        mode=mode,
        delivery_count_limit=DELIVERY_COUNT_LIMIT,
        state_topic_partitions=STATE_PARTITIONS,
    )
    return main(spark, config)


@dataclass
class Following:
    followed: Followed
    output: Path
    #: An output made by one run after the warm-up, before the scenario: a job fallen behind.
    behind: Path


@pytest.fixture(scope="module")
def following(
    spark: SparkSession, broker: Broker, tmp_path_factory: pytest.TempPathFactory
) -> Following:
    work = tmp_path_factory.mktemp("following")
    output, behind = work / "followed", work / "behind"

    def scenario() -> object:
        return broker.run_driver(
            work / "driver.json",
            seed=SEED,
            delivery_count_limit=DELIVERY_COUNT_LIMIT,
            lock_ms=LOCK_MS,
        )

    def fall_behind() -> None:
        _run(spark, f"kafka://{broker.bootstrap}", behind, "incremental")

    followed = follow_beside(
        broker,
        output,
        scenario,
        every="2s",
        quiet_seconds=10,
        delivery_count_limit=DELIVERY_COUNT_LIMIT,
        before_load=fall_behind,
    )
    return Following(followed, output, behind)


def test_follow_keeps_up_with_share_groups_writing(
    spark: SparkSession, broker: Broker, following: Following, tmp_path: Path
) -> None:
    followed, output = following.followed, following.output
    assert followed.returncode == 0, followed.console
    assert "stopping once this round ends" in followed.console
    assert not list(output.glob("*/_delta_log/*.tmp")), "a commit was left half-written"
    assert "no topic __share_group_state yet; looking again next round" in followed.console
    # Rounds applied the scenario's records while it wrote them.
    assert followed.rounds - followed.rounds_before_load >= 2, followed.console
    assert record_lags(output), "no record written while following reached the output"

    # The same records as a user's lake export: the topic through Spark's Kafka batch source.
    export = tmp_path / "export"
    spark.conf.set(KAFKA_OFFSET_FETCHING_CONF, "true")
    try:
        export_topic(spark, broker.bootstrap, SHARE_STATE_TOPIC).write.parquet(str(export))
    finally:
        spark.conf.unset(KAFKA_OFFSET_FETCHING_CONF)
    full = _run(spark, str(export), tmp_path / "full", "full")
    records = full["share_state_records"]["by_record_type"]
    assert spark.read.format("delta").load(str(output / HISTORY_TABLE)).count() == sum(
        records.values()
    )
    assert_same_tables(output, tmp_path / "full")


def test_offsets_pruned_before_a_run_read_them_are_a_gap_finding(
    spark: SparkSession, broker: Broker, following: Following
) -> None:
    """The run behind read the warm-up only. Kafka then prunes `__share_group_state` (a
    restart with pruning on; the warm-up's group was deleted, so the scenario's snapshots
    set the cut-off) past offsets the run never read. Its next incremental run goes on from
    the log start (Spark's Kafka source, failOnDataLoss=false) and reports each hole as a
    `source_offset_gap` warning: the partition, the first offset lost, how many. Runs last:
    it restarts the broker."""
    records = spark.read.format("delta").load(str(following.behind / "share_state_records"))
    read_ends = {
        row["source_partition"]: row["end"]
        for row in records.groupBy("source_partition")
        .agg({"source_offset": "max"})
        .withColumnRenamed("max(source_offset)", "end")
        .collect()
    }
    broker.restart({"share.coordinator.state.topic.prune.interval.ms": "1000"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        start > read_ends[p] + 1
        for p, start in broker.pruned_log_starts().items()
        if p in read_ends
    ):
        time.sleep(1)
    time.sleep(3)  # the other partitions' pruning too
    starts = broker.pruned_log_starts()
    lost = {
        p: (read_ends[p] + 1, start - read_ends[p] - 1)
        for p, start in starts.items()
        if p in read_ends and start > read_ends[p] + 1
    }
    print(f"\nread up to {read_ends}; pruned to {starts}; lost {lost}")
    assert lost, "Kafka pruned nothing the run behind had not read"

    summary = _run(spark, f"kafka://{broker.bootstrap}", following.behind, "incremental")
    assert summary["mode"] == "incremental", summary
    findings = spark.read.format("delta").load(str(following.behind / "findings"))
    gaps = {
        row["source_partition"]: (row["source_offset"], row["affected"])
        for row in findings.filter("code = 'source_offset_gap' AND source = 'share_state'")
        .filter("severity = 'warning'")
        .collect()
    }
    assert gaps == lost
