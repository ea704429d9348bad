"""Merging state batches the way Kafka's share coordinator does (PersisterStateBatchCombiner).

Pure Python, no Spark. Batches are `(first_offset, last_offset, delivery_state,
delivery_count)` tuples, the order of the `state_batches` column.

The rules, all of which change the resulting *list* (not only the per-offset view):

1. The current batches and the new ones are concatenated.
2. With a start offset other than -1, batches ending below it are dropped and a batch
   straddling it is cut to start there.
3. Fewer than two batches left: returned as they are, unsorted.
4. Where batches overlap, the higher (count, state) wins: a higher delivery count wins,
   then the higher state byte (Archived 4 > Acknowledged 2 > Acquired 1 > Available 0).
   It is priority, not arrival order.
5. How the result is cut into batches depends on the release. Kafka 4.0-4.3 put the
   batches in a sorted set ordered by (first, last, count, state), so exact duplicates
   collapse, and repeatedly replace the first pair of neighbours that overlap, or touch with
   equal (count, state), by its resolution; every batch before that pair is final, so two
   equal batches that only become neighbours later stay apart. Kafka 4.4 sweeps the
   offsets and always joins touching runs with the same winner.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence

Batch = tuple[int, int, int, int]  # first, last, state, count
#: Kafka 4.4 replaced the pairwise merge by a sweep over the offsets (same offsets win,
#: but adjacent equal batches now always coalesce).
SWEEP_SINCE = (4, 4)
_LONG_MAX = 2**63 - 1
LATEST = (4, 4)
# Sort key of Kafka's TreeSet: first, last, count, state.
_Sorted = tuple[int, int, int, int]


def _priority(batch: _Sorted) -> tuple[int, int]:
    return batch[2], batch[3]


def prune(batches: Iterable[Batch], start_offset: int) -> list[Batch]:
    """Drop what lies below `start_offset` (-1: keep everything)."""
    if start_offset == -1:
        return list(batches)
    kept: list[Batch] = []
    for first, last, state, count in batches:
        if last < start_offset:
            continue
        kept.append(
            (first, last, state, count)
            if first >= start_offset
            else (start_offset, last, state, count)
        )
    return kept


def _resolve(prev: _Sorted, cand: _Sorted) -> list[_Sorted]:
    """The pieces that replace a mergeable pair (prev sorts before cand)."""
    p_first, p_last, p_count, p_state = prev
    c_first, c_last, c_count, c_state = cand
    if _priority(prev) == _priority(cand):  # same delivery info: overlapping or touching
        return [(p_first, max(p_last, c_last), p_count, p_state)]
    cand_loses = _priority(cand) < _priority(prev)
    if c_first == p_first:
        if c_last == p_last:
            return [cand]  # the sort puts the higher priority second
        # cand is longer
        return [prev, (p_last + 1, c_last, c_count, c_state)] if cand_loses else [cand]
    if c_last < p_last:  # cand inside prev
        if cand_loses:
            return [prev]
        return [
            (p_first, c_first - 1, p_count, p_state),
            cand,
            (c_last + 1, p_last, p_count, p_state),
        ]
    if c_last == p_last:
        return [prev] if cand_loses else [(p_first, c_first - 1, p_count, p_state), cand]
    # cand reaches past prev
    if cand_loses:
        return [prev, (p_last + 1, c_last, c_count, c_state)]
    return [(p_first, c_first - 1, p_count, p_state), cand]


def _first_mergeable(batches: list[_Sorted], start: int) -> int:
    """Index i >= start of the first pair (i, i+1) that overlaps or touches with equal
    delivery info; -1 if none."""
    for i in range(start, len(batches) - 1):
        prev, cand = batches[i], batches[i + 1]
        if cand[0] <= prev[1] or (prev[1] + 1 == cand[0] and _priority(prev) == _priority(cand)):
            return i
    return -1


def combine(
    current: Sequence[Batch],
    new: Sequence[Batch],
    start_offset: int,
    kafka: tuple[int, int] = LATEST,
) -> list[Batch]:
    """The combined batch list Kafka release `kafka` (major, minor) makes of `current` +
    `new` at `start_offset`."""
    combined = prune([*current, *new], start_offset)
    if len(combined) < 2:
        return combined
    if kafka >= SWEEP_SINCE:
        return sweep(combined)
    return _pairwise(combined)


def _next_offset(offset: int) -> int:
    """offset + 1 in Java's long arithmetic (Long.MAX_VALUE + 1 wraps to Long.MIN_VALUE)."""
    return offset + 1 if offset < _LONG_MAX else -_LONG_MAX - 1


def sweep(batches: list[Batch]) -> list[Batch]:
    """Kafka 4.4+: every offset takes the highest (count, state) of the batches covering
    it; runs of offsets with the same winner and no gap form one batch."""
    events = sorted(
        [(first, 1, (count, state)) for first, _, state, count in batches]
        + [(_next_offset(last), 0, (count, state)) for _, last, state, count in batches]
    )
    active: dict[tuple[int, int], int] = {}
    out: list[Batch] = []
    current: tuple[int, int] | None = None
    previous = 0
    i = 0
    while i < len(events):
        offset = events[i][0]
        if current is not None and offset > previous:
            count, state = current
            if out and out[-1][1] + 1 == previous and (out[-1][3], out[-1][2]) == current:
                out[-1] = (out[-1][0], offset - 1, state, count)
            else:
                out.append((previous, offset - 1, state, count))
        while i < len(events) and events[i][0] == offset:
            _, begins, priority = events[i]
            if begins:
                active[priority] = active.get(priority, 0) + 1
            elif priority not in active:
                # A batch ending before it starts; Kafka's combiner fails on it too.
                raise ValueError(f"state batch ends before it starts (at offset {offset - 1})")
            elif active[priority] == 1:
                del active[priority]
            else:
                active[priority] -= 1
            i += 1
        current = max(active) if active else None
        previous = offset
    return out


def _pairwise(combined: list[Batch]) -> list[Batch]:
    """Kafka 4.0-4.3: resolve the first mergeable pair of a sorted set until none is left."""
    work = sorted({(f, last, c, st) for f, last, st, c in combined})
    done = 0  # work[:done] is final: nothing after it can merge with it
    # Kafka 4.0-4.3 never finish on some impossible input (a batch ending before it starts,
    # overlapping another); stop with an error where Kafka would spin.
    budget = 4 * len(work) ** 2 + 64
    while True:
        i = _first_mergeable(work, done)
        if i < 0:
            break
        budget -= 1
        if budget < 0:
            raise ValueError(
                "state batches that Kafka 4.0-4.3 cannot merge (a batch ends before it starts)"
            )
        done = i
        prev, cand = work[i], work[i + 1]
        del work[i : i + 2]
        for piece in _resolve(prev, cand):
            at = bisect_left(work, piece)
            if at == len(work) or work[at] != piece:  # a set: equal batches collapse
                insort(work, piece)
        # Pieces start at or after prev's first offset, so they sort after work[:i], whose
        # batches all end before it: work[:i] stays final.
    return [(f, last, st, c) for f, last, c, st in work]
