"""Sample exports of `__share_group_state` and `__consumer_offsets` for `make run` and demos.

A small seeded simulation of share groups consuming topics: records are fetched, then
acknowledged, released or rejected; released records come back with a higher delivery
count and are archived at the delivery-count limit; the share-partition start offset (SPSO)
advances past finished records. Each change is written the way the share coordinator writes
it: a ShareSnapshot when a share-partition is initialized and after every
`updates_per_snapshot` ShareUpdates, ShareUpdates otherwise, and ShareSnapshot tombstones
when a group is deleted. Records land on the state-topic partition Kafka's hash picks.

The export also carries what a real one can: a duplicated row and two damaged rows, so a
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

from sharestate import encode
from sharestate import schemas as s
from sharestate.partitioning import offsets_topic_partition, state_topic_partition
from sharestate.records import decode_group_record
from sharestate.wire import Writer, random_topic_id

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4

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
    groups: int = 3
    topics: int = 2
    partitions_per_topic: int = 3
    steps: int = 40
    updates_per_snapshot: int = 5
    delivery_count_limit: int = 5
    state_topic_partitions: int = 50
    seed: int = 7
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 1, 12, 0, tzinfo=UTC))


@dataclass
class _SharePartition:
    group_id: str
    topic_id: str
    partition: int
    spso: int
    counts: dict[int, int] = field(default_factory=dict)  # offset -> delivery count
    states: dict[int, int] = field(default_factory=dict)  # offset -> state, offsets >= spso
    snapshot_epoch: int = 0
    updates_since_snapshot: int = 0


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


def _batches(sp: _SharePartition) -> list[tuple[int, int, int, int]]:
    """Coalesce the per-offset view into batches of equal (state, count)."""
    out: list[list[int]] = []
    for offset in sorted(sp.states):
        state, count = sp.states[offset], sp.counts.get(offset, 0)
        if out and out[-1][1] + 1 == offset and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = offset
        else:
            out.append([offset, offset, state, count])
    return [(a, b, c, d) for a, b, c, d in out]


def _advance_spso(sp: _SharePartition) -> None:
    while sp.states.get(sp.spso) in (ACKNOWLEDGED, ARCHIVED):
        del sp.states[sp.spso]
        sp.counts.pop(sp.spso, None)
        sp.spso += 1


def _write(sp: _SharePartition, log: _Log, spec: SampleSpec, *, snapshot: bool, dcc: int) -> None:
    part = state_topic_partition(
        sp.group_id, sp.topic_id, sp.partition, spec.state_topic_partitions
    )
    now_ms = int(log.clock.timestamp() * 1000)
    if not snapshot and sp.updates_since_snapshot >= spec.updates_per_snapshot:
        snapshot = True
        sp.snapshot_epoch += 1
    if snapshot:
        key = encode.share_state_key(s.SHARE_SNAPSHOT, sp.group_id, sp.topic_id, sp.partition)
        value = encode.share_snapshot_value(
            snapshot_epoch=sp.snapshot_epoch,
            state_epoch=1,
            leader_epoch=1,
            start_offset=sp.spso,
            batches=_batches(sp),
            create_timestamp=now_ms,
            write_timestamp=now_ms,
            delivery_complete_count=dcc,
            layout="4.2",
        )
        sp.updates_since_snapshot = 0
    else:
        key = encode.share_state_key(s.SHARE_UPDATE, sp.group_id, sp.topic_id, sp.partition)
        value = encode.share_update_value(
            snapshot_epoch=sp.snapshot_epoch,
            leader_epoch=1,
            start_offset=sp.spso,
            batches=_batches(sp),
            delivery_complete_count=dcc,
            layout="4.2",
        )
        sp.updates_since_snapshot += 1
    log.append(part, key, value)


def _step(sp: _SharePartition, rng: random.Random, limit: int) -> None:
    """Deliver a window of records and settle each one: accept, release or reject."""
    window = rng.randint(3, 12)
    first = sp.spso
    for offset in range(first, first + window):
        if sp.states.get(offset) in (ACKNOWLEDGED, ARCHIVED):
            continue
        sp.counts[offset] = sp.counts.get(offset, 0) + 1
        roll = rng.random()
        if roll < 0.75:
            sp.states[offset] = ACKNOWLEDGED
        elif roll < 0.95:
            # Released (or lock timed out): available again, archived at the limit.
            sp.states[offset] = ARCHIVED if sp.counts[offset] >= limit else AVAILABLE
        else:
            sp.states[offset] = ARCHIVED  # rejected by the consumer
    _advance_spso(sp)


def generate(spec: SampleSpec) -> tuple[pa.Table, pa.Table]:
    """(share-state export, consumer-offsets export) as Arrow tables of the Kafka schema."""
    rng = random.Random(spec.seed)
    state_log = _Log(s.SHARE_STATE_TOPIC, spec.start)
    offsets_log = _Log(s.CONSUMER_OFFSETS_TOPIC, spec.start)
    topics = {f"orders-{t}": random_topic_id(rng.randbytes(16)) for t in range(spec.topics)}
    groups = [f"billing-{g}" for g in range(spec.groups)]
    share_partitions: list[_SharePartition] = []
    for group in groups:
        _group_records(offsets_log, group, topics, spec, rng)
        for topic_id in topics.values():
            for p in range(spec.partitions_per_topic):
                sp = _SharePartition(group, topic_id, p, spso=rng.randint(0, 1000))
                share_partitions.append(sp)
                _write(sp, state_log, spec, snapshot=True, dcc=0)
    for _ in range(spec.steps):
        sp = rng.choice(share_partitions)
        _step(sp, rng, spec.delivery_count_limit)
        done = sum(1 for st in sp.states.values() if st in (ACKNOWLEDGED, ARCHIVED))
        _write(sp, state_log, spec, snapshot=False, dcc=done)
    # The last group is deleted: tombstones for its share-partitions, then its group records.
    deleted = groups[-1]
    for sp in share_partitions:
        if sp.group_id == deleted:
            part = state_topic_partition(
                sp.group_id, sp.topic_id, sp.partition, spec.state_topic_partitions
            )
            state_log.append(
                part,
                encode.share_state_key(s.SHARE_SNAPSHOT, sp.group_id, sp.topic_id, sp.partition),
                None,
            )
    _delete_group(offsets_log, deleted)
    _offset_commit(offsets_log, "classic-reporting", "orders-0", 0, 4200)
    _damage(state_log, rng)
    return state_log.table(), offsets_log.table()


def _group_records(
    log: _Log, group: str, topics: dict[str, str], spec: SampleSpec, rng: random.Random
) -> None:
    member = f"member-{rng.randrange(10**6):06d}"
    assignment = [
        {"topic_id": tid, "partitions": list(range(spec.partitions_per_topic))}
        for tid in topics.values()
    ]
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
                        "partitions": list(range(spec.partitions_per_topic)),
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
