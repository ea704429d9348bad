"""Findings about updates the replay applied with no state before them, from
`share_partition_segments` rolled up per share-partition and segment (`segment_starts`, once
for the three rules): a snapshot or tombstone starts a segment; segment 0 is what comes
before a share-partition's first snapshot in the export."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sharestate.audits.columns import message
from sharestate.audits.findings.registry import (
    FindingCode,
    Found,
    Severity,
    Source,
    Where,
    finding_rule,
)
from sharestate.decode.columns import KEY
from sharestate.kafka.constants import TOMBSTONE, UPDATE


def segment_starts(segments: DataFrame) -> DataFrame:
    """Per share-partition and segment (over its state-topic partitions): its first record
    (`_first`), its first update (`_first_update`), its updates (`_updates`) and the
    share-partition's last segment (`_last_segment`)."""
    first_update = F.struct("source_partition", F.col("first_update_offset").alias("source_offset"))
    starts = segments.groupBy(*KEY, "segment").agg(
        F.min(
            F.struct(
                "source_partition",
                F.col("first_record.source_offset").alias("source_offset"),
                F.col("first_record.record_type").alias("record_type"),
            )
        ).alias("_first"),
        F.min(F.when(F.col("first_update_offset").isNotNull(), first_update)).alias(
            "_first_update"
        ),
        F.sum("updates").alias("_updates"),
    )
    return starts.withColumn("_last_segment", F.max("segment").over(Window.partitionBy(*KEY)))


def _starts_with_update() -> Column:
    return F.col("_first.record_type") == UPDATE


def _final() -> Column:
    return F.col("segment") == F.col("_last_segment")


def _at_first_update() -> Where:
    return Where(
        group_id="group_id",
        topic_id="topic_id",
        partition="partition",
        source_partition=F.col("_first_update.source_partition"),
        source_offset=F.col("_first_update.source_offset"),
        affected="_updates",
    )


@finding_rule(
    FindingCode.UPDATE_BEFORE_SNAPSHOT,
    Severity.INFO,
    source=Source.SHARE_STATE,
    per_share_partition=True,
)
def update_before_snapshot(segment_starts: DataFrame) -> Found:
    """ShareUpdate records before a share-partition's first ShareSnapshot in the export, when
    a snapshot follows: the export starts after Kafka pruned the log, which keeps only each
    share-partition's latest snapshot onwards. The history rows up to the snapshot are
    partial; the final state is exact. Nothing to do."""
    return Found(
        segment_starts.filter(_starts_with_update() & ~_final()),
        message(
            F.col("_updates"),
            " ShareUpdate record(s) come before the first ShareSnapshot of this share-partition"
            " in the export (the export starts after Kafka pruned the log, which keeps only"
            " each share-partition's latest snapshot onwards). The history rows up to the"
            " snapshot are partial; the final state is exact",
        ),
        _at_first_update(),
    )


@finding_rule(
    FindingCode.STATE_WITHOUT_SNAPSHOT,
    Severity.WARNING,
    source=Source.SHARE_STATE,
    per_share_partition=True,
)
def state_without_snapshot(segment_starts: DataFrame) -> Found:
    """A share-partition's state built from ShareUpdate records only, with no ShareSnapshot in
    the export: batches written before the export starts are missing, so the state may be
    incomplete, and Kafka's pruning cut-off does not track it (`pruning_cutoff` counts it as
    untracked). Export `__share_group_state` from its log start offset."""
    return Found(
        segment_starts.filter(_starts_with_update() & _final()),
        message(
            "the state of this share-partition was built from ",
            F.col("_updates"),
            " ShareUpdate record(s) with no ShareSnapshot in the export: batches written"
            " before the export starts are missing, so the state may be incomplete, and"
            " Kafka's pruning cut-off does not track it (pruning_cutoff counts it as"
            " untracked). Export __share_group_state from its log start offset",
        ),
        _at_first_update(),
    )


@finding_rule(
    FindingCode.UPDATE_AFTER_TOMBSTONE,
    Severity.WARNING,
    source=Source.SHARE_STATE,
    per_share_partition=True,
)
def update_after_tombstone(segment_starts: DataFrame) -> Found:
    """ShareUpdate records after a tombstone of the share-partition with no ShareSnapshot
    between. Kafka 4.1+ refuses writes to a deleted share-partition, so the export is out of
    order or incomplete (when they are the last segment, the final state was built from
    these updates only). Check how the export was produced."""
    after_tombstone = (F.col("_first.record_type") == TOMBSTONE) & (F.col("_updates") > 0)
    return Found(
        segment_starts.filter(after_tombstone),
        message(
            F.col("_updates"),
            " ShareUpdate record(s) follow a tombstone of this share-partition with no"
            " ShareSnapshot between (Kafka 4.1+ refuses writes to a deleted share-partition):"
            " the export is out of order or incomplete",
            F.when(
                _final(), F.lit("; the final state was built from these updates only")
            ).otherwise(F.lit("")),
        ),
        _at_first_update(),
    )
