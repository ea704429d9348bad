"""Audit tables: pure DataFrame -> DataFrame functions over the decoded and replayed tables.

Nothing here builds a Spark session or reads or writes storage, and every function returns a
lazy DataFrame. `audit(...)` builds them all; its findings are the one exception: the finding
rules are Arrow functions (`findings`), and `audit` brings the few columns they read to the
driver and runs them there. One module per table family:

* `counts`: `delivery_counts`, offsets per (share-partition, delivery state, delivery count)
  in the final replayed state.
* `ranges`: `archived_ranges` -> `poison_messages` / `archived_messages`, offset ranges that
  any decoded record showed as Archived, merged per share-partition into maximal ranges.
* `segments`: `share_partition_segments`, per share-partition, segment and state-topic
  partition, the counts and first/last records the per-share-partition audits need;
  `segments_arrow`, the same (and the placements) in Arrow, for the few thousand
  share-partitions an incremental run touches, on the driver.
* `pruning`: `pruning_cutoff`, per `__share_group_state` partition, the offset Kafka's share
  coordinator would prune the log up to.
* `groups`: `share_groups`, the share groups of `__consumer_offsets` as the group
  coordinator holds them.
* `lag`: `share_partition_lag`, lag per share-partition against a table of end offsets.
* `start_offsets`: when each start offset last moved (the fold's columns, by a window).
* `findings`: data-quality problems, one row each, with a severity and an actionable
  message: one registered rule per kind of finding (`findings.RULES`), each one function
  over Arrow tables (`audit` gives them its inputs as Arrow).
* `driver`: every table above in Arrow on the driver, from each one's Arrow twin
  (`counts_arrow`, `ranges_arrow`, `segments_arrow`, `pruning_arrow`, `groups_arrow`; pure
  pyarrow and numpy, held equal to the DataFrame versions by the tests) and the finding
  rules: what a small run and an incremental run's touched share-partitions use.
* `columns`, `options`: the column helpers they share; the run's settings.

Column meanings, and why each rule is what it is: docs/audits.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits.columns import delivery_state_name, kafka_key_hash
from sharestate.audits.counts import delivery_counts
from sharestate.audits.findings import (
    FINDINGS_SCHEMA,
    RULES,
    SEVERITIES,
    STATE_COLUMNS,
    FindingCode,
    Severity,
    Source,
    catalog,
    findings_table,
)
from sharestate.audits.findings import records as finding_records
from sharestate.audits.gaps_arrow import position_extents
from sharestate.audits.groups import latest_group_records, share_groups, topic_names
from sharestate.audits.lag import share_partition_lag
from sharestate.audits.options import AuditOptions
from sharestate.audits.pruning import exported_positions, pruning_cutoff
from sharestate.audits.ranges import (
    REASON_BELOW_LIMIT,
    REASON_DELIVERY_LIMIT,
    REASON_NEVER_DELIVERED,
    archived_intervals,
    archived_messages,
    archived_ranges,
    merge_ranges,
    poison_messages,
    stored_ranges,
)
from sharestate.audits.segments import (
    merge_segments,
    share_partition_placements,
    share_partition_segments,
)
from sharestate.audits.segments_arrow import PLACEMENT_KEY, SEGMENT_KEY, segment_starts
from sharestate.audits.start_offsets import start_offset_moves
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.io.store import arrow_frame
from sharestate.replay.fold import SINCE

__all__ = [
    "FINDINGS_SCHEMA",
    "PLACEMENT_KEY",
    "REASON_BELOW_LIMIT",
    "REASON_DELIVERY_LIMIT",
    "REASON_NEVER_DELIVERED",
    "RULES",
    "SEGMENT_KEY",
    "SEVERITIES",
    "AuditOptions",
    "Audits",
    "FindingCode",
    "Settle",
    "Severity",
    "Source",
    "archived_intervals",
    "archived_messages",
    "archived_ranges",
    "audit",
    "catalog",
    "delivery_counts",
    "delivery_state_name",
    "exported_positions",
    "kafka_key_hash",
    "latest_group_records",
    "merge_ranges",
    "merge_segments",
    "poison_messages",
    "pruning_cutoff",
    "share_groups",
    "share_partition_lag",
    "share_partition_placements",
    "share_partition_segments",
    "start_offset_moves",
    "stored_ranges",
    "topic_names",
]


@dataclass(frozen=True)
class Audits:
    """The audit tables. `poison_messages` and `archived_messages` are two filters of
    `archived_ranges` (which `audit` settles, so the batches are exploded and merged once)."""

    delivery_counts: DataFrame
    archived_ranges: DataFrame
    poison_messages: DataFrame
    archived_messages: DataFrame
    segments: DataFrame
    #: `share_partition_placements` of the segments (kept for incremental runs).
    placements: DataFrame
    pruning_cutoff: DataFrame
    findings: DataFrame
    share_groups: DataFrame | None = None
    share_partition_lag: DataFrame | None = None
    #: What the finding rules read, as Arrow (`findings.FindingInputs`' names).
    finding_inputs: Mapping[str, Any] | None = None


#: What `audit` does with results that several tables read, given together when they do
#: not read each other: (frame, small) pairs -> the frames they read instead (a None frame
#: stays None).
Settle = Callable[[Sequence[tuple[DataFrame | None, bool]]], list[DataFrame | None]]


def _as_they_are(frames: Sequence[tuple[DataFrame | None, bool]]) -> list[DataFrame | None]:
    return [frame for frame, _ in frames]


def _lag(
    state: DataFrame, end_offsets: DataFrame | None, group_records: DataFrame | None
) -> DataFrame | None:
    if end_offsets is None:
        return None
    names = topic_names(group_records) if group_records is not None else None
    return share_partition_lag(state, end_offsets, names)


def audit(
    records: DataFrame,
    state: DataFrame,
    history: DataFrame,
    quarantine: DataFrame,
    options: AuditOptions | None = None,
    *,
    group_records: DataFrame | None = None,
    end_offsets: DataFrame | None = None,
    settle: Settle | None = None,
) -> Audits:
    """All audit tables from `share_state_records`, `share_partition_state`,
    `share_partition_history`, `quarantine`, and optionally `share_group_records` and an end
    offsets table. (An incremental run keeps them up to date from its new records:
    `sharestate.job.incremental`.)

    `settle` is given the results that other audit tables read (with `small`: one of a few
    rows per share-partition or fewer, not one that grows with the history), those that do
    not read each other together, before the tables that read them are built; those read
    what it returns: the caller computes each once there (persisted, or brought to the
    driver), side by side if it likes. By default nothing is settled."""
    options = options or AuditOptions()
    keep = settle or _as_they_are
    if SINCE not in state.columns:  # a state straight from `replay`
        state = state.join(start_offset_moves(history), list(KEY), "left")
    counts, ranges, segments, groups, lag = keep(
        [
            (delivery_counts(state, options.delivery_count_limit), True),
            (archived_ranges(records, state, options.delivery_count_limit), False),
            (share_partition_segments(history), False),
            (share_groups(group_records) if group_records is not None else None, True),
            (_lag(state, end_offsets, group_records), True),
        ]
    )
    assert counts is not None and ranges is not None and segments is not None
    (placements,) = keep([(share_partition_placements(segments), True)])
    assert placements is not None
    positions = exported_positions(records, quarantine, Source.SHARE_STATE.value)
    inputs = _finding_inputs(
        positions,
        state,
        history,
        quarantine,
        options,
        segments=segments,
        counts=counts,
        placements=placements,
        group_records=group_records,
        groups=groups,
        lag=lag,
    )
    # Findings are few: one file when written.
    findings = arrow_frame(records.sparkSession, findings_table(inputs)).coalesce(1)
    return Audits(
        delivery_counts=counts,
        archived_ranges=ranges,
        poison_messages=poison_messages(ranges),
        archived_messages=archived_messages(ranges),
        segments=segments,
        placements=placements,
        pruning_cutoff=pruning_cutoff(placements, positions),
        findings=findings,
        share_groups=groups,
        share_partition_lag=lag,
        finding_inputs=inputs,
    )


def _finding_inputs(
    positions: DataFrame,
    state: DataFrame,
    history: DataFrame,
    quarantine: DataFrame,
    options: AuditOptions,
    *,
    segments: DataFrame,
    counts: DataFrame,
    placements: DataFrame,
    group_records: DataFrame | None,
    groups: DataFrame | None,
    lag: DataFrame | None,
) -> dict[str, Any]:
    """The finding rules' inputs, brought to the driver as Arrow (only the columns and rows
    the rules read): a bridge until the audits themselves are computed in Arrow."""

    def arrow(frame: DataFrame | None) -> pa.Table | None:
        return None if frame is None else frame.toArrow()

    quarantined = quarantine.select("source", "reason_kind", *LOG_ORDER)
    consumer_offsets_extents = None
    if group_records is not None:
        consumer_offsets_extents = position_extents(
            exported_positions(group_records, quarantine, Source.CONSUMER_OFFSETS.value).toArrow()
        )
    return {
        # replay_error reads only the records the replay could not apply.
        "history": arrow(
            history.filter(F.col("replay_error").isNotNull()).select(
                *KEY, *LOG_ORDER, "replay_error"
            )
        ),
        "share_state_positions": positions.toArrow(),
        "quarantine_kinds": finding_records.quarantine_kinds(quarantined.toArrow()),
        "segment_starts": segment_starts(segments.toArrow()),
        "delivery_counts": arrow(counts),
        "placements": arrow(placements),
        "state": arrow(state.select(*STATE_COLUMNS)),
        "delivery_count_limit": options.delivery_count_limit,
        "stall_span_seconds": options.stall_span_seconds,
        "state_topic_partitions": options.state_topic_partitions,
        "consumer_offsets_extents": consumer_offsets_extents,
        # The rules read only the group records' latest time.
        "group_records": arrow(
            None if group_records is None else group_records.select("source_timestamp")
        ),
        "groups": arrow(groups),
        "lag": arrow(lag),
        "backfilled": None,
    }
