"""Audit tables: one implementation of each, in Arrow, over the decoded and replayed tables.

`audit(...)` builds them all. Each table is computed by pure pyarrow and numpy functions,
one module per table family:

* `counts_arrow`: `delivery_counts`, offsets per (share-partition, delivery state, delivery
  count) in the final replayed state.
* `ranges_arrow`: the archived ranges -> `poison_messages` / `archived_messages`, offset
  ranges that any decoded record showed as Archived, merged per share-partition into
  maximal ranges.
* `segments_arrow`: `share_partition_segments` and `share_partition_placements`, per
  share-partition, segment and state-topic partition, the counts and first/last records
  the per-share-partition audits need.
* `pruning_arrow`: `pruning_cutoff`, per `__share_group_state` partition, the offset
  Kafka's share coordinator would prune the log up to.
* `groups_arrow`: `share_groups`, the share groups of `__consumer_offsets` as the group
  coordinator holds them.
* `lag`: `share_partition_lag`, lag per share-partition against a table of end offsets (a
  Spark join with the --end-offsets table, the one audit over an input only Spark reads).
* `findings`: data-quality problems, one row each, with a severity and an actionable
  message: one registered rule per kind of finding (`findings.RULES`).

The inputs that grow with the history (the records, the history, the exported positions)
are read per key by `sharestate.places.by_key`: on the driver the functions get the whole
table, in Spark each task gets the rows of whole keys; what they return is small (a row per
range, segment, state-topic partition or finding), and the rest is computed from it on the
driver. Column meanings, and why each rule is what it is: docs/audits.md.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits import (
    counts_arrow,
    groups_arrow,
    pruning_arrow,
    ranges_arrow,
    segments_arrow,
)
from sharestate.audits.findings import RULES, FindingRule, findings_table
from sharestate.audits.findings.records import exported_positions, quarantine_kinds
from sharestate.audits.findings.registry import SEVERITIES, Source
from sharestate.audits.findings.rows import empty_findings
from sharestate.audits.gaps_arrow import position_extents
from sharestate.audits.lag import share_partition_lag
from sharestate.audits.options import AuditOptions
from sharestate.audits.ranges_arrow import (
    REASON_BELOW_LIMIT,
    REASON_DELIVERY_LIMIT,
    REASON_NEVER_DELIVERED,
)
from sharestate.audits.segments_arrow import PLACEMENT_KEY, SEGMENT_KEY
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.kafka.constants import ARCHIVED
from sharestate.places import Frame, Place, Step, arrow_frame, arrow_of, by_key
from sharestate.replay.fold import SINCE

__all__ = [
    "HISTORY_COLUMNS",
    "PLACEMENT_KEY",
    "QUARANTINE_COLUMNS",
    "REASON_BELOW_LIMIT",
    "REASON_DELIVERY_LIMIT",
    "REASON_NEVER_DELIVERED",
    "RECORD_COLUMNS",
    "SEGMENT_KEY",
    "SEVERITIES",
    "AuditOptions",
    "AuditTables",
    "audit",
]

#: The columns of `share_state_records` the audits read.
RECORD_COLUMNS: Final = (*KEY, *LOG_ORDER, "source_timestamp", "record_type", "state_batches")
#: The columns of `share_partition_history` the audits read.
HISTORY_COLUMNS: Final = tuple(dict.fromkeys((*segments_arrow.HISTORY_COLUMNS, "replay_error")))
#: The columns of `quarantine` the audits read.
QUARANTINE_COLUMNS: Final = ("source", "reason_kind", *LOG_ORDER)

log = logging.getLogger("sharestate")

SHARE_STATE: Final = Source.SHARE_STATE.value
CONSUMER_OFFSETS: Final = Source.CONSUMER_OFFSETS.value


@dataclass(frozen=True)
class AuditTables:
    """The audit tables in Arrow, and what the run summary and the checkpoint read
    besides: the quarantine's kinds."""

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
    #: `position_extents` of the `__consumer_offsets` export (with its group records).
    consumer_offsets_extents: pa.Table | None

    @property
    def archived_ranges(self) -> pa.Table:
        """Both archived-range tables in one (with `reason`)."""
        poison = self.poison_messages.append_column(
            "reason", pa.array([REASON_DELIVERY_LIMIT] * self.poison_messages.num_rows)
        ).select(self.archived_messages.column_names)
        archived = self.archived_messages
        return pa.concat_tables([poison.cast(archived.schema), archived])


def _rules_reading(name: str) -> tuple[FindingRule[Any], ...]:
    return tuple(rule for rule in RULES if name in rule.inputs)


#: The finding rules over the inputs that grow with the history: run by key with them.
_HISTORY_RULES: Final = _rules_reading("history")
_POSITION_RULES: Final = _rules_reading("share_state_positions")


def _rule_step(rule: FindingRule[Any], name: str) -> Step:
    def step(rows: pa.Table) -> pa.Table:
        found = rule.run({name: rows})
        return found if found is not None else empty_findings()

    return step


def _finding_steps(rules: tuple[FindingRule[Any], ...], name: str) -> dict[str, Step]:
    """Steps that run `rules` over the input `name` (their only one), by rule name."""
    return {rule.name: _rule_step(rule, name) for rule in rules}


def _share_state_positions(records: Frame, quarantine: pa.Table) -> Frame:
    """The exported positions of `__share_group_state` (`exported_positions`): the records'
    and the quarantined rows', where the records are (in Spark, a union with the few
    quarantined rows)."""
    if isinstance(records, pa.Table):
        return exported_positions(records, quarantine, SHARE_STATE)
    quarantined = exported_positions(
        pa.table({name: pa.array([], pa.int64()) for name in LOG_ORDER}), quarantine, SHARE_STATE
    )
    return records.select(*LOG_ORDER).unionByName(arrow_frame(records.sparkSession, quarantined))


def _holding_archived(records: Frame) -> Frame:
    """The records with an Archived batch: the only ones the archived ranges read. In Spark
    the others are left out before the rows go to Python (most records hold none)."""
    if isinstance(records, pa.Table):
        return records
    return records.filter(F.exists("state_batches", lambda b: b["delivery_state"] == ARCHIVED))


def _lag(
    state: Frame, state_rows: pa.Table, end_offsets: DataFrame, group_rows: pa.Table | None
) -> pa.Table:
    spark = end_offsets.sparkSession
    names = (
        arrow_frame(spark, groups_arrow.topic_names(group_rows)) if group_rows is not None else None
    )
    frame = state if isinstance(state, DataFrame) else arrow_frame(spark, state_rows)
    lag: pa.Table = share_partition_lag(frame, end_offsets, names).toArrow()
    return lag


def audit(
    records: Frame,
    state: Frame,
    history: Frame,
    quarantine: Frame,
    options: AuditOptions | None = None,
    *,
    group_records: Frame | None = None,
    end_offsets: DataFrame | None = None,
    lag: Frame | None = None,
    place: Place = "driver",
) -> AuditTables:
    """Every audit table from `share_state_records` (at least `RECORD_COLUMNS`),
    `share_partition_state` (as the replay's fold gives it), `share_partition_history` (at
    least `HISTORY_COLUMNS`), `quarantine` (at least `QUARANTINE_COLUMNS`), the decoded
    group records with --consumer-offsets, and either the --end-offsets table or the lag
    computed from it. `place`: where the records and the history are read per key (tables
    given as Arrow are on the driver already)."""
    options = options or AuditOptions()
    limit = options.delivery_count_limit
    if place == "driver":
        records, history = arrow_of(records, RECORD_COLUMNS), arrow_of(history, HISTORY_COLUMNS)
    else:
        records = records.select(*RECORD_COLUMNS) if isinstance(records, DataFrame) else records
        history = history.select(*HISTORY_COLUMNS) if isinstance(history, DataFrame) else history
    state_rows = arrow_of(state)
    if SINCE not in state_rows.column_names:
        raise ValueError(f"the state has no {SINCE} column: give it as the replay's fold does")
    quarantine_rows = arrow_of(quarantine, QUARANTINE_COLUMNS)
    group_rows = arrow_of(group_records) if group_records is not None else None
    if lag is None and end_offsets is not None:
        lag_rows: pa.Table | None = _lag(state, state_rows, end_offsets, group_rows)
    else:
        lag_rows = arrow_of(lag) if lag is not None else None

    started = time.monotonic()
    of_history = by_key(
        history,
        KEY,
        {"segments": segments_arrow.history_segments, **_finding_steps(_HISTORY_RULES, "history")},
        place,
    )
    log.info("read the history per share-partition in %.1f s", time.monotonic() - started)
    segments = of_history["segments"]
    placements = segments_arrow.placements(segments)
    of_records = by_key(
        _holding_archived(records),
        KEY,
        {"ranges": lambda rows: ranges_arrow.merged_intervals(rows, limit)},
        place,
    )
    log.info("read the records per share-partition in %.1f s", time.monotonic() - started)
    ranges = ranges_arrow.with_final_state(of_records["ranges"], state_rows)
    of_positions = by_key(
        _share_state_positions(records, quarantine_rows),
        ["source_partition"],
        {
            "pruning": lambda rows: pruning_arrow.pruning_cutoff(placements, rows),
            **_finding_steps(_POSITION_RULES, "share_state_positions"),
        },
        place,
    )
    log.info("read the positions per state-topic partition in %.1f s", time.monotonic() - started)
    by_step = {**of_history, **of_positions}
    found = {rule.name: by_step[rule.name] for rule in (*_HISTORY_RULES, *_POSITION_RULES)}

    counts = counts_arrow.delivery_counts(state_rows, limit)
    groups = groups_arrow.share_groups(group_rows) if group_rows is not None else None
    kinds = quarantine_kinds(quarantine_rows)
    extents = None
    if group_rows is not None:
        extents = position_extents(
            exported_positions(group_rows, quarantine_rows, CONSUMER_OFFSETS)
        )
    inputs = {
        "quarantine_kinds": kinds,
        "segment_starts": segments_arrow.segment_starts(segments),
        "delivery_counts": counts,
        "placements": placements,
        "state": state_rows,
        "delivery_count_limit": limit,
        "stall_span_seconds": options.stall_span_seconds,
        "state_topic_partitions": options.state_topic_partitions,
        "consumer_offsets_extents": extents,
        "group_records": group_rows,
        "groups": groups,
        "lag": lag_rows,
        "backfilled": None,
    }
    poison = pc.equal(ranges.column("reason"), REASON_DELIVERY_LIMIT)
    return AuditTables(
        delivery_counts=counts,
        poison_messages=ranges.filter(poison).drop_columns(["reason"]),
        archived_messages=ranges.filter(pc.invert(poison)),
        segments=segments,
        placements=placements,
        pruning_cutoff=of_positions["pruning"],
        findings=findings_table(inputs, found),
        share_groups=groups,
        share_partition_lag=lag_rows,
        quarantine_kinds=kinds,
        consumer_offsets_extents=extents,
    )
