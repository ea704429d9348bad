"""Every audit table of a small run, in Arrow on the driver: the twin of `audit` for inputs
that fit in the driver's memory (a full run over at most `run.SMALL_RUN_ROWS` rows).

`audit` builds each table as a few Spark queries; over a small export their fixed cost (a
Spark job per aggregation, a plan per query) is most of the run. Here each table is its
Arrow twin (`counts_arrow`, `ranges_arrow`, `segments_arrow`, `pruning_arrow`,
`groups_arrow`), each tested equal to its DataFrame version, and the finding rules
(`findings`, Arrow functions); together they give the tables `audit` gives. Pure pyarrow
and numpy: no Spark (the lag, which reads the --end-offsets table, comes in computed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits import (
    counts_arrow,
    groups_arrow,
    pruning_arrow,
    ranges_arrow,
    segments_arrow,
)
from sharestate.audits.findings import findings_table
from sharestate.audits.findings.records import exported_positions, quarantine_kinds
from sharestate.audits.findings.registry import Source
from sharestate.audits.gaps_arrow import position_extents
from sharestate.audits.options import AuditOptions
from sharestate.audits.ranges_arrow import REASON_DELIVERY_LIMIT
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.replay.fold import SINCE

#: The columns of `share_state_records` the audits read.
RECORD_COLUMNS: Final = (*KEY, *LOG_ORDER, "source_timestamp", "record_type", "state_batches")
#: The columns of `share_partition_history` the audits read.
HISTORY_COLUMNS: Final = tuple(dict.fromkeys((*segments_arrow.HISTORY_COLUMNS, "replay_error")))
#: The columns of `quarantine` the audits read.
QUARANTINE_COLUMNS: Final = ("source", "reason_kind", *LOG_ORDER)


@dataclass(frozen=True)
class DriverAudits:
    """The audit tables in Arrow (`sharestate.audits.Audits`' tables), and what the run
    summary and the checkpoint read besides: the quarantine's kinds and the exported
    positions of `__share_group_state`."""

    delivery_counts: pa.Table
    poison_messages: pa.Table
    archived_messages: pa.Table
    segments: pa.Table
    placements: pa.Table
    pruning_cutoff: pa.Table
    findings: pa.Table
    share_groups: pa.Table | None
    share_partition_lag: pa.Table | None
    quarantine_kinds: pa.Table


def audit_on_driver(
    records: pa.Table,
    state: pa.Table,
    history: pa.Table,
    quarantine: pa.Table,
    options: AuditOptions,
    *,
    group_records: pa.Table | None = None,
    lag: pa.Table | None = None,
) -> DriverAudits:
    """The audit tables of `audit` from the same tables as Arrow: `records`
    (`share_state_records`, at least `RECORD_COLUMNS`), `state` (`share_partition_state`
    as the replay's fold gives it), `history` (`share_partition_history`, at least
    `HISTORY_COLUMNS`), `quarantine` (at least `QUARANTINE_COLUMNS`), the decoded group
    records with --consumer-offsets, and `lag` (`share_partition_lag`) with
    --end-offsets."""
    if SINCE not in state.column_names:
        raise ValueError(f"the state has no {SINCE} column: give it as the replay's fold does")
    limit = options.delivery_count_limit
    counts = counts_arrow.delivery_counts(state, limit)
    ranges = ranges_arrow.archived_ranges(
        ranges_arrow.reasoned_intervals(records, limit), ranges_arrow.final_state_columns(state)
    )
    poison = pc.equal(ranges.column("reason"), REASON_DELIVERY_LIMIT)
    segments = segments_arrow.history_segments(history)
    placements = segments_arrow.placements(segments)
    positions = exported_positions(records, quarantine, Source.SHARE_STATE.value)
    groups = groups_arrow.share_groups(group_records) if group_records is not None else None
    kinds = quarantine_kinds(quarantine)
    extents = None
    if group_records is not None:
        extents = position_extents(
            exported_positions(group_records, quarantine, Source.CONSUMER_OFFSETS.value)
        )
    findings = findings_table(
        {
            "history": history,
            "share_state_positions": positions,
            "quarantine_kinds": kinds,
            "segment_starts": segments_arrow.segment_starts(segments),
            "delivery_counts": counts,
            "placements": placements,
            "state": state,
            "delivery_count_limit": limit,
            "stall_span_seconds": options.stall_span_seconds,
            "state_topic_partitions": options.state_topic_partitions,
            "consumer_offsets_extents": extents,
            "group_records": group_records,
            "groups": groups,
            "lag": lag,
            "backfilled": None,
        }
    )
    return DriverAudits(
        delivery_counts=counts,
        poison_messages=ranges.filter(poison).drop_columns(["reason"]),
        archived_messages=ranges.filter(pc.invert(poison)),
        segments=segments,
        placements=placements,
        pruning_cutoff=pruning_arrow.pruning_cutoff(placements, positions),
        findings=findings,
        share_groups=groups,
        share_partition_lag=lag,
        quarantine_kinds=kinds,
    )
