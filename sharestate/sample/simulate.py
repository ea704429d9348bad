"""A simulator of share-group activity that writes realistic `__share_group_state` exports.

Used by `make run` (through `sharestate sample`), the tests and `make bench`. Each
share-partition is simulated on its own, with its own seed, the way Kafka's share-partition
leader and share coordinator write its state:

* InitializeShareGroupState writes a ShareSnapshot (snapshot epoch 0, start offset -1, no
  batches); the first leader's read writes its leader epoch; its first write sets the SPSO.
* Consumers acquire windows of records (redeliveries of released records first; up to four
  fetches in flight hold the SPSO back), then accept, release, reject or let the lock
  time out, in any order; a record released at the delivery-count limit is archived. A
  few records are poison: every delivery fails until the limit archives them. Each
  settled fetch is one WriteShareGroupState: its batches and the SPSO the leader had,
  which then moves past acknowledged and archived records (the next write carries it).
* Now and then: a new leader (a read with a higher leader epoch), the log start moving
  past the SPSO (retention), a cold-partition snapshot.
* The coordinator writes a ShareUpdate holding the request's batches, or a ShareSnapshot of
  the combined state once `records_per_snapshot` updates were written since the last one
  (Kafka's `share.coordinator.snapshot.update.records.per.snapshot`, default 500).
* Deleted groups end with a ShareSnapshot tombstone per share-partition.

Sizes follow a Zipf law over share-partitions (`skew`), so a few hot share-partitions have
long logs. Records land on the state-topic partition Kafka's hash picks and get offsets
in time order there. Generation runs in worker processes, one slice of share-partitions
each; the result does not depend on how many.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sharestate.kafka import schemas as s
from sharestate.kafka.constants import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from sharestate.kafka.partitioning import state_topic_partition
from sharestate.kafka.wire import random_topic_id
from sharestate.replay.combiner import Batch, combine
from sharestate.sample import encode

PARTITIONS_PER_TOPIC: Final = 16
#: parquet-mr's default page size in rows (parquet.page.row.count.limit).
_ROWS_PER_PAGE: Final = 20_000


@dataclass(frozen=True)
class SimulationSpec:
    """What to simulate. `records` is a target: the export has about that many records."""

    records: int = 10_000
    share_partitions: int = 200
    skew: float = 1.0  # Zipf exponent of records per share-partition (0: all equal)
    records_per_snapshot: int = 500
    delivery_count_limit: int = 5
    state_topic_partitions: int = 50
    deleted_group_fraction: float = 0.05
    poison_fraction: float = 0.002  # records no consumer can process: released until archived
    layout: str = "4.2"  # record layout written: 4.1, or 4.2 with DeliveryCompleteCount
    seed: int = 932
    start: datetime = datetime(2026, 11, 1, tzinfo=UTC)
    duration_hours: float = 24.0
    workers: int = 2

    def __post_init__(self) -> None:
        if self.layout not in ("4.1", "4.2"):
            raise ValueError(f"layout must be 4.1 or 4.2, not {self.layout!r}")
        if self.records < 1 or self.share_partitions < 1:
            raise ValueError("records and share_partitions must be positive")


@dataclass(frozen=True)
class SharePartitionId:
    group_id: str
    topic_id: str
    topic_name: str
    partition: int


def share_partitions(spec: SimulationSpec) -> list[SharePartitionId]:
    """The simulated share-partitions: groups x topics x 16 partitions, in a fixed order."""
    groups = max(1, round(math.sqrt(spec.share_partitions / PARTITIONS_PER_TOPIC)))
    topics = math.ceil(spec.share_partitions / (groups * PARTITIONS_PER_TOPIC))
    rng = random.Random(spec.seed)
    topic_ids = [random_topic_id(rng.randbytes(16)) for _ in range(topics)]
    out: list[SharePartitionId] = []
    for g in range(groups):
        for t in range(topics):
            for p in range(PARTITIONS_PER_TOPIC):
                out.append(SharePartitionId(f"group-{g:03d}", topic_ids[t], f"topic-{t:03d}", p))
    # Interleave groups so that any prefix covers many of them.
    out.sort(key=lambda sp: (sp.partition, sp.topic_name, sp.group_id))
    return out[: spec.share_partitions]


def deleted_groups(spec: SimulationSpec, groups: list[str]) -> set[str]:
    count = math.floor(len(groups) * spec.deleted_group_fraction)
    if spec.deleted_group_fraction > 0 and len(groups) > 1:
        count = max(count, 1)  # small simulations still show a deletion
    return set(sorted(groups)[len(groups) - count :]) if count else set()


def records_per_share_partition(spec: SimulationSpec) -> list[int]:
    """Zipf-distributed log lengths (at least 3: initialize, first read, one write)."""
    weights = [1.0 / (rank**spec.skew) for rank in range(1, spec.share_partitions + 1)]
    total = sum(weights)
    order = random.Random(spec.seed + 1).sample(range(spec.share_partitions), spec.share_partitions)
    sizes = [0] * spec.share_partitions
    for rank, index in enumerate(order):
        sizes[index] = max(3, round(spec.records * weights[rank] / total))
    return sizes


# --- record bytes (the field order of schemas.SHARE_*_VALUE, checked in tests) ---------------

_UPDATE_HEAD = struct.Struct(">hiiq")
_SNAPSHOT_HEAD = struct.Struct(">hiiiqqq")
_BATCH = struct.Struct(">qqbhx")  # the pad byte is the batch's empty tagged-field section


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tail(batches: list[Batch], dcc: int | None) -> bytes:
    parts = [_uvarint(len(batches) + 1)]
    parts += [_BATCH.pack(f, last, st, c) for f, last, st, c in batches]
    if dcc is None or dcc == -1:  # Kafka leaves the tag out at its default
        parts.append(b"\x00")
    else:
        parts.append(b"\x01\x00\x04" + struct.pack(">i", dcc))
    return b"".join(parts)


def update_value(
    snapshot_epoch: int, leader_epoch: int, start: int, batches: list[Batch], dcc: int | None
) -> bytes:
    return _UPDATE_HEAD.pack(0, snapshot_epoch, leader_epoch, start) + _tail(batches, dcc)


def snapshot_value(
    snapshot_epoch: int,
    state_epoch: int,
    leader_epoch: int,
    start: int,
    created: int,
    written: int,
    batches: list[Batch],
    dcc: int | None,
) -> bytes:
    head = _SNAPSHOT_HEAD.pack(
        0, snapshot_epoch, state_epoch, leader_epoch, start, created, written
    )
    return head + _tail(batches, dcc)


# --- one share-partition ---------------------------------------------------------------------


class Coordinator:
    """The share coordinator's view of one share-partition: what it holds and writes."""

    def __init__(self, spec: SimulationSpec) -> None:
        self.spec = spec
        self.start = -1
        self.batches: list[Batch] = []
        self.snapshot_epoch = 0
        self.leader_epoch = 0
        self.created = 0
        self.updates_since_snapshot = 0
        # (timestamp ms, record type: 0 ShareSnapshot / 1 ShareUpdate, value; None: tombstone)
        self.out: list[tuple[int, int, bytes | None]] = []

    def _dcc(self) -> int | None:
        if self.spec.layout == "4.1":
            return None
        done = 0
        for first, last, state, _ in self.batches:
            if state in (ACKNOWLEDGED, ARCHIVED) and last >= self.start:
                done += last - max(first, self.start) + 1
        return done

    def initialize(self, now: int) -> None:
        self.created = now
        self.out.append((now, 0, snapshot_value(0, 0, 0, -1, now, now, [], self._dcc())))

    def snapshot(self, now: int) -> None:
        self.snapshot_epoch += 1
        self.updates_since_snapshot = 0
        value = snapshot_value(
            self.snapshot_epoch,
            0,
            self.leader_epoch,
            self.start,
            self.created,
            now,
            self.batches,
            self._dcc(),
        )
        self.out.append((now, 0, value))

    def write(self, now: int, start: int, batches: list[Batch], leader_epoch: int = -1) -> None:
        """A WriteShareGroupState (or a read with a new leader epoch, without batches)."""
        new_start = self.start if start == -1 else start
        self.batches = combine(self.batches, batches, new_start)
        self.start = new_start
        if leader_epoch != -1:
            self.leader_epoch = leader_epoch
        if self.updates_since_snapshot >= self.spec.records_per_snapshot:
            self.snapshot(now)
            return
        self.updates_since_snapshot += 1
        value = update_value(
            self.snapshot_epoch,
            leader_epoch,
            start,
            combine([], batches, start) if batches else [],
            self._dcc(),
        )
        self.out.append((now, 1, value))


def _coalesce(settled: list[tuple[int, int, int]]) -> list[Batch]:
    """(offset, state, count) sorted by offset -> batches of contiguous equal (state, count)."""
    out: list[list[int]] = []
    for offset, state, count in settled:
        if out and out[-1][1] + 1 == offset and out[-1][2] == state and out[-1][3] == count:
            out[-1][1] = offset
        else:
            out.append([offset, offset, state, count])
    return [(a, b, c, d) for a, b, c, d in out]


def simulate_share_partition(
    spec: SimulationSpec, index: int, records: int, deleted: bool
) -> Coordinator:
    """One share-partition's life; the coordinator's `out` holds its records and the rest
    what the coordinator holds at the end (before a deletion)."""
    rng = random.Random(spec.seed * 1_000_003 + index)
    limit = spec.delivery_count_limit
    span_ms = int(spec.duration_hours * 3_600_000)
    now = int(spec.start.timestamp() * 1000) + rng.randrange(max(1, span_ms // 20))
    step_ms = max(1, span_ms // max(records, 1))
    coordinator = Coordinator(spec)
    coordinator.initialize(now)
    leader = 1
    now += rng.randrange(1, 2 * step_ms + 1)
    coordinator.write(now, -1, [], leader_epoch=leader)  # the first leader reads the state
    spso = rng.randrange(0, 1_000_000)
    log_end = next_fresh = spso  # next_fresh: the next offset never delivered
    counts: dict[int, int] = {}  # delivery count per offset at or past the SPSO
    available: list[int] = []  # released offsets waiting for redelivery (sorted)
    done: set[int] = set()  # acknowledged/archived offsets past the SPSO
    window = 1 + int(rng.paretovariate(1.5) * 4)  # typical fetch size on this partition
    consumers = rng.randint(1, 4)  # fetches in flight at once hold the SPSO back
    pending: list[list[int]] = []  # acquired (locked), not yet acknowledged: not persisted
    poison: set[int] = set()
    while len(coordinator.out) < records - (1 if deleted else 0):
        now += 1 + int(rng.expovariate(1.0 / step_ms))
        roll = rng.random()
        if roll < 0.01:  # a new leader reads the state; the old one's locks are gone
            leader += 1
            locked = [o for fetch in pending for o in fetch]
            done.update(o for o in locked if counts[o] >= limit)  # archived at the limit
            available = sorted({*available, *(o for o in locked if counts[o] < limit)})
            pending = []
            coordinator.write(now, coordinator.start, [], leader_epoch=leader)
            continue
        if roll < 0.015 and spec.records_per_snapshot > 0:  # cold-partition snapshot
            coordinator.snapshot(now)
            continue
        if roll < 0.018:  # retention moved the log start past the SPSO
            spso = log_end = next_fresh = max(log_end, spso) + rng.randrange(1, 50)
            counts, available, done, pending, poison = {}, [], set(), [], set()
            coordinator.write(now, spso, [])
            continue
        if not pending or (len(pending) < consumers and rng.random() < 0.5):
            # A consumer fetches: redeliveries first, then new records. Acquiring bumps
            # the delivery count; nothing is written until the records are settled.
            log_end += rng.randrange(0, 2 * window + 1)  # producers keep writing
            take = rng.randint(1, 2 * window)
            acquired = available[:take]
            del available[:take]
            fresh = min(take - len(acquired), log_end - next_fresh)
            if fresh > 0:
                acquired += range(next_fresh, next_fresh + fresh)
                poison.update(
                    o
                    for o in range(next_fresh, next_fresh + fresh)
                    if rng.random() < spec.poison_fraction
                )
                next_fresh += fresh
            for offset in acquired:
                counts[offset] = counts.get(offset, 0) + 1
            if acquired:
                pending.append(acquired)
            continue
        fetch = pending.pop(rng.randrange(len(pending)))  # acknowledged in any order
        settled: list[tuple[int, int, int]] = []
        outcome = rng.random()
        for offset in sorted(fetch):
            count = counts[offset]
            if rng.random() < 0.1:  # records within a fetch may settle differently
                outcome = rng.random()
            if offset in poison:  # the consumer fails on it, or its lock times out
                state = ARCHIVED if count >= limit else AVAILABLE
            elif outcome < 0.80:
                state = ACKNOWLEDGED
            elif outcome < 0.97:  # released, or the lock timed out
                state = ARCHIVED if count >= limit else AVAILABLE
            else:
                state = ARCHIVED  # rejected
            settled.append((offset, state, count))
            if state == AVAILABLE:
                available.append(offset)
            else:
                done.add(offset)
        available.sort()
        # The leader persists the acknowledgements with the start offset it had, then moves
        # its SPSO past finished records: the next write carries the move.
        coordinator.write(now, spso, _coalesce(settled))
        while spso in done:
            done.discard(spso)
            counts.pop(spso, None)
            poison.discard(spso)
            spso += 1
    if deleted:
        coordinator.out.append((now + step_ms, 0, None))
    return coordinator


# --- the export ------------------------------------------------------------------------------


def _simulate_slice(spec: SimulationSpec, indexes: list[int]) -> pa.Table:
    ids = share_partitions(spec)
    sizes = records_per_share_partition(spec)
    gone = deleted_groups(spec, sorted({sp.group_id for sp in ids}))
    parts: list[int] = []
    times: list[int] = []
    keys: list[bytes] = []
    values: list[bytes | None] = []
    for index in indexes:
        sp = ids[index]
        out = simulate_share_partition(spec, index, sizes[index], sp.group_id in gone).out
        part = state_topic_partition(
            sp.group_id, sp.topic_id, sp.partition, spec.state_topic_partitions
        )
        update_key = encode.share_state_key(s.SHARE_UPDATE, sp.group_id, sp.topic_id, sp.partition)
        snapshot_key = encode.share_state_key(
            s.SHARE_SNAPSHOT, sp.group_id, sp.topic_id, sp.partition
        )
        keys_by_type = (snapshot_key, update_key)
        for when, record_type, value in out:
            parts.append(part)
            times.append(when)
            keys.append(keys_by_type[record_type])
            values.append(value)
    return pa.table(
        {
            "partition": pa.array(parts, pa.int32()),
            "time_ms": pa.array(times, pa.int64()),
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
        }
    )


def _slices(count: int, workers: int) -> list[list[int]]:
    # Round-robin, so hot share-partitions (anywhere in the order) spread over the workers.
    return [list(range(w, count, workers * 4)) for w in range(workers * 4)]


def simulate(spec: SimulationSpec) -> pa.Table:
    """The share-state export (Kafka's export schema), sorted by (partition, offset)."""
    slices = [part for part in _slices(spec.share_partitions, spec.workers) if part]
    if spec.workers > 1:
        with ProcessPoolExecutor(spec.workers) as pool:
            tables = list(pool.map(_simulate_slice, [spec] * len(slices), slices))
    else:
        tables = [_simulate_slice(spec, part) for part in slices]
    raw = pa.concat_tables(tables)
    # Offsets in time order within each state-topic partition (ties: generation order).
    order = pc.sort_indices(
        raw.append_column("seq", pa.array(np.arange(raw.num_rows))),
        sort_keys=[("partition", "ascending"), ("time_ms", "ascending"), ("seq", "ascending")],
    )
    raw = raw.take(order)
    partitions = raw.column("partition").to_numpy()
    starts = np.r_[0, np.flatnonzero(np.diff(partitions)) + 1]
    lengths = np.diff(np.r_[starts, len(partitions)])
    offsets = np.arange(len(partitions)) - np.repeat(starts, lengths)
    return pa.table(
        {
            "key": raw.column("key"),
            "value": raw.column("value"),
            "topic": pa.array([s.SHARE_STATE_TOPIC] * raw.num_rows, pa.string()),
            "partition": raw.column("partition"),
            "offset": pa.array(offsets, pa.int64()),
            "timestamp": pc.multiply(raw.column("time_ms"), 1000).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "timestampType": pa.array(np.zeros(raw.num_rows, np.int32)),
            "headers": pa.nulls(
                raw.num_rows,
                pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])),
            ),
        }
    )


def write_export(table: pa.Table, folder: str | Path, files: int = 8) -> None:
    """Parquet files of about equal size (one Spark task each) into `folder`.

    Pages of at most 20,000 rows with a page index, as parquet-mr (Spark, Delta, Kafka
    Connect's Parquet sinks) writes by default: Spark then reads only the pages that can
    hold rows an incremental run asks for (above its checkpoint), not every page of the
    export (measured in docs/where-time-goes.md)."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob("*.parquet"):
        old.unlink()
    per_file = max(1, math.ceil(table.num_rows / files))
    for number, start in enumerate(range(0, table.num_rows, per_file)):
        pq.write_table(
            table.slice(start, per_file),
            root / f"part-{number:05d}.parquet",
            write_page_index=True,
            max_rows_per_page=_ROWS_PER_PAGE,
        )


def iter_records(table: pa.Table) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) in log order, for feeding other tools (e.g. Kafka's replay benchmark)."""
    for batch in table.select(["key", "value"]).to_batches():
        yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True)
