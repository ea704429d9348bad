"""Findings of the state-topic partition check: share-partitions whose records sit on a
`__share_group_state` partition other than the one Kafka's partitioner picks
(`sharestate.kafka.partitioning.state_topic_partition`), from `share_partition_placements`.

The partition count is `--state-topic-partitions`; without it, it is chosen from the
placements: Kafka's default (50) or the highest exported partition + 1, whichever puts more
share-partitions on their own partition. A correct count puts every share-partition in place
while a wrong one misplaces nearly all, so when even the better one fits fewer than half,
the topic has some other count and the check is skipped with one info finding.

Kafka's partitioner hash of each key is computed in numpy
(`partitioning.share_partition_key_hashes`), or read from the placements' `KEY_HASH`
column. Nulls are handled as SQL would (the rows have always been found so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings.registry import (
    FindingCode,
    FoundRows,
    Severity,
    Source,
    finding_rule,
)
from sharestate.audits.findings.rows import message
from sharestate.decode.columns import KEY
from sharestate.kafka.partitioning import DEFAULT_STATE_TOPIC_PARTITIONS, share_partition_key_hashes

#: A column of the placements a caller may give with Kafka's partitioner hash of each key
#: already computed (`partitioning.share_partition_key_hashes`; an incremental run's
#: placements carry it): the check reads it instead of hashing the keys again.
KEY_HASH: Final = "_key_hash"

_DEFAULT_WHY = "Kafka's default, which fits this export"
_INFERRED_WHY = "inferred: highest exported partition + 1"
_GIVEN_WHY = "given by --state-topic-partitions"


@dataclass(frozen=True)
class _Placed:
    """The placements (`rows`), each one's state-topic partition (`partitions`, valid where
    `known`) and key hash (`hashes`, -1 where a key part is null)."""

    rows: pa.Table
    partitions: np.ndarray
    known: np.ndarray
    hashes: np.ndarray


@dataclass(frozen=True)
class _Count:
    """The chosen partition count (`n`, None for null), whether it is usable (None for
    null), the share-partitions and why that count."""

    n: int | None
    usable: bool | None
    total: int
    why: str


def _placed(placements: pa.Table) -> _Placed:
    """The placements with their key hashes: the `KEY_HASH` column where the placements
    have one, else computed from the keys (-1 where a key part is null)."""
    placements = placements.combine_chunks()
    n = placements.num_rows
    if KEY_HASH in placements.column_names:
        given = placements.column(KEY_HASH).cast(pa.int64())
        hashes = pc.fill_null(given, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        keys = list(zip(*[placements.column(c).to_pylist() for c in KEY], strict=True))
        complete = np.array([None not in key for key in keys], dtype=bool)
        hashes = np.full(n, -1, dtype=np.int64)
        hashes[complete] = share_partition_key_hashes(k for k in keys if None not in k)
    source_partitions = placements.column("source_partition")
    known = pc.is_valid(source_partitions).to_numpy(zero_copy_only=False).astype(bool)
    partitions = (
        pc.fill_null(source_partitions.cast(pa.int64()), 0)
        .to_numpy(zero_copy_only=False)
        .astype(np.int64)
    )
    return _Placed(placements, partitions, known, hashes)


def _remainder(hashes: np.ndarray, n: int) -> np.ndarray:
    """`hashes % n` as Java's `%` computes it (the sign of the dividend); a zero divisor
    fails."""
    if n == 0 and len(hashes):
        raise ZeroDivisionError("[REMAINDER_BY_ZERO] Remainder by zero")
    remainders: np.ndarray = np.fmod(hashes, np.int64(n))
    return remainders


def _fits(placed: _Placed, n: int | None) -> np.ndarray:
    """Where `_hash % n == source_partition` is true (false where it is null)."""
    if n is None:
        return np.zeros(len(placed.hashes), dtype=bool)
    fits: np.ndarray = placed.known & (_remainder(placed.hashes, n) == placed.partitions)
    return fits


def _inferred_partition_count(placed: _Placed) -> _Count:
    """Kafka's default count or the highest exported partition + 1, whichever fits more
    share-partitions, and whether it fits at least half; over no placements `total` is 0
    and the rest null."""
    total = len(placed.hashes)
    default = DEFAULT_STATE_TOPIC_PARTITIONS
    inferred = int(placed.partitions[placed.known].max()) + 1 if placed.known.any() else None
    # Sums over no rows are null; over rows, a row whose comparison is null adds 0.
    fit_default = int(_fits(placed, default).sum()) if total else None
    fit_inferred = int(_fits(placed, inferred).sum()) if total else None
    at_most_default = None if inferred is None else inferred <= default
    better = None if fit_default is None or fit_inferred is None else fit_default >= fit_inferred
    use_default = _and(at_most_default, better)
    # A null `use_default` takes the inferred count.
    fit = fit_default if use_default else fit_inferred
    return _Count(
        n=default if use_default else inferred,
        usable=None if fit is None else fit * 2 >= total,
        total=total,
        why=_DEFAULT_WHY if use_default else _INFERRED_WHY,
    )


def _and(a: bool | None, b: bool | None) -> bool | None:
    """Kleene (SQL) `and`."""
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _partition_count(placed: _Placed, partitions: int | None) -> _Count:
    """The count `partitions` when given, else the one `_inferred_partition_count`
    chooses."""
    if partitions is None:
        return _inferred_partition_count(placed)
    return _Count(n=partitions, usable=True, total=len(placed.hashes), why=_GIVEN_WHY)


@finding_rule(FindingCode.WRONG_STATE_PARTITION, Severity.ERROR, source=Source.SHARE_STATE)
def wrong_state_partition(
    placements: pa.Table, state_topic_partitions: int | None = None
) -> FoundRows:
    """Records of a share-partition on a `__share_group_state` partition other than the one
    Kafka's partitioner puts it on, one finding per (share-partition, partition). Kafka's
    share coordinator never reads them for this share-partition, while this replay merges
    them in log order, so the replay cannot match Kafka's. Check --state-topic-partitions
    and how the export was produced."""
    placed = _placed(placements)
    count = _partition_count(placed, state_topic_partitions)
    if count.usable and count.n is not None:
        # `~fits` is null where source_partition is null: such rows are dropped too.
        wrong = np.flatnonzero(placed.known & ~_fits(placed, count.n))
    else:
        wrong = np.zeros(0, dtype=np.int64)
    rows = placed.rows.take(pa.array(wrong, pa.int64()))
    n = rows.num_rows
    # Rows are found only with a count.
    put_on = pa.array(_remainder(placed.hashes[wrong], count.n or 0) if n else [], pa.int64())
    keys = [rows.column(c) for c in KEY]
    return FoundRows(
        rows,
        message(
            n,
            rows.column("records"),
            " record(s) of this share-partition are on __share_group_state partition ",
            rows.column("source_partition"),
            ", but Kafka's partitioner (hash of '",
            message(n, keys[0], ":", keys[1], ":", keys[2]),
            "') puts it on partition ",
            put_on,
            " of ",
            pa.array([count.n] * n, pa.int64()),
            " (",
            count.why,
            "). Kafka's share coordinator never reads them for this share-partition, while"
            " this replay merges them in log order; check --state-topic-partitions and how"
            " the export was produced",
        ),
        {
            "group_id": "group_id",
            "topic_id": "topic_id",
            "partition": "partition",
            "source_partition": "source_partition",
            "source_offset": "first_offset",
            "affected": "records",
        },
    )


@finding_rule(FindingCode.STATE_PARTITION_CHECK_SKIPPED, Severity.INFO, source=Source.SHARE_STATE)
def state_partition_check_skipped(
    placements: pa.Table, state_topic_partitions: int | None = None
) -> FoundRows:
    """The wrong-partition check did not run: with the partition count it could choose,
    fewer than half of the share-partitions sit where Kafka's partitioner puts them, so
    `__share_group_state` has another partition count. Give it with
    --state-topic-partitions."""
    count = _partition_count(_placed(placements), state_topic_partitions)
    skipped = count.usable is False and count.total > 0
    rows = pa.table(
        {
            "_n": pa.array([count.n] if skipped else [], pa.int64()),
            "_total": pa.array([count.total] if skipped else [], pa.int64()),
        }
    )
    n = rows.num_rows
    return FoundRows(
        rows,
        message(
            n,
            "records on the wrong __share_group_state partition were not checked: with ",
            rows.column("_n"),
            " partitions (",
            count.why,
            ") fewer than half of the ",
            rows.column("_total"),
            " share-partitions sit where Kafka's partitioner puts them, so the topic has another"
            " partition count; give it with --state-topic-partitions",
        ),
        {"affected": "_total"},
    )
