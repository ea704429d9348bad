"""One share-partition's state and how one record changes it, as Kafka's share coordinator
replays `__share_group_state` (ShareCoordinatorShard.replay). Pure Python, no Spark.

Replay does no fencing and no validation: every record is applied as it is.

* ShareSnapshot: the value becomes the state, verbatim (batches are not re-merged).
* ShareSnapshot tombstone: the share-partition is deleted; a later record starts afresh.
* ShareUpdate with no state (the export starts after pruning, or after a tombstone): the
  update becomes the state as it is, with state epoch 0 and timestamps 0 (4.0: state
  epoch -1, no timestamps).
* ShareUpdate on a state: start offset and leader epoch are replaced unless -1; snapshot
  epoch, state epoch and timestamps are kept; the batches are combined
  (`sharestate.replay.combiner.combine`) at the new start offset; the delivery-complete count is
  the update's (4.2+; -1 when the record leaves the tag out).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from sharestate.kafka.constants import TERMINAL
from sharestate.replay.combiner import LATEST, Batch, combine


@dataclass(frozen=True, slots=True)
class ShareState:
    start_offset: int
    state_epoch: int
    leader_epoch: int
    snapshot_epoch: int
    create_timestamp: int | None  # None: Kafka 4.0 keeps no timestamps
    write_timestamp: int | None
    delivery_complete_count: int | None  # None before 4.2
    batches: tuple[Batch, ...]


#: The state's scalar fields, named as in `share_state_records` and the output tables.
STATE_FIELDS = tuple(f.name for f in fields(ShareState) if f.name != "batches")


def _batches(record: Mapping[str, Any]) -> tuple[Batch, ...]:
    """State batches as tuples, from tuples or from Arrow's dicts."""
    out: list[Batch] = []
    for b in record["state_batches"] or ():
        if isinstance(b, Mapping):
            out.append(
                (b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            )
        else:
            first, last, delivery_state, count = b
            out.append((first, last, delivery_state, count))
    return tuple(out)


def _delivery_complete_count(record: Mapping[str, Any], kafka: tuple[int, int]) -> int | None:
    # 4.2+ holds -1 ("unknown") when the tag is not on the wire; earlier releases have no field.
    if kafka < (4, 2):
        return None
    value: int | None = record["delivery_complete_count"]
    return -1 if value is None else value


def apply_record(
    state: ShareState | None, record: Mapping[str, Any], kafka: tuple[int, int] = LATEST
) -> ShareState | None:
    """The state after `record` (a row of `share_state_records`) as Kafka release `kafka`
    replays it; None = no state."""
    kind = record["record_type"]
    if kind == "tombstone":
        return None
    if kind == "snapshot":
        return ShareState(
            start_offset=record["start_offset"],
            state_epoch=record["state_epoch"],
            leader_epoch=record["leader_epoch"],
            snapshot_epoch=record["snapshot_epoch"],
            create_timestamp=record["create_timestamp"],
            write_timestamp=record["write_timestamp"],
            delivery_complete_count=_delivery_complete_count(record, kafka),
            batches=_batches(record),
        )
    if state is None:
        # Kafka 4.0 builds this state with state epoch -1 and has no timestamps.
        early_access = kafka < (4, 1)
        return ShareState(
            start_offset=record["start_offset"],
            state_epoch=-1 if early_access else 0,
            leader_epoch=record["leader_epoch"],
            snapshot_epoch=record["snapshot_epoch"],
            create_timestamp=None if early_access else 0,
            write_timestamp=None if early_access else 0,
            delivery_complete_count=_delivery_complete_count(record, kafka),
            batches=_batches(record),
        )
    start = state.start_offset if record["start_offset"] == -1 else record["start_offset"]
    leader = state.leader_epoch if record["leader_epoch"] == -1 else record["leader_epoch"]
    return replace(
        state,
        start_offset=start,
        leader_epoch=leader,
        delivery_complete_count=_delivery_complete_count(record, kafka),
        batches=tuple(combine(state.batches, _batches(record), start, kafka)),
    )


def fold(
    records: Iterable[Mapping[str, Any]],
    state: ShareState | None = None,
    kafka: tuple[int, int] = LATEST,
) -> ShareState | None:
    """Apply records in log order (the reference replay, record at a time)."""
    for record in records:
        state = apply_record(state, record, kafka)
    return state


def effective_start_offset(state: ShareState) -> int:
    """The start offset moved past leading Acknowledged/Archived batches, as the
    share-partition leader does when it loads the state."""
    start = state.start_offset
    for first, last, delivery_state, _ in sorted(state.batches):
        if last < start:
            continue
        if first > start or delivery_state not in TERMINAL:
            break
        start = last + 1
    return start


def offsets_by_state(batches: Iterable[Batch]) -> dict[int, int]:
    """How many offsets the batches hold in each delivery state."""
    counts: dict[int, int] = {}
    for first, last, delivery_state, _ in batches:
        counts[delivery_state] = counts.get(delivery_state, 0) + last - first + 1
    return counts
