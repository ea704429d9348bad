"""Audit tables: pure DataFrame -> DataFrame functions over the decoded and replayed tables.

Nothing here builds a Spark session, reads or writes storage, or brings rows to the driver:
every function returns a lazy DataFrame (a few use one-row aggregates cross-joined back, so
choices such as the state-topic partition count are made inside Spark too). `audit(...)`
builds them all; one module per table family:

* `counts`: `delivery_counts`, offsets per (share-partition, delivery state, delivery count)
  in the final replayed state.
* `ranges`: `archived_ranges` -> `poison_messages` / `archived_messages`, offset ranges that
  any decoded record showed as Archived, merged per share-partition into maximal ranges.
* `segments`: `share_partition_segments`, per share-partition, segment and state-topic
  partition, the counts and first/last records the per-share-partition audits need.
* `pruning`: `pruning_cutoff`, per `__share_group_state` partition, the offset Kafka's share
  coordinator would prune the log up to.
* `groups`: `share_groups`, the share groups of `__consumer_offsets` as the group
  coordinator holds them.
* `lag`: `share_partition_lag`, lag per share-partition against a table of end offsets.
* `start_offsets`: when each start offset last moved (the fold's columns, by a window).
* `findings`: data-quality problems, one row each, with a severity and an actionable
  message: one registered rule per kind of finding (`findings.RULES`).
* `columns`, `options`: the column helpers they share; the run's settings.

Column meanings, and why each rule is what it is: docs/audits.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits.columns import delivery_state_name, kafka_key_hash
from sharestate.audits.counts import delivery_counts
from sharestate.audits.findings import (
    FINDINGS_SCHEMA,
    RULES,
    SEVERITIES,
    FindingCode,
    FindingInputs,
    Severity,
    Source,
    catalog,
    findings_table,
    per_record_findings,
    wrong_state_partition_findings,
)
from sharestate.audits.findings.records import share_state_gap
from sharestate.audits.groups import latest_group_records, share_groups, topic_names
from sharestate.audits.lag import share_partition_lag
from sharestate.audits.options import AuditOptions
from sharestate.audits.pruning import carried_pruning_cutoff, exported_positions, pruning_cutoff
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
from sharestate.audits.segments import SEGMENT_KEY, share_partition_segments
from sharestate.audits.start_offsets import start_offset_moves
from sharestate.decode.columns import KEY
from sharestate.replay.fold import SINCE

__all__ = [
    "FINDINGS_SCHEMA",
    "REASON_BELOW_LIMIT",
    "REASON_DELIVERY_LIMIT",
    "REASON_NEVER_DELIVERED",
    "RULES",
    "SEGMENT_KEY",
    "SEVERITIES",
    "AuditOptions",
    "Audits",
    "CarriedAudits",
    "FindingCode",
    "Severity",
    "Source",
    "archived_intervals",
    "archived_messages",
    "archived_ranges",
    "audit",
    "carried_pruning_cutoff",
    "catalog",
    "delivery_counts",
    "delivery_state_name",
    "exported_positions",
    "kafka_key_hash",
    "latest_group_records",
    "merge_ranges",
    "poison_messages",
    "pruning_cutoff",
    "share_groups",
    "share_partition_lag",
    "share_partition_segments",
    "start_offset_moves",
    "stored_ranges",
    "topic_names",
    "wrong_state_partition_findings",
]


@dataclass(frozen=True)
class CarriedAudits:
    """What an incremental run carries over from the earlier run's audit tables."""

    #: The records this run adds (the rest are in the earlier run's tables).
    new_records: DataFrame
    #: The earlier run's poison_messages (with `reason` added) and archived_messages.
    archived_ranges: DataFrame
    #: This run's history rows and quarantined rows (only the new ones).
    new_history: DataFrame | None = None
    new_quarantine: DataFrame | None = None
    #: The earlier run's findings and pruning_cutoff (its last exported offsets): findings
    #: of one record or one gap each go on from there.
    findings: DataFrame | None = None
    pruning_cutoff: DataFrame | None = None

    #: The earlier run's share_partition_segments.
    segments: DataFrame | None = None

    def complete(self) -> bool:
        """Whether the findings, the pruning cut-off and the segments go on from here too
        (else only the archived ranges do)."""
        return all(
            df is not None
            for df in (
                self.new_history,
                self.new_quarantine,
                self.findings,
                self.pruning_cutoff,
                self.segments,
            )
        )


@dataclass(frozen=True)
class Audits:
    """The audit tables. `poison_messages` and `archived_messages` are two filters of
    `archived_ranges`: persist that one to explode and merge the batches once."""

    delivery_counts: DataFrame
    archived_ranges: DataFrame
    poison_messages: DataFrame
    archived_messages: DataFrame
    segments: DataFrame
    pruning_cutoff: DataFrame
    findings: DataFrame
    share_groups: DataFrame | None = None
    share_partition_lag: DataFrame | None = None

    def worth_caching(self) -> list[DataFrame]:
        """The small results that several tables (or a table and the run summary) read:
        persist them to compute each once. The rest are filters of these."""
        frames = [
            self.delivery_counts,
            self.archived_ranges,
            self.segments,
            self.pruning_cutoff,
            self.share_groups,
            self.share_partition_lag,
            self.findings,
        ]
        return [frame for frame in frames if frame is not None]


def _new_share_state_positions(carried: CarriedAudits) -> DataFrame:
    """The exported positions of the new rows of `__share_group_state`."""
    return exported_positions(carried.new_records, carried.new_quarantine, Source.SHARE_STATE.value)


def _new_rows_only(inputs: FindingInputs, carried: CarriedAudits) -> FindingInputs:
    """`inputs` with the per-record inputs of an incremental run: the new history rows, and
    the new positions plus each partition's last stored one (`last_exported_offset` of the
    stored pruning_cutoff). New rows all lie above the stored ones on each partition, so a
    new gap is one among them or one between the last stored position and the first new
    one."""
    assert carried.new_history is not None and carried.pruning_cutoff is not None
    boundary = carried.pruning_cutoff.filter(F.col("last_exported_offset").isNotNull()).select(
        "source_partition", F.col("last_exported_offset").alias("source_offset")
    )
    return replace(
        inputs,
        history=carried.new_history,
        share_state_positions=_new_share_state_positions(carried).unionByName(boundary),
    )


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
    carried: CarriedAudits | None = None,
) -> Audits:
    """All audit tables from `share_state_records`, `share_partition_state`,
    `share_partition_history`, `quarantine`, and optionally `share_group_records` and an end
    offsets table. With `carried` (an incremental run), tables that can go on from what an
    earlier run wrote do so, reading only the new records."""
    options = options or AuditOptions()
    if SINCE not in state.columns:  # a state straight from `replay`
        state = state.join(start_offset_moves(history), list(KEY), "left")
    counts = delivery_counts(state, options.delivery_count_limit)
    if carried is not None:
        ranges = archived_ranges(
            carried.new_records, state, options.delivery_count_limit, carried.archived_ranges
        )
    else:
        ranges = archived_ranges(records, state, options.delivery_count_limit)
    goes_on = carried if carried is not None and carried.complete() else None
    if goes_on is not None:
        assert goes_on.new_history is not None
        segments = share_partition_segments(goes_on.new_history, goes_on.segments)
    else:
        segments = share_partition_segments(history)
    groups = share_groups(group_records) if group_records is not None else None
    consumer_offsets_positions = None
    if group_records is not None:
        consumer_offsets_positions = exported_positions(
            group_records, quarantine, Source.CONSUMER_OFFSETS.value
        )
    inputs = FindingInputs(
        history=history,
        share_state_positions=exported_positions(records, quarantine, Source.SHARE_STATE.value),
        quarantine=quarantine,
        segments=segments,
        delivery_counts=counts,
        state=state,
        delivery_count_limit=options.delivery_count_limit,
        stall_span_seconds=options.stall_span_seconds,
        state_topic_partitions=options.state_topic_partitions,
        consumer_offsets_positions=consumer_offsets_positions,
        group_records=group_records,
        groups=groups,
        lag=_lag(state, end_offsets, group_records),
    )
    if goes_on is not None:
        assert goes_on.pruning_cutoff is not None
        per_record = per_record_findings(_new_rows_only(inputs, goes_on), goes_on.findings)
        cutoff = carried_pruning_cutoff(
            segments,
            goes_on.pruning_cutoff,
            _new_share_state_positions(goes_on),
            per_record.filter(share_state_gap.matches()),
        )
    else:
        per_record = per_record_findings(inputs)
        cutoff = pruning_cutoff(segments, inputs.share_state_positions)
    return Audits(
        delivery_counts=counts,
        archived_ranges=ranges,
        poison_messages=poison_messages(ranges),
        archived_messages=archived_messages(ranges),
        segments=segments,
        pruning_cutoff=cutoff,
        findings=findings_table(inputs, per_record),
        share_groups=groups,
        share_partition_lag=inputs.lag,
    )
