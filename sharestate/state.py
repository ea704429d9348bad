"""One share-partition's state and how one record changes it, as Kafka's share coordinator
replays `__share_group_state` (ShareCoordinatorShard.replay). Pure Python, no Spark.

Replay does no fencing and no validation: every record is applied as it is.

* ShareSnapshot: the value becomes the state, verbatim (batches are not re-merged).
* ShareSnapshot tombstone: the share-partition is deleted; a later record starts afresh.
* ShareUpdate with no state (the export starts after pruning, or after a tombstone): the
  update becomes the state as it is, with state epoch 0 and timestamps 0.
* ShareUpdate on a state: start offset and leader epoch are replaced unless -1; snapshot
  epoch, state epoch and timestamps are kept; the batches are combined
  (`sharestate.combiner.combine`) at the new start offset; the delivery-complete count is
  the update's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sharestate.combiner import Batch, combine

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
TERMINAL = (ACKNOWLEDGED, ARCHIVED)


@dataclass(frozen=True, slots=True)
class ShareState:
    start_offset: int
    state_epoch: int
    leader_epoch: int
    snapshot_epoch: int
    create_timestamp: int
    write_timestamp: int
    delivery_complete_count: int | None
    batches: tuple[Batch, ...]


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


def apply_record(state: ShareState | None, record: Mapping[str, Any]) -> ShareState | None:
    """The state after `record` (a row of `share_state_records`); None = no state."""
    kind = record["record_type"]
    if kind == "tombstone":
        return None
    if kind == "snapshot":
        return ShareState(
            start_offset=record["start_offset"],
            state_epoch=record["state_epoch"],
            leader_epoch=record["leader_epoch"],
            snapshot_epoch=record["snapshot_epoch"],
            create_timestamp=record["create_timestamp"] or 0,
            write_timestamp=record["write_timestamp"] or 0,
            delivery_complete_count=record["delivery_complete_count"],
            batches=_batches(record),
        )
    if state is None:
        return ShareState(
            start_offset=record["start_offset"],
            state_epoch=0,
            leader_epoch=record["leader_epoch"],
            snapshot_epoch=record["snapshot_epoch"],
            create_timestamp=0,
            write_timestamp=0,
            delivery_complete_count=record["delivery_complete_count"],
            batches=_batches(record),
        )
    start = state.start_offset if record["start_offset"] == -1 else record["start_offset"]
    leader = state.leader_epoch if record["leader_epoch"] == -1 else record["leader_epoch"]
    return replace(
        state,
        start_offset=start,
        leader_epoch=leader,
        delivery_complete_count=record["delivery_complete_count"],
        batches=tuple(combine(state.batches, _batches(record), start)),
    )


def fold(
    records: Iterable[Mapping[str, Any]], state: ShareState | None = None
) -> ShareState | None:
    """Apply records in log order (the reference replay, record at a time)."""
    for record in records:
        state = apply_record(state, record)
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
