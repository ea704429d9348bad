"""Findings about the exported rows themselves: rows that could not be decoded, records the
replay could not apply, and offsets missing from an export; and the inputs they read: the
quarantine counted per kind (`quarantine_kinds`), an input's exported positions
(`exported_positions`) and the gaps
between them (`gap_ranges`).

Positions can have a row per exported record, so the gaps between them are found with numpy
over the partitions that have one; the other inputs are small. Pure pyarrow and numpy: no
Spark.
"""

from __future__ import annotations

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
from sharestate.audits.gaps_arrow import GAPS_SCHEMA
from sharestate.decode.columns import LOG_ORDER
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC

#: `quarantine_kinds`' columns (as the table has always had them: `rows` never null).
QUARANTINE_KINDS_SCHEMA: Final = pa.schema(
    [
        pa.field("source", pa.string()),
        pa.field("reason_kind", pa.string()),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("first_source_partition", pa.int32()),
        pa.field("first_source_offset", pa.int64()),
    ]
)
#: The types of a position's columns (`LOG_ORDER`).
_POSITION_TYPES: Final = {"source_partition": pa.int32(), "source_offset": pa.int64()}
_COUNT_ALL: Final = pc.CountOptions(mode="all")


def _where(table: pa.Table, condition: pa.Array | pa.ChunkedArray) -> pa.Table:
    """The rows where `condition` is true (a null condition drops the row, as an SQL
    filter)."""
    return table.filter(condition, null_selection_behavior="drop")


def _log_order_indices(table: pa.Table) -> pa.Array:
    """The rows of `table` in log order, nulls first (as SQL orders a struct of them).
    Each column is sorted after its validity (false first): null placement per key is not
    in every pyarrow the project takes."""
    keyed = {}
    for name in LOG_ORDER:
        keyed[f"_{name}_valid"] = pc.is_valid(table.column(name))
        keyed[name] = table.column(name)
    return pc.sort_indices(pa.table(keyed), sort_keys=[(c, "ascending") for c in keyed])


# --- the inputs ----------------------------------------------------------------------------


def quarantine_kinds(quarantine: pa.Table) -> pa.Table:
    """The quarantined rows per (source, reason_kind): how many and the first in log order
    (`QUARANTINE_KINDS_SCHEMA`): the first row of the log-order sort, nulls first (as SQL's
    `min` of a struct orders field by field). What `decode_quarantine` reads; an incremental
    run adds its new rows' counts to the stored ones."""
    order = _log_order_indices(quarantine)
    rank = np.empty(quarantine.num_rows, dtype=np.int64)
    rank[order.to_numpy()] = np.arange(quarantine.num_rows, dtype=np.int64)
    ranked = quarantine.select(["source", "reason_kind"]).append_column("_rank", pa.array(rank))
    grouped = ranked.group_by(["source", "reason_kind"], use_threads=False).aggregate(
        [("_rank", "count", _COUNT_ALL), ("_rank", "min")]
    )
    first = quarantine.select(list(LOG_ORDER)).take(pc.take(order, grouped.column("_rank_min")))
    return pa.table(
        {
            "source": grouped.column("source"),
            "reason_kind": grouped.column("reason_kind"),
            "rows": grouped.column("_rank_count"),
            "first_source_partition": first.column("source_partition"),
            "first_source_offset": first.column("source_offset"),
        }
    ).cast(QUARANTINE_KINDS_SCHEMA)


def exported_positions(records: pa.Table, quarantine: pa.Table | None, source: str) -> pa.Table:
    """(source_partition, source_offset) of every exported row of one input that reached a
    table: decoded `records` and quarantined rows of `source` (not rows of another topic),
    (a column is nullable when it is in
    either input, as in Spark's union)."""
    parts = [records.select(list(LOG_ORDER))]
    if quarantine is not None:
        kept = pc.and_kleene(
            pc.equal(quarantine.column("source"), source),
            pc.not_equal(quarantine.column("reason_kind"), "wrong topic"),
        )
        parts.append(_where(quarantine, kept).select(list(LOG_ORDER)))
    schema = pa.schema(
        [
            pa.field(name, kind, nullable=any(p.schema.field(name).nullable for p in parts))
            for name, kind in _POSITION_TYPES.items()
        ]
    )
    return pa.concat_tables([p.cast(schema) for p in parts])


def gap_ranges(positions: pa.Table) -> pa.Table:
    """The gaps between exported `positions` (source_partition, source_offset), one row
    each (`GAPS_SCHEMA`: source_partition, `_from`, `_to`, the first and last missing
    offset): only in a partition whose extent is wider than its count of rows (nulls and
    repeated offsets count), between consecutive offsets more than one apart. Offsets
    before a partition's first position are not gaps. Rows without a partition are in none."""
    positions = positions.select(list(LOG_ORDER)).cast(pa.schema(_POSITION_TYPES))
    positions = _where(positions, pc.is_valid(positions.column("source_partition")))
    stats = positions.group_by(["source_partition"], use_threads=False).aggregate(
        [
            ("source_offset", "count", _COUNT_ALL),
            ("source_offset", "min"),
            ("source_offset", "max"),
        ]
    )
    span = pc.add(
        pc.subtract(stats.column("source_offset_max"), stats.column("source_offset_min")), 1
    )
    gapped = _where(stats, pc.greater(span, stats.column("source_offset_count")))
    inside = pc.is_in(
        positions.column("source_partition"), value_set=gapped.column("source_partition")
    )
    mine = _where(positions, pc.and_(inside, pc.is_valid(positions.column("source_offset"))))
    partitions = np.asarray(mine.column("source_partition").to_numpy(), dtype=np.int64)
    offsets = np.asarray(mine.column("source_offset").to_numpy(), dtype=np.int64)
    order = np.lexsort((offsets, partitions))
    partitions, offsets = partitions[order], offsets[order]
    apart = (partitions[1:] == partitions[:-1]) & (offsets[1:] - offsets[:-1] > 1)
    return pa.table(
        {
            "source_partition": partitions[1:][apart],
            "_from": offsets[:-1][apart] + 1,
            "_to": offsets[1:][apart] - 1,
        }
    ).cast(GAPS_SCHEMA)


# --- the rules -----------------------------------------------------------------------------

_TOPICS: Final = {
    Source.SHARE_STATE.value: SHARE_STATE_TOPIC,
    Source.CONSUMER_OFFSETS.value: CONSUMER_OFFSETS_TOPIC,
}


@finding_rule(FindingCode.DECODE_QUARANTINE, Severity.WARNING)
def decode_quarantine(quarantine_kinds: pa.Table) -> FoundRows:
    """Rows of an export that could not be decoded, one finding per (input, reason kind).
    They are in the `quarantine` table with their bytes and exact reason. Kafka skips such
    records too, so the replay may differ from the broker's: look at the reason, and at
    what wrote the rows."""
    sources = quarantine_kinds.column("source")
    topics = pa.array([_TOPICS.get(s, s) for s in sources.to_pylist()], pa.string())
    return FoundRows(
        quarantine_kinds,
        message(
            quarantine_kinds.num_rows,
            quarantine_kinds.column("rows"),
            " row(s) of the ",
            topics,
            " export could not be decoded (",
            quarantine_kinds.column("reason_kind"),
            "); they are in the quarantine table with their bytes and exact reason."
            " Kafka skips such records too, so the replay may differ from the broker's",
        ),
        {
            "source_partition": "first_source_partition",
            "source_offset": "first_source_offset",
            "affected": "rows",
        },
        source=sources,
    )


@finding_rule(FindingCode.REPLAY_ERROR, Severity.ERROR, source=Source.SHARE_STATE, per_record=True)
def replay_error(history: pa.Table) -> FoundRows:
    """A `__share_group_state` record the replay could not apply (for example a state batch
    that ends before it starts), one finding per record. Kafka's own load fails on it as
    well; the share-partition's state is the one before it. Find out what wrote the
    record."""
    found = _where(history, pc.is_valid(history.column("replay_error")))
    return FoundRows(
        found,
        message(
            found.num_rows,
            "this record could not be applied (",
            found.column("replay_error"),
            "); Kafka's own load fails on it as well. The share-partition's state is the one"
            " before it: find out what wrote the record",
        ),
        {
            "group_id": "group_id",
            "topic_id": "topic_id",
            "partition": "partition",
            "source_partition": "source_partition",
            "source_offset": "source_offset",
            "affected": 1,
        },
    )


def _gaps_found(gaps: pa.Table) -> FoundRows:
    missing = pc.add(pc.subtract(gaps.column("_to"), gaps.column("_from")), 1)
    rows = gaps.append_column("_missing", missing)
    return FoundRows(
        rows,
        message(
            rows.num_rows,
            "offsets ",
            rows.column("_from"),
            "-",
            rows.column("_to"),
            " (",
            missing,
            " records) of __share_group_state partition ",
            rows.column("source_partition"),
            " are missing from the export. The topic is not compacted and Kafka prunes it only"
            " from its start, so the export lost them: the replay of share-partitions on this"
            " partition may miss updates; re-export the range",
        ),
        {"source_partition": "source_partition", "source_offset": "_from", "affected": "_missing"},
    )


@finding_rule(
    FindingCode.SOURCE_OFFSET_GAP, Severity.WARNING, source=Source.SHARE_STATE, per_record=True
)
def share_state_gap(share_state_positions: pa.Table) -> FoundRows:
    """Offsets missing inside the exported range of a `__share_group_state` partition, one
    finding per gap (offsets before the first exported one are pruning, not a gap;
    quarantined rows count as exported). The topic is not compacted, its writer is not
    transactional and Kafka prunes it only from its start, so a gap means the export lost
    records: the replay of the share-partitions on that partition may miss updates.
    Re-export the range."""
    return _gaps_found(gap_ranges(share_state_positions))


@finding_rule(FindingCode.SOURCE_OFFSET_GAP, Severity.INFO, source=Source.CONSUMER_OFFSETS)
def consumer_offsets_gap(consumer_offsets_extents: pa.Table) -> FoundRows:
    """Offsets missing in the exported range of a `__consumer_offsets` partition, one finding
    per partition with the number missing. Expected: the topic is compacted and transaction
    markers take offsets. Listed so that the export's completeness can be judged; nothing to
    do unless the count is far above what compaction explains."""
    extents = consumer_offsets_extents
    span = pc.add(pc.subtract(extents.column("last_offset"), extents.column("first_offset")), 1)
    gapped = extents.append_column("_missing", pc.subtract(span, extents.column("rows")))
    found = _where(gapped, pc.greater(gapped.column("_missing"), 0))
    return FoundRows(
        found,
        message(
            found.num_rows,
            found.column("_missing"),
            " offsets between ",
            found.column("first_offset"),
            " and ",
            found.column("last_offset"),
            " of __consumer_offsets partition ",
            found.column("source_partition"),
            " are not in the export; expected, since the topic is compacted and transaction"
            " markers take offsets",
        ),
        {
            "source_partition": "source_partition",
            "source_offset": "first_offset",
            "affected": "_missing",
        },
    )


@finding_rule(FindingCode.BACKFILL_APPLIED, Severity.INFO)
def backfill_applied(backfilled: pa.Table) -> FoundRows:
    """Rows below the last run's checkpoint arrived in this incremental run (a late file, or
    a re-export of a range the export had lost) and were applied, one finding per exported
    partition: the share-partitions they touch were replayed again from their stored
    records, so every table is as a full run over the export would have it. Listed by the
    run that applied them only; nothing to do."""
    per_partition = (
        backfilled.select(["source", "source_partition", "source_offset"])
        .group_by(["source", "source_partition"], use_threads=False)
        .aggregate(
            [
                ("source_offset", "count", _COUNT_ALL),
                ("source_offset", "min"),
                ("source_offset", "max"),
            ]
        )
        .rename_columns(
            {
                "source_offset_count": "_rows",
                "source_offset_min": "_first",
                "source_offset_max": "_last",
            }
        )
    )
    return FoundRows(
        per_partition,
        message(
            per_partition.num_rows,
            per_partition.column("_rows"),
            " row(s) of partition ",
            per_partition.column("source_partition"),
            " (offsets ",
            per_partition.column("_first"),
            "-",
            per_partition.column("_last"),
            ") arrived below the last run's checkpoint and were applied: the share-partitions"
            " they touch were replayed again, so every table is as a full run would have it",
        ),
        {"source_partition": "source_partition", "source_offset": "_first", "affected": "_rows"},
        source=per_partition.column("source"),
    )


def share_state_gap_rows(gaps: pa.Table) -> pa.Table:
    """`share_state_gap`'s findings rows for gaps already found (`gap_ranges`' columns), as
    an incremental run finds them from the stored gaps and its new positions."""
    return share_state_gap.rows(_gaps_found(gaps))
