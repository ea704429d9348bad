"""Findings about updates the replay applied with no state before them, from
`share_partition_segments` rolled up per share-partition and segment (`segment_starts`:
`sharestate.audits.segments_arrow.segment_starts`, once for the three rules): a snapshot or
tombstone starts a segment; segment 0 is what comes before a share-partition's first
snapshot in the export."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings.registry import (
    FindingCode,
    FoundRows,
    Severity,
    Source,
    Value,
    finding_rule,
)
from sharestate.audits.findings.rows import choose, message
from sharestate.kafka.constants import TOMBSTONE, UPDATE


def _first_type(segment_starts: pa.Table) -> pa.ChunkedArray:
    """The record type of each segment's first record (`_first.record_type`)."""
    return pc.struct_field(segment_starts.column("_first"), "record_type")


def _starts_with_update(segment_starts: pa.Table) -> pa.ChunkedArray:
    return pc.equal(_first_type(segment_starts), UPDATE)


def _final(segment_starts: pa.Table) -> pa.ChunkedArray:
    return pc.equal(segment_starts.column("segment"), segment_starts.column("_last_segment"))


def _at_first_update(rows: pa.Table) -> dict[str, Value]:
    """Where a segment's row points: the share-partition, its first update, its updates."""
    first_update = rows.column("_first_update")
    return {
        "group_id": "group_id",
        "topic_id": "topic_id",
        "partition": "partition",
        "source_partition": pc.struct_field(first_update, "source_partition"),
        "source_offset": pc.struct_field(first_update, "source_offset"),
        "affected": "_updates",
    }


@finding_rule(
    FindingCode.UPDATE_BEFORE_SNAPSHOT,
    Severity.INFO,
    source=Source.SHARE_STATE,
    per_share_partition=True,
)
def update_before_snapshot(segment_starts: pa.Table) -> FoundRows:
    """ShareUpdate records before a share-partition's first ShareSnapshot in the export, when
    a snapshot follows: the export starts after Kafka pruned the log, which keeps only each
    share-partition's latest snapshot onwards. The history rows up to the snapshot are
    partial; the final state is exact. Nothing to do."""
    # Kleene logic and a filter that drops nulls, as SQL's `and`, `not` and `where`.
    keep = pc.and_kleene(_starts_with_update(segment_starts), pc.invert(_final(segment_starts)))
    rows = segment_starts.filter(keep)
    return FoundRows(
        rows,
        message(
            rows.num_rows,
            rows.column("_updates"),
            " ShareUpdate record(s) come before the first ShareSnapshot of this share-partition"
            " in the export (the export starts after Kafka pruned the log, which keeps only"
            " each share-partition's latest snapshot onwards). The history rows up to the"
            " snapshot are partial; the final state is exact",
        ),
        _at_first_update(rows),
    )


@finding_rule(
    FindingCode.STATE_WITHOUT_SNAPSHOT,
    Severity.WARNING,
    source=Source.SHARE_STATE,
    per_share_partition=True,
)
def state_without_snapshot(segment_starts: pa.Table) -> FoundRows:
    """A share-partition's state built from ShareUpdate records only, with no ShareSnapshot in
    the export: batches written before the export starts are missing, so the state may be
    incomplete, and Kafka's pruning cut-off does not track it (`pruning_cutoff` counts it as
    untracked). Export `__share_group_state` from its log start offset."""
    keep = pc.and_kleene(_starts_with_update(segment_starts), _final(segment_starts))
    rows = segment_starts.filter(keep)
    return FoundRows(
        rows,
        message(
            rows.num_rows,
            "the state of this share-partition was built from ",
            rows.column("_updates"),
            " ShareUpdate record(s) with no ShareSnapshot in the export: batches written"
            " before the export starts are missing, so the state may be incomplete, and"
            " Kafka's pruning cut-off does not track it (pruning_cutoff counts it as"
            " untracked). Export __share_group_state from its log start offset",
        ),
        _at_first_update(rows),
    )


@finding_rule(
    FindingCode.UPDATE_AFTER_TOMBSTONE,
    Severity.WARNING,
    source=Source.SHARE_STATE,
    per_share_partition=True,
)
def update_after_tombstone(segment_starts: pa.Table) -> FoundRows:
    """ShareUpdate records after a tombstone of the share-partition with no ShareSnapshot
    between. Kafka 4.1+ refuses writes to a deleted share-partition, so the export is out of
    order or incomplete (when they are the last segment, the final state was built from
    these updates only). Check how the export was produced."""
    keep = pc.and_kleene(
        pc.equal(_first_type(segment_starts), TOMBSTONE),
        pc.greater(segment_starts.column("_updates"), 0),
    )
    rows = segment_starts.filter(keep)
    return FoundRows(
        rows,
        message(
            rows.num_rows,
            rows.column("_updates"),
            " ShareUpdate record(s) follow a tombstone of this share-partition with no"
            " ShareSnapshot between (Kafka 4.1+ refuses writes to a deleted share-partition):"
            " the export is out of order or incomplete",
            choose(_final(rows), "; the final state was built from these updates only", ""),
        ),
        _at_first_update(rows),
    )
