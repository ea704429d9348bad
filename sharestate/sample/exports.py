"""Sample exports of `__share_group_state` and `__consumer_offsets` for `make run` and demos.

The share-state records come from `sharestate.sample.simulate` (share groups fetching,
acknowledging, releasing and rejecting records, written the way Kafka's share coordinator
writes them, with a few hot share-partitions). The consumer-offsets export holds the share
groups' own records for the same groups: group metadata, a member with its assignment, the
initialized topic-partitions; and, for each deleted group, the tombstones in the order
Kafka writes them.

The exports also carry what a real one can: a duplicated row and two damaged rows, so a
run shows deduplication and quarantine at work.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from sharestate.kafka import schemas as s
from sharestate.kafka.partitioning import offsets_topic_partition
from sharestate.kafka.records import decode_group_record
from sharestate.kafka.wire import Writer
from sharestate.sample import encode
from sharestate.sample.simulate import SimulationSpec, deleted_groups, share_partitions, simulate

#: The schema Spark's Kafka source produces; exports keep it.
KAFKA_EXPORT_SCHEMA: Final = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field(
            "headers",
            pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
        ),
    ]
)


@dataclass
class SampleSpec:
    records: int = 3_000
    share_partitions: int = 48
    skew: float = 1.0
    records_per_snapshot: int = 20
    delivery_count_limit: int = 5
    state_topic_partitions: int = 50
    seed: int = 7
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 1, 12, 0, tzinfo=UTC))

    def simulation(self) -> SimulationSpec:
        return SimulationSpec(
            records=self.records,
            share_partitions=self.share_partitions,
            skew=self.skew,
            records_per_snapshot=self.records_per_snapshot,
            delivery_count_limit=self.delivery_count_limit,
            state_topic_partitions=self.state_topic_partitions,
            seed=self.seed,
            start=self.start,
            workers=1,
        )


class _Log:
    """Appends records per state-topic partition with consecutive offsets and rising time."""

    def __init__(self, topic: str, start: datetime) -> None:
        self.topic = topic
        self.rows: list[dict[str, Any]] = []
        self.next_offset: dict[int, int] = {}
        self.clock = start

    def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        self.clock += timedelta(milliseconds=250)
        offset = self.next_offset.get(partition, 0)
        self.next_offset[partition] = offset + 1
        self.rows.append(
            {
                "key": key,
                "value": value,
                "topic": self.topic,
                "partition": partition,
                "offset": offset,
                "timestamp": self.clock,
                "timestampType": 0,
                "headers": [],
            }
        )

    def table(self) -> pa.Table:
        return pa.Table.from_pylist(self.rows, schema=KAFKA_EXPORT_SCHEMA)


def generate(spec: SampleSpec) -> tuple[pa.Table, pa.Table]:
    """(share-state export, consumer-offsets export) as Arrow tables of the Kafka schema."""
    rng = random.Random(spec.seed)
    simulation = spec.simulation()
    state = simulate(simulation)
    offsets_log = _Log(s.CONSUMER_OFFSETS_TOPIC, spec.start)
    ids = share_partitions(simulation)
    groups = sorted({sp.group_id for sp in ids})
    for group in groups:
        topics = {sp.topic_name: sp.topic_id for sp in ids if sp.group_id == group}
        partitions = sorted({sp.partition for sp in ids if sp.group_id == group})
        _group_records(offsets_log, group, topics, partitions, rng)
    offsets_log.clock = spec.start + timedelta(hours=simulation.duration_hours)
    for group in sorted(deleted_groups(simulation, groups)):
        _delete_group(offsets_log, group)
    _offset_commit(offsets_log, "classic-reporting", "orders-0", 0, 4200)
    state_log = _Log(s.SHARE_STATE_TOPIC, spec.start)
    state_log.rows = state.to_pylist()
    state_log.next_offset = {
        int(p): int(o) + 1
        for p, o in zip(
            state.column("partition").to_pylist(), state.column("offset").to_pylist(), strict=True
        )
    }
    state_log.clock = offsets_log.clock
    _damage(state_log, rng)
    return state_log.table(), offsets_log.table()


def _group_records(
    log: _Log, group: str, topics: dict[str, str], partitions: list[int], rng: random.Random
) -> None:
    member = f"member-{rng.randrange(10**6):06d}"
    assignment = [{"topic_id": tid, "partitions": partitions} for tid in topics.values()]
    records: list[tuple[int, dict[str, Any], dict[str, Any]]] = [
        (11, {"group_id": group}, {"epoch": 2, "metadata_hash": rng.getrandbits(63)}),
        (
            10,
            {"group_id": group, "member_id": member},
            {
                "rack_id": None,
                "client_id": "consumer-1",
                "client_host": "/10.0.0.7",
                "subscribed_topic_names": sorted(topics),
            },
        ),
        (12, {"group_id": group}, {"assignment_epoch": 2, "assignment_timestamp": None}),
        (13, {"group_id": group, "member_id": member}, {"topic_partitions": assignment}),
        (
            14,
            {"group_id": group, "member_id": member},
            {
                "member_epoch": 2,
                "previous_member_epoch": 1,
                "state": 0,
                "assigned_partitions": assignment,
            },
        ),
        (
            15,
            {"group_id": group},
            {
                "initializing_topics": [],
                "initialized_topics": [
                    {
                        "topic_id": tid,
                        "topic_name": name,
                        "partitions": partitions,
                    }
                    for name, tid in topics.items()
                ],
                "deleting_topics": [],
            },
        ),
    ]
    for rtype, key_fields, value_fields in records:
        key, value = encode.group_record(rtype, key_fields, value_fields, _layout(rtype))
        log.append(offsets_topic_partition(group), key, value)


def _layout(rtype: int) -> str:
    return "4.1" if rtype in (11, 15) else "4.0+"


def _delete_group(log: _Log, group: str) -> None:
    """Tombstones in the order Kafka's ShareGroup.createGroupTombstoneRecords emits them
    (the sample group has one member, so member records are looked up from the log)."""
    member_keys = sorted(
        {
            row["key"]
            for row in log.rows
            if row["value"] is not None and int.from_bytes(row["key"][:2], "big") == 10
        }
    )
    member_ids = [
        decoded["member_id"]
        for decoded in (decode_group_record(key, None) for key in member_keys)
        if decoded["group_id"] == group
    ]
    partition = offsets_topic_partition(group)
    for rtype in (14, 13):
        for member in member_ids:
            log.append(
                partition,
                encode.group_record(rtype, {"group_id": group, "member_id": member}, None, "4.0+")[
                    0
                ],
                None,
            )
    log.append(partition, encode.group_record(12, {"group_id": group}, None, "4.0+")[0], None)
    for member in member_ids:
        log.append(
            partition,
            encode.group_record(10, {"group_id": group, "member_id": member}, None, "4.0+")[0],
            None,
        )
    log.append(partition, encode.group_record(15, {"group_id": group}, None, "4.1")[0], None)
    log.append(partition, encode.group_record(11, {"group_id": group}, None, "4.1")[0], None)


def _offset_commit(log: _Log, group: str, topic: str, partition: int, offset: int) -> None:
    """A classic consumer group's OffsetCommit (type 1, value version 3), to show that
    other record types pass through classified but undecoded."""
    key = Writer().int16(1).string(group).string(topic).int32(partition).getvalue()
    value = Writer().int16(3).int64(offset).int32(-1).string("").int64(1_700_000_000_000).getvalue()
    log.append(offsets_topic_partition(group), key, value)


def _damage(log: _Log, rng: random.Random) -> None:
    """One duplicated row, one truncated value, one unknown value version."""
    live = [row for row in log.rows if row["value"] is not None]
    log.rows.append(dict(rng.choice(live)))
    victim = rng.choice(live)
    log.append(victim["partition"], victim["key"], victim["value"][:-5])
    log.append(victim["partition"], victim["key"], b"\x00\x07" + victim["value"][2:])


def write_sample(output: str | Path, spec: SampleSpec | None = None) -> dict[str, int]:
    """Write `share_state/` and `consumer_offsets/` Parquet exports under `output`."""
    state, offsets = generate(spec or SampleSpec())
    root = Path(output)
    for name, table in (("share_state", state), ("consumer_offsets", offsets)):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.parquet"):
            old.unlink()
        pq.write_table(table, folder / "part-00000.parquet")
    return {"share_state": state.num_rows, "consumer_offsets": offsets.num_rows}
