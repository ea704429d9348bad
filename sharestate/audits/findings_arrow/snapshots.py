"""Arrow twins of `sharestate.audits.findings.snapshots`'s rules (`rows.twin_of`), from
`segment_starts` as Arrow (the columns of `snapshots.segment_starts`, which
`sharestate.audits.segments_arrow.segment_starts` also gives)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings import snapshots
from sharestate.audits.findings_arrow.rows import FoundRows, Value, choose, message, twin_of
from sharestate.kafka.constants import TOMBSTONE, UPDATE


def _first_type(segment_starts: pa.Table) -> pa.ChunkedArray:
    """The record type of each segment's first record (`_first.record_type`)."""
    return pc.struct_field(segment_starts.column("_first"), "record_type")


def _starts_with_update(segment_starts: pa.Table) -> pa.ChunkedArray:
    return pc.equal(_first_type(segment_starts), UPDATE)


def _final(segment_starts: pa.Table) -> pa.ChunkedArray:
    return pc.equal(segment_starts.column("segment"), segment_starts.column("_last_segment"))


def _at_first_update(rows: pa.Table) -> dict[str, Value]:
    """`snapshots._at_first_update`: the share-partition, its first update, its updates."""
    first_update = rows.column("_first_update")
    return {
        "group_id": "group_id",
        "topic_id": "topic_id",
        "partition": "partition",
        "source_partition": pc.struct_field(first_update, "source_partition"),
        "source_offset": pc.struct_field(first_update, "source_offset"),
        "affected": "_updates",
    }


@twin_of(snapshots.update_before_snapshot)
def update_before_snapshot(segment_starts: pa.Table) -> FoundRows:
    """Segments that start with an update and are not the share-partition's last: updates
    before its first snapshot in the export."""
    # Kleene logic and a filter that drops nulls: Spark's `&`, `~` and `filter`.
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


@twin_of(snapshots.state_without_snapshot)
def state_without_snapshot(segment_starts: pa.Table) -> FoundRows:
    """Last segments that start with an update: a state built from updates alone."""
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


@twin_of(snapshots.update_after_tombstone)
def update_after_tombstone(segment_starts: pa.Table) -> FoundRows:
    """Segments that start with a tombstone and hold updates."""
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
