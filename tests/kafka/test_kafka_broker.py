"""The whole path against a real Kafka broker (issue 5).

A single-node KRaft broker from Kafka's released jars (`make setup-kafka`), a Java driver that
runs share groups on it (Driver.java: seeded ACCEPT / RELEASE / REJECT, lock time-outs, records
driven to the delivery-count limit, altered offsets, a deleted group, deleted offsets, a deleted
topic), Spark's Kafka source exporting both internal topics to Parquet and Delta as a user's
export job would, and then our job compared with what Kafka itself says:

* Admin `listShareGroupOffsets` (start offset, lag) per share-partition;
* Kafka's DumpLogSegments (`--share-group-state-decoder`, `--offsets-decoder`) over the broker's
  own segment files, field by field for every record;
* what the driver saw each record go through (ACCEPT, REJECT, RELEASE at the limit, ...);
* after a restart with pruning on, the log start Kafka pruned to and a replay of the pruned log.

Skipped only when the Kafka jars were not fetched (`make setup-kafka`, part of `make test`).
`make test` runs these (about 4 minutes); `make test-kafka` runs only the real-broker modules
(this one and test_follow_kafka.py) and adds the slow parts (SHARESTATE_KAFKA_FULL=1): here a
broker restart with pruning on, and a re-read of the Delta export.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate.decode.columns import GROUP_VALUE_COLUMNS
from sharestate.io import KAFKA_OFFSET_FETCHING_CONF
from sharestate.job import JobConfig, Results, compute, summarize
from sharestate.kafka.schemas import (
    CONSUMER_OFFSETS_TOPIC,
    SHARE_GROUP_RECORD_TYPES,
    SHARE_STATE_TOPIC,
)
from tests.support.broker import (
    BASE_PROPERTIES,
    DEFAULT_VERSION,
    Broker,
    DumpedRecord,
    KafkaArtifacts,
    KafkaSetupMissing,
    artifacts,
    export_topic,
)

pytestmark = pytest.mark.spark
#: `make test-kafka` sets this: also the broker restart with pruning and the Delta re-read.
FULL = os.environ.get("SHARESTATE_KAFKA_FULL") == "1"

SEED = 20261122
DELIVERY_COUNT_LIMIT = 3
LOCK_MS = 2000
ACKNOWLEDGED, ARCHIVED, AVAILABLE = 2, 4, 0
TOPICS = (SHARE_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
Key = tuple[str, str, int]  # (group_id, topic_id, partition)


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def kafka() -> KafkaArtifacts:
    try:
        return artifacts(DEFAULT_VERSION)
    except KafkaSetupMissing as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def broker(kafka: KafkaArtifacts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the module; its data, configs and logs stay in `broker.work`."""
    running = Broker(kafka, tmp_path_factory.mktemp("kafka-broker"))
    print(f"\nKafka {kafka.version} broker: work dir {running.work}")
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def scenario(broker: Broker) -> dict[str, Any]:
    """What the driver did and what Admin reported afterwards (driver.json)."""
    result: dict[str, Any] = broker.run_driver(
        broker.work / "driver.json",
        seed=SEED,
        delivery_count_limit=DELIVERY_COUNT_LIMIT,
        lock_ms=LOCK_MS,
    )
    expected = expected_outcomes(result)
    (broker.work / "expected_outcomes.json").write_text(
        json.dumps({"|".join(map(str, k)): v for k, v in expected.items()}, indent=0)
    )
    return result


@pytest.fixture(scope="session")
def exports(spark: SparkSession, broker: Broker, scenario: dict[str, Any]) -> dict[str, Path]:
    """Both topics exported to Parquet and to Delta: {"parquet/<topic>": path, ...}."""
    paths: dict[str, Path] = {}
    spark.conf.set(KAFKA_OFFSET_FETCHING_CONF, "true")
    try:
        for topic in TOPICS:
            # One snapshot for both formats ("latest" is resolved again by every action).
            df = export_topic(spark, broker.bootstrap, topic).localCheckpoint(eager=True)
            for fmt in ("parquet", "delta"):
                path = broker.work / "exports" / fmt / topic
                df.write.format(fmt).mode("overwrite").save(str(path))
                paths[f"{fmt}/{topic}"] = path
    finally:
        spark.conf.unset(KAFKA_OFFSET_FETCHING_CONF)
    # --end-offsets for the lag table: the end offsets the driver read after the scenario.
    ids = topic_ids(scenario)
    ends = [
        (topic, ids[topic], int(partition), int(end))
        for topic, by_partition in scenario["end_offsets"].items()
        for partition, end in by_partition.items()
    ]
    paths["end_offsets"] = broker.work / "exports" / "end_offsets"
    spark.createDataFrame(
        ends, "topic string, topic_id string, partition int, end_offset long"
    ).write.mode("overwrite").parquet(str(paths["end_offsets"]))
    return paths


@dataclass
class JobView:
    """Our job's tables collected to the driver, keyed for comparison."""

    results: Results
    records: list[dict[str, Any]]
    group_records: list[dict[str, Any]]
    state: dict[Key, dict[str, Any]]
    quarantine: int
    summary: dict[str, Any]
    poison_messages: list[dict[str, Any]]
    share_groups: dict[str, dict[str, Any]]
    lag: dict[Key, dict[str, Any]]
    pruning_cutoff: dict[int, dict[str, Any]]


def _rows(df: DataFrame | None, *order: str) -> list[dict[str, Any]]:
    if df is None:
        return []
    ordered = df.orderBy(*order) if order else df
    return [r.asDict(recursive=True) for r in ordered.collect()]


def run_job(
    spark: SparkSession,
    share_state: str,
    consumer_offsets: str,
    end_offsets: str | None = None,
    *,
    audits: bool = True,
) -> JobView:
    """Our job (`compute`) on one pair of exports; `audits=False` collects only the decoded
    records and the replayed state (quicker, for comparing sources)."""
    config = JobConfig(
        share_state=share_state,
        consumer_offsets=consumer_offsets,
        delivery_count_limit=DELIVERY_COUNT_LIMIT,
        end_offsets=end_offsets,
        state_topic_partitions=int(BASE_PROPERTIES["share.coordinator.state.topic.num.partitions"]),
    )
    results = compute(spark, config)
    records = _rows(results.share_state_records, "source_partition", "source_offset")
    group_records = _rows(results.share_group_records, "source_partition", "source_offset")
    state = {
        (r["group_id"], r["topic_id"], r["partition"]): r
        for r in _rows(results.share_partition_state)
    }
    view = JobView(results, records, group_records, state, 0, {}, [], {}, {}, {})
    if audits:
        view.quarantine = results.quarantine.count()
        view.summary = summarize(results)
        view.poison_messages = _rows(results.poison_messages)
        view.share_groups = {r["group_id"]: r for r in _rows(results.share_groups)}
        view.lag = {
            (r["group_id"], r["topic_id"], r["partition"]): r
            for r in _rows(results.share_partition_lag)
        }
        view.pruning_cutoff = {r["source_partition"]: r for r in _rows(results.pruning_cutoff)}
    results.unpersist()
    return view


@pytest.fixture(scope="session")
def job(spark: SparkSession, exports: dict[str, Path]) -> JobView:
    return run_job(
        spark,
        str(exports[f"parquet/{SHARE_STATE_TOPIC}"]),
        str(exports[f"parquet/{CONSUMER_OFFSETS_TOPIC}"]),
        str(exports["end_offsets"]),
    )


@pytest.fixture(scope="session")
def dumps(broker: Broker, scenario: dict[str, Any]) -> dict[str, list[DumpedRecord]]:
    return {
        SHARE_STATE_TOPIC: broker.dump_log(
            SHARE_STATE_TOPIC, "--share-group-state-decoder", "dump-share-group-state"
        ),
        CONSUMER_OFFSETS_TOPIC: broker.dump_log(
            CONSUMER_OFFSETS_TOPIC, "--offsets-decoder", "dump-consumer-offsets"
        ),
    }


# ---------------------------------------------------------------------------- expectations


def topic_ids(scenario: dict[str, Any]) -> dict[str, str]:
    return {name: t["topic_id"] for name, t in scenario["topics"].items()}


def admin_offsets(scenario: dict[str, Any]) -> dict[Key, dict[str, Any]]:
    """Admin listShareGroupOffsets, one row per share-partition Kafka reports."""
    rows: dict[Key, dict[str, Any]] = {}
    for group, entry in scenario["admin"]["list_share_group_offsets"].items():
        assert "error" not in entry, (group, entry)
        for row in entry["partitions"]:
            rows[(group, row["topic_id"], row["partition"])] = row
    return rows


def expected_outcomes(scenario: dict[str, Any]) -> dict[tuple[str, str, int, int], dict[str, Any]]:
    """Per (group, topic, partition, offset): the state and delivery count the driver's last
    delivery of it implies, and why. Offsets whose outcome the driver cannot know (a late
    acknowledgement that Kafka accepted anyway, a failed commit) are left out."""
    limit = scenario["delivery_count_limit"]
    by_offset: dict[tuple[str, str, int, int], list[dict[str, Any]]] = defaultdict(list)
    for event in scenario["events"]:
        key = (event["group"], event["topic"], event["partition"], event["offset"])
        by_offset[key].append(event)
    expected: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for key, events in by_offset.items():
        last = max(events, key=lambda e: (e["delivery_count"], e["time_ms"]))
        count, action, ok = last["delivery_count"], last["action"], last["ok"]
        if action == "TIMEOUT" and not ok:
            # The lock ran out before the acknowledgement: back to Available, or Archived on
            # the last allowed delivery.
            outcome = "archived_at_limit" if count >= limit else "released"
        elif not ok or action == "TIMEOUT":
            continue
        elif action == "ACCEPT":
            outcome = "acknowledged"
        elif action == "REJECT":
            outcome = "rejected"
        else:  # RELEASE
            outcome = "archived_at_limit" if count >= limit else "released"
        state = {
            "acknowledged": ACKNOWLEDGED,
            "rejected": ARCHIVED,
            "archived_at_limit": ARCHIVED,
            "released": AVAILABLE,
        }[outcome]
        expected[key] = {"outcome": outcome, "delivery_state": state, "delivery_count": count}
    return expected


def expected_poison_messages(scenario: dict[str, Any]) -> set[tuple[str, str, int, int]]:
    """(group, topic_id, partition, offset) the driver drove to the delivery-count limit and
    Kafka archived: what `poison_messages` should cover (as single offsets), for share-partitions
    still live. Offsets a REJECT archived on the last delivery are left out (their bytes are the
    same, see docs/kafka-formats.md)."""
    ids = topic_ids(scenario)
    return {
        (group, ids[topic], partition, offset)
        for (group, topic, partition, offset), e in expected_outcomes(scenario).items()
        if e["outcome"] == "archived_at_limit"
    }


def expected_share_groups(scenario: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What `share_groups` should say per group, from Admin describeShareGroups / listGroups."""
    listed = {g["group"] for g in scenario["admin"]["list_groups"]}
    out: dict[str, dict[str, Any]] = {}
    for group, described in scenario["admin"]["describe_share_groups"].items():
        out[group] = {
            "deleted": group not in listed,
            "group_epoch": described.get("group_epoch"),
            "members": len(described.get("members", [])),
        }
    return out


def expected_lag(scenario: dict[str, Any]) -> dict[Key, int | None]:
    """Admin's lag per live share-partition: what a lag table fed the same end offsets
    (`--end-offsets`, e.g. from `scenario["end_offsets"]`) should compute."""
    return {key: row["lag"] for key, row in admin_offsets(scenario).items()}


def live(job: JobView) -> dict[Key, dict[str, Any]]:
    return {k: v for k, v in job.state.items() if not v["deleted"]}


def batch_at(batches: list[dict[str, Any]], offset: int) -> dict[str, Any] | None:
    for b in batches:
        if b["first_offset"] <= offset <= b["last_offset"]:
            return b
    return None


# ---------------------------------------------------------------------------- tests


def test_driver_exercised_every_path(scenario: dict[str, Any], job: JobView) -> None:
    """The scenario did what it is for; prints the numbers."""
    actions = Counter((e["action"], e["ok"]) for e in scenario["events"])
    outcomes = Counter(e["outcome"] for e in expected_outcomes(scenario).values())
    produced = sum(sum(p.values()) for p in scenario["produced"].values())
    ops = {op["op"]: op["result"] for op in scenario["operations"]}
    types = Counter(r["record_type"] for r in job.records)
    print(
        f"\nKafka {scenario['kafka_version']}: produced {produced} records; "
        f"{len(scenario['events'])} deliveries {dict(actions)}; outcomes {dict(outcomes)}; "
        f"state records {dict(types)}; group records {len(job.group_records)}; "
        f"share-partitions {len(job.state)} ({len(live(job))} live); "
        f"driver {scenario['elapsed_ms']} ms"
    )
    assert scenario["kafka_version"] == DEFAULT_VERSION
    assert set(ops.values()) == {"ok"}, ops
    assert actions[("RELEASE", True)] and actions[("REJECT", True)] and actions[("ACCEPT", True)]
    assert actions[("TIMEOUT", False)] > 0, "no acquisition lock ran out"
    assert outcomes["archived_at_limit"] > 0, "no record reached the delivery-count limit"
    assert types["snapshot"] and types["update"] and types["tombstone"]
    # Cold-partition snapshots: WriteTimestamp moves on, CreateTimestamp stays.
    assert any(
        r["record_type"] == "snapshot" and r["write_timestamp"] > r["create_timestamp"]
        for r in job.records
    )
    assert job.quarantine == 0
    for source in ("share_state", "consumer_offsets"):
        assert job.summary["inputs"][source]["reconciled"], job.summary["inputs"][source]


def test_spark_default_offset_reader_skips_internal_topics(
    spark: SparkSession, broker: Broker, exports: dict[str, Path]
) -> None:
    """Spark's default (Admin-based) offset reader silently reads nothing from internal topics;
    the consumer-based one reads them. Our kafka:// input sets it (sharestate.io)."""
    assert spark.conf.get(KAFKA_OFFSET_FETCHING_CONF, "false") == "false"
    for topic in TOPICS:
        assert export_topic(spark, broker.bootstrap, topic).count() == 0, topic
        assert spark.read.parquet(str(exports[f"parquet/{topic}"])).count() > 0, topic


def test_start_offsets_match_admin(scenario: dict[str, Any], job: JobView) -> None:
    """Admin's start offset (DescribeShareGroupOffsets -> ReadShareGroupStateSummary, i.e. the
    persisted StartOffset) equals our replayed `start_offset`, for every share-partition Kafka
    reports; and our live share-partitions are exactly the ones Kafka reports."""
    admin = admin_offsets(scenario)
    ours = live(job)
    assert set(ours) == set(admin), {
        "only ours": sorted(set(ours) - set(admin)),
        "only Kafka's": sorted(set(admin) - set(ours)),
    }
    differences = {
        key: (ours[key]["start_offset"], row["start_offset"])
        for key, row in admin.items()
        if ours[key]["start_offset"] != row["start_offset"]
    }
    assert not differences, differences
    # The lag table (audits), fed the same end offsets, says what Admin says.
    assert {k: v["lag"] for k, v in job.lag.items()} == expected_lag(scenario)
    # Kafka reports the persisted start offset; the share-partition leader moves past leading
    # terminal batches on load (our effective_start_offset). Where they differ, Admin has the
    # persisted one.
    effective_differs = {
        key: (ours[key]["start_offset"], ours[key]["effective_start_offset"])
        for key in admin
        if ours[key]["effective_start_offset"] != ours[key]["start_offset"]
    }
    print(f"\n{len(admin)} share-partitions compared; effective != start: {effective_differs}")
    # Altered offsets: Admin and we both show the values set on the empty group.
    ids = topic_ids(scenario)
    assert ours[("g-reset", ids["payments"], 0)]["start_offset"] == 5
    assert ours[("g-reset", ids["payments"], 1)]["start_offset"] == 70
    assert ours[("g-reset", ids["payments"], 0)]["state_batches"] == []


def test_deleted_groups_topics_and_offsets_are_gone(scenario: dict[str, Any], job: JobView) -> None:
    ids = topic_ids(scenario)
    deleted = {k for k, v in job.state.items() if v["deleted"]}
    # Every share-partition of the deleted group, the deleted topic, and the deleted offsets.
    assert {k for k in job.state if k[0] == "g-deleted"} <= deleted
    assert {k for k in job.state if k[1] == ids["doomed"]} <= deleted
    assert {k for k in job.state if k[:2] == ("g-offsets-deleted", ids["payments"])} <= deleted
    assert any(k[0] == "g-deleted" for k in deleted)
    assert any(k[1] == ids["doomed"] for k in deleted)
    assert scenario["admin"]["list_share_group_offsets"]["g-deleted"] == {"partitions": []}
    assert (
        "GroupIdNotFoundException"
        in scenario["admin"]["describe_share_groups"]["g-deleted"]["error"]
    )
    # Nothing else is deleted.
    assert all(
        k[0] == "g-deleted"
        or k[1] == ids["doomed"]
        or k[:2] == ("g-offsets-deleted", ids["payments"])
        for k in deleted
    )


def _expected_share_state_row(record: DumpedRecord) -> dict[str, Any]:
    key = record.key["data"]
    value = record.payload["data"] if record.payload is not None else {}
    return {
        "source_partition": record.partition,
        "source_offset": record.offset,
        "source_timestamp_ms": record.create_time,
        "key_size": record.key_size,
        "value_size": record.value_size,
        "record_type": "tombstone"
        if record.payload is None
        else ("snapshot" if record.key["type"] == "0" else "update"),
        "value_version": None if record.payload is None else int(record.payload["version"]),
        "group_id": key["groupId"],
        "topic_id": key["topicId"],
        "partition": key["partition"],
        "snapshot_epoch": value.get("snapshotEpoch"),
        "state_epoch": value.get("stateEpoch"),
        "leader_epoch": value.get("leaderEpoch"),
        "start_offset": value.get("startOffset"),
        "create_timestamp": value.get("createTimestamp"),
        "write_timestamp": value.get("writeTimestamp"),
        # Kafka leaves the tag (and the JSON field) out at its default, -1.
        "delivery_complete_count": value.get("deliveryCompleteCount"),
        "state_batches": [
            {
                "first_offset": b["firstOffset"],
                "last_offset": b["lastOffset"],
                "delivery_state": b["deliveryState"],
                "delivery_count": b["deliveryCount"],
            }
            for b in value.get("stateBatches", [])
        ],
    }


def _our_share_state_row(row: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    out = {name: row[name] for name in fields if name in row}
    out["source_timestamp_ms"] = int(row["source_timestamp"].timestamp() * 1000)
    out["key_size"] = len(row["key"]) if row.get("key") is not None else None
    out["value_size"] = -1 if row.get("value") is None else len(row["value"])
    return out


def test_share_state_records_match_dump_log_segments(
    job: JobView,
    dumps: dict[str, list[DumpedRecord]],
    exports: dict[str, Path],
    spark: SparkSession,
) -> None:
    """Every `__share_group_state` record, field by field, as Kafka's DumpLogSegments decodes it
    from the broker's segment files."""
    dumped = {(r.partition, r.offset): r for r in dumps[SHARE_STATE_TOPIC]}
    # Key and value sizes come from the export's bytes.
    raw = {
        (r["partition"], r["offset"]): (r["key"], r["value"])
        for r in spark.read.parquet(str(exports[f"parquet/{SHARE_STATE_TOPIC}"]))
        .select("partition", "offset", "key", "value")
        .collect()
    }
    ours = {(r["source_partition"], r["source_offset"]): r for r in job.records}
    assert set(ours) == set(dumped), {
        "only ours": sorted(set(ours) - set(dumped))[:10],
        "only DumpLogSegments": sorted(set(dumped) - set(ours))[:10],
    }
    mismatches = []
    for position, record in dumped.items():
        expected = _expected_share_state_row(record)
        key, value = raw[position]
        row = {**ours[position], "key": key, "value": value}
        got = _our_share_state_row(row, list(expected))
        if got != expected:
            mismatches.append((position, expected, got))
    print(f"\n{len(dumped)} __share_group_state records compared field by field")
    assert not mismatches, mismatches[:3]
    layouts = Counter(r["layout"] for r in job.records)
    assert set(layouts) <= {"4.1", "4.2", None}, layouts


SPARK_READER_GROUP = "spark-kafka-relation-"


def is_spark_reader_record(key: dict[str, Any]) -> bool:
    """A GroupMetadata record of the classic group Spark's consumer-based offset reader joins."""
    return key["type"] == "2" and key["data"]["group"].startswith(SPARK_READER_GROUP)


def without_classic_groups(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Group records other than classic GroupMetadata (type 2). The scenario has no classic
    groups; the only ones are Spark's own readers', which every read of the topic adds
    (test_consumer_offsets_records_match_dump_log_segments checks that)."""
    return [r for r in rows if r["record_type_id"] != 2]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _snake_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_snake(k): _snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake_keys(v) for v in value]
    return value


def test_consumer_offsets_records_match_dump_log_segments(
    job: JobView, dumps: dict[str, list[DumpedRecord]]
) -> None:
    """Every `__consumer_offsets` record, field by field, as DumpLogSegments decodes it."""
    dumped = {(r.partition, r.offset): r for r in dumps[CONSUMER_OFFSETS_TOPIC]}
    ours = {(r["source_partition"], r["source_offset"]): r for r in job.group_records}
    assert not set(ours) - set(dumped), sorted(set(ours) - set(dumped))[:10]
    # Appended after the export: only the classic-group records of Spark's own readers (the
    # consumer-based offset reader joins a group to `subscribe`).
    later = [dumped[p] for p in sorted(set(dumped) - set(ours))]
    assert all(is_spark_reader_record(r.key) for r in later), [r.line for r in later][:3]
    mismatches = []
    for position, row in ours.items():
        record = dumped[position]
        rtype = int(record.key["type"])
        key = _snake_keys(record.key["data"])
        expected: dict[str, Any] = {
            "record_type_id": rtype,
            "tombstone": record.payload is None,
        }
        if rtype in SHARE_GROUP_RECORD_TYPES:
            expected["group_id"] = key.get("group_id")
            expected["member_id"] = key.get("member_id")
        value = _snake_keys(record.payload["data"]) if record.payload is not None else {}
        if record.payload is not None and rtype in SHARE_GROUP_RECORD_TYPES:
            expected["value_version"] = int(record.payload["version"])
        for column, (column_type, field_name, _) in GROUP_VALUE_COLUMNS.items():
            if column_type == rtype and record.payload is not None:
                # Kafka omits a tagged field at its default; we report it as not on the
                # wire (null), as in test_golden.
                expected[column] = value.get(field_name)
        got = {name: row[name] for name in expected}
        if got != expected:
            mismatches.append((position, record.line, got))
    print(
        f"\n{len(ours)} __consumer_offsets records compared field by field "
        f"({sum(r['is_share_record'] for r in ours.values())} share-group records)"
    )
    assert not mismatches, mismatches[:3]


def test_parquet_delta_and_kafka_uri_agree(
    spark: SparkSession, broker: Broker, exports: dict[str, Path], job: JobView
) -> None:
    """The same records and state from `kafka://HOST:PORT` (and, in `make test-kafka`, from
    the Delta export) as from the Parquet export."""
    sources = [(f"kafka://{broker.bootstrap}", f"kafka://{broker.bootstrap}")]
    if FULL:
        sources.append(
            (
                str(exports[f"delta/{SHARE_STATE_TOPIC}"]),
                str(exports[f"delta/{CONSUMER_OFFSETS_TOPIC}"]),
            )
        )
    for share_state, offsets in sources:
        other = run_job(spark, share_state, offsets, audits=False)
        assert other.records == job.records, share_state
        # Reading __consumer_offsets through Spark adds its own classic-group records to it.
        assert without_classic_groups(other.group_records) == without_classic_groups(
            job.group_records
        ), share_state
        assert other.state == job.state, share_state


def test_driver_outcomes_match_replayed_batches(scenario: dict[str, Any], job: JobView) -> None:
    """Each offset the driver saw ends where its last delivery says: Acknowledged after
    ACCEPT, Archived after REJECT or after RELEASE / lock time-out on the last allowed delivery,
    Available (same delivery count) after RELEASE / time-out before it; offsets below the start
    offset were all finished. g-reset is left out: altering offsets starts it afresh."""
    ids = topic_ids(scenario)
    ours = live(job)
    checked, below_start, wrong = 0, 0, []
    for (group, topic, partition, offset), want in expected_outcomes(scenario).items():
        key = (group, ids[topic], partition)
        if group == "g-reset" or key not in ours:
            continue
        state = ours[key]
        if offset < state["start_offset"]:
            below_start += 1
            if want["outcome"] == "released":
                wrong.append((key, offset, want, "below the start offset"))
            continue
        batch = batch_at(state["state_batches"], offset)
        got = None if batch is None else (batch["delivery_state"], batch["delivery_count"])
        if got != (want["delivery_state"], want["delivery_count"]):
            wrong.append((key, offset, want, got))
        checked += 1
    print(f"\n{checked} offsets checked in batches, {below_start} below the start offset")
    assert checked > 100
    assert not wrong, wrong[:5]
    # Offsets never handed to the application are Available with no delivery, or not in batches.
    delivered = {
        (e["group"], ids[e["topic"]], e["partition"], e["offset"]) for e in scenario["events"]
    }
    for key, state in ours.items():
        if key[0] == "g-reset":
            continue
        for b in state["state_batches"]:
            for offset in range(b["first_offset"], b["last_offset"] + 1):
                if (*key, offset) not in delivered:
                    assert b["delivery_state"] == AVAILABLE, (key, offset, b)


def test_poison_messages_match_driver(scenario: dict[str, Any], job: JobView) -> None:
    """`poison_messages` (archived at the delivery-count limit) holds exactly offsets the
    driver delivered for the last allowed time, and every offset the driver drove to the
    limit that the final state still holds."""
    ids = topic_ids(scenario)
    ours = {
        (r["group_id"], r["topic_id"], r["partition"], offset)
        for r in job.poison_messages
        for offset in range(r["first_offset"], r["last_offset"] + 1)
    }
    # Any delivery at the limit can end archived there (RELEASE, REJECT, a lock time-out).
    possible = {
        (e["group"], ids[e["topic"]], e["partition"], e["offset"])
        for e in scenario["events"]
        if e["delivery_count"] >= DELIVERY_COUNT_LIMIT
    }
    assert ours <= possible, sorted(ours - possible)[:10]
    live_state = live(job)
    required = set()
    for group, topic_id, partition, offset in expected_poison_messages(scenario):
        state = live_state.get((group, topic_id, partition))
        if group != "g-reset" and state is not None and offset >= state["start_offset"]:
            required.add((group, topic_id, partition, offset))
            batch = batch_at(state["state_batches"], offset)
            assert batch is not None, (group, topic_id, partition, offset, state)
            assert batch["delivery_state"] == ARCHIVED
            assert batch["delivery_count"] >= DELIVERY_COUNT_LIMIT
    assert required and required <= ours, sorted(required - ours)[:10]
    print(f"\n{len(ours)} poison offsets; {len(required)} required still in state")


def test_lag_matches_admin(scenario: dict[str, Any], job: JobView) -> None:
    """Admin's lag (KIP-1226) = end offset - start offset - DeliveryCompleteCount, with our
    replayed start offset and DeliveryCompleteCount and the end offsets the driver read."""
    ids = {v: k for k, v in topic_ids(scenario).items()}
    ours = live(job)
    differences = {}
    for key, lag in expected_lag(scenario).items():
        end = scenario["end_offsets"][ids[key[1]]][str(key[2])]
        state = ours[key]
        computed = end - state["start_offset"] - max(state["delivery_complete_count"], 0)
        if computed != lag:
            differences[key] = {"admin": lag, "ours": computed, "end": end, "state": state}
    assert not differences, differences


def test_share_groups_as_admin_reports(scenario: dict[str, Any], job: JobView) -> None:
    """`share_groups` (from `__consumer_offsets`) against describeShareGroups / listGroups:
    deletion, group epoch, members, and the initialized partitions Admin lists offsets for."""
    ids = {v: k for k, v in topic_ids(scenario).items()}
    admin = admin_offsets(scenario)
    for group, want in expected_share_groups(scenario).items():
        row = job.share_groups[group]
        assert row["deleted"] == want["deleted"], (group, row)
        if want["deleted"]:
            continue
        assert row["group_epoch"] == want["group_epoch"], (group, row)
        assert row["member_count"] == want["members"] == 0, (group, row)
        initialized = {
            (t["topic_id"], p) for t in row["initialized_topics"] or [] for p in t["partitions"]
        }
        listed = {(k[1], k[2]) for k in admin if k[0] == group}
        assert initialized == listed, (group, initialized, listed)
        assert not row["initializing_topics"] and not row["deleting_topics"], (group, row)
        assert set(row["topic_names"]) == {ids[t] for t, _ in listed}, (group, row)


def test_an_incremental_run_follows_the_topic(
    spark: SparkSession,
    broker: Broker,
    exports: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """`--mode incremental` on `kafka://`: Spark's Kafka source delivers the records its
    stream has not read. The first run saw an export of each partition's earlier records;
    the next reads the topic through its stream (a new one: the input's path changed), finds
    the earlier records processed, applies the rest, and the tables end as a full run over
    the topic; a run after it finds nothing new."""
    from sharestate.job.run import main
    from tests.support.tables import assert_same_tables

    work = tmp_path_factory.mktemp("follow-kafka")
    topic = f"kafka://{broker.bootstrap}"
    whole = spark.read.parquet(str(exports[f"parquet/{SHARE_STATE_TOPIC}"]))
    early = whole.filter("offset < 20")
    early.write.parquet(str(work / "early"))

    def run(share_state: str, output: str, mode: str) -> dict[str, Any]:
        config = JobConfig(
            share_state=share_state,
            output=output,
            mode=mode,
            delivery_count_limit=DELIVERY_COUNT_LIMIT,
            state_topic_partitions=int(
                BASE_PROPERTIES["share.coordinator.state.topic.num.partitions"]
            ),
        )
        return main(spark, config)

    out = str(work / "out")
    assert run(str(work / "early"), out, "incremental")["mode"] == "full"
    summary = run(topic, out, "incremental")
    inputs = summary["inputs"]["share_state"]
    assert summary["mode"] == "incremental", summary
    assert inputs["export_read_whole"] and inputs["already_processed"] == early.count()
    assert inputs["rows_read"] == whole.count() - early.count() > 0
    run(topic, str(work / "full"), "full")
    assert_same_tables(work / "out", work / "full")
    assert run(topic, out, "incremental").get("nothing_new") is True


def test_pruned_log_replays_to_the_same_state(
    spark: SparkSession, broker: Broker, scenario: dict[str, Any], job: JobView
) -> None:
    """Restart with pruning on: Kafka deletes `__share_group_state` up to each partition's
    lastRedundantOffset (minimum over live keys of their latest snapshot's offset). The pruned
    log, read through `kafka://`, replays to exactly the same live states. Runs last: it
    restarts the broker. About a minute: only in `make test-kafka`."""
    if not FULL:
        pytest.skip("slow (broker restart with pruning): runs in `make test-kafka`")
    # Our prediction of Kafka's cut-off from the full export (the pruning_cutoff table).
    cutoff = {p: row["cutoff_offset"] for p, row in job.pruning_cutoff.items() if row["prunable"]}
    broker.restart({"share.coordinator.state.topic.prune.interval.ms": "1000"})
    deadline = time.monotonic() + 60
    starts: dict[int, int] = {}
    while time.monotonic() < deadline:
        starts = broker.pruned_log_starts()
        if all(starts.get(p) == c for p, c in cutoff.items()):
            break
        time.sleep(1)
    time.sleep(3)  # nothing more comes
    starts = broker.pruned_log_starts()
    print(f"\npruned to {starts}; predicted {cutoff}")
    assert starts == cutoff
    pruned = run_job(
        spark, f"kafka://{broker.bootstrap}", f"kafka://{broker.bootstrap}", audits=False
    )
    assert len(pruned.records) < len(job.records)
    for partition, start in starts.items():
        offsets = [r["source_offset"] for r in pruned.records if r["source_partition"] == partition]
        assert min(offsets) == start, partition
    assert {k: v["start_offset"] for k, v in live(pruned).items()} == {
        k: v["start_offset"] for k, v in live(job).items()
    }
    for key, state in live(job).items():
        assert pruned.state[key]["state_batches"] == state["state_batches"], key
