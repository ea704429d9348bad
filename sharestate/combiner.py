"""Merging state batches the way Kafka's share coordinator does (PersisterStateBatchCombiner).

Pure Python, no Spark. Batches are `(first_offset, last_offset, delivery_state,
delivery_count)` tuples, the order of the `state_batches` column.

The rules, all of which change the resulting *list* (not only the per-offset view):

1. The current batches and the new ones are concatenated.
2. With a start offset other than -1, batches ending below it are dropped and a batch
   straddling it is cut to start there.
3. Fewer than two batches left: returned as they are, unsorted.
4. Otherwise they go into a sorted set ordered by (first, last, count, state), so exact
   duplicates collapse. Repeatedly, the first pair of neighbours that overlap, or touch with
   equal (count, state), is replaced by its resolution; every batch before that pair is
   final. Between two batches the higher (count, state) wins where they overlap: a higher
   delivery count wins, then the higher state byte (Archived 4 > Acknowledged 2 >
   Acquired 1 > Available 0). It is priority, not arrival order.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence

Batch = tuple[int, int, int, int]  # first, last, state, count
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


def combine(current: Sequence[Batch], new: Sequence[Batch], start_offset: int) -> list[Batch]:
    """Kafka's combined batch list for `current` + `new` at `start_offset`."""
    combined = prune([*current, *new], start_offset)
    if len(combined) < 2:
        return combined
    work = sorted({(f, last, c, st) for f, last, st, c in combined})
    done = 0  # work[:done] is final: nothing after it can merge with it
    while True:
        i = _first_mergeable(work, done)
        if i < 0:
            break
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
