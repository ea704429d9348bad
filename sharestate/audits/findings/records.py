"""Findings about the exported rows themselves: rows that could not be decoded, records the
replay could not apply, and offsets missing from an export."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
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
from sharestate.decode.columns import LOG_ORDER
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC


def quarantine_kinds(quarantine: DataFrame) -> DataFrame:
    """The quarantined rows per (source, reason_kind): how many (`rows`) and the first in
    log order (`first_source_partition`, `first_source_offset`). What `decode_quarantine`
    reads; an incremental run adds its new rows' counts to the stored ones."""
    kinds = quarantine.groupBy("source", "reason_kind").agg(
        F.count(F.lit(1)).alias("rows"), F.min(F.struct(*LOG_ORDER)).alias("_first")
    )
    return kinds.select(
        "source",
        "reason_kind",
        "rows",
        F.col("_first.source_partition").alias("first_source_partition"),
        F.col("_first.source_offset").alias("first_source_offset"),
    )


@finding_rule(FindingCode.DECODE_QUARANTINE, Severity.WARNING)
def decode_quarantine(quarantine_kinds: DataFrame) -> Found:
    """Rows of an export that could not be decoded, one finding per (input, reason kind).
    They are in the `quarantine` table with their bytes and exact reason. Kafka skips such
    records too, so the replay may differ from the broker's: look at the reason, and at
    what wrote the rows."""
    topic = (
        F.when(F.col("source") == Source.SHARE_STATE.value, F.lit(SHARE_STATE_TOPIC))
        .when(F.col("source") == Source.CONSUMER_OFFSETS.value, F.lit(CONSUMER_OFFSETS_TOPIC))
        .otherwise(F.col("source"))
    )
    return Found(
        quarantine_kinds,
        message(
            F.col("rows"),
            " row(s) of the ",
            topic,
            " export could not be decoded (",
            F.col("reason_kind"),
            "); they are in the quarantine table with their bytes and exact reason."
            " Kafka skips such records too, so the replay may differ from the broker's",
        ),
        Where(
            source_partition="first_source_partition",
            source_offset="first_source_offset",
            affected="rows",
        ),
        source=F.col("source"),
    )


@finding_rule(FindingCode.REPLAY_ERROR, Severity.ERROR, source=Source.SHARE_STATE, per_record=True)
def replay_error(history: DataFrame) -> Found:
    """A `__share_group_state` record the replay could not apply (for example a state batch
    that ends before it starts), one finding per record. Kafka's own load fails on it as
    well; the share-partition's state is the one before it. Find out what wrote the
    record."""
    return Found(
        history.filter(F.col("replay_error").isNotNull()),
        message(
            "this record could not be applied (",
            F.col("replay_error"),
            "); Kafka's own load fails on it as well. The share-partition's state is the one"
            " before it: find out what wrote the record",
        ),
        Where(
            group_id="group_id",
            topic_id="topic_id",
            partition="partition",
            source_partition="source_partition",
            source_offset="source_offset",
            affected=F.lit(1),
        ),
    )


def gap_ranges(positions: DataFrame) -> DataFrame:
    """The gaps between exported positions (source_partition, source_offset), one row each:
    source_partition, `_from`, `_to` (the first and last missing offset). Offsets before a
    partition's first position are not gaps. A window runs only over the partitions with a
    gap."""
    stats = positions.groupBy("source_partition").agg(
        F.count(F.lit(1)).alias("_rows"),
        F.min("source_offset").alias("_min"),
        F.max("source_offset").alias("_max"),
    )
    gapped = stats.filter(F.col("_max") - F.col("_min") + 1 > F.col("_rows")).select(
        "source_partition"
    )
    ordered = Window.partitionBy("source_partition").orderBy("source_offset")
    return (
        positions.join(F.broadcast(gapped), "source_partition", "left_semi")
        .withColumn("_previous", F.lag("source_offset").over(ordered))
        .filter(F.col("source_offset") - F.col("_previous") > 1)
        .select(
            "source_partition",
            (F.col("_previous") + 1).alias("_from"),
            (F.col("source_offset") - 1).alias("_to"),
        )
    )


def _gaps_found(gaps: DataFrame) -> Found:
    missing = gaps.withColumn("_missing", F.col("_to") - F.col("_from") + 1)
    return Found(
        missing,
        message(
            "offsets ",
            F.col("_from"),
            "-",
            F.col("_to"),
            " (",
            F.col("_missing"),
            " records) of __share_group_state partition ",
            F.col("source_partition"),
            " are missing from the export. The topic is not compacted and Kafka prunes it only"
            " from its start, so the export lost them: the replay of share-partitions on this"
            " partition may miss updates; re-export the range",
        ),
        Where(source_partition="source_partition", source_offset="_from", affected="_missing"),
    )


@finding_rule(
    FindingCode.SOURCE_OFFSET_GAP, Severity.WARNING, source=Source.SHARE_STATE, per_record=True
)
def share_state_gap(share_state_positions: DataFrame) -> Found:
    """Offsets missing inside the exported range of a `__share_group_state` partition, one
    finding per gap (offsets before the first exported one are pruning, not a gap;
    quarantined rows count as exported). The topic is not compacted, its writer is not
    transactional and Kafka prunes it only from its start, so a gap means the export lost
    records: the replay of the share-partitions on that partition may miss updates.
    Re-export the range."""
    return _gaps_found(gap_ranges(share_state_positions))


def share_state_gap_rows(gaps: DataFrame) -> DataFrame:
    """`share_state_gap`'s findings rows for gaps already found (`gap_ranges`' columns), as
    an incremental run finds them from the stored gaps and its new positions."""
    return share_state_gap.rows(_gaps_found(gaps))


def position_extents(positions: DataFrame) -> DataFrame:
    """Per exported partition: how many positions (`rows`), the first and the last. What
    `consumer_offsets_gap` reads; an incremental run widens the stored extents by its new
    positions (the checkpoint keeps them)."""
    return positions.groupBy("source_partition").agg(
        F.count(F.lit(1)).cast("long").alias("rows"),
        F.min("source_offset").alias("first_offset"),
        F.max("source_offset").alias("last_offset"),
    )


@finding_rule(FindingCode.SOURCE_OFFSET_GAP, Severity.INFO, source=Source.CONSUMER_OFFSETS)
def consumer_offsets_gap(consumer_offsets_extents: DataFrame) -> Found:
    """Offsets missing in the exported range of a `__consumer_offsets` partition, one finding
    per partition with the number missing. Expected: the topic is compacted and transaction
    markers take offsets. Listed so that the export's completeness can be judged; nothing to
    do unless the count is far above what compaction explains."""
    missing = F.col("last_offset") - F.col("first_offset") + 1 - F.col("rows")
    gapped = consumer_offsets_extents.withColumn("_missing", missing)
    return Found(
        gapped.filter(F.col("_missing") > 0),
        message(
            F.col("_missing"),
            " offsets between ",
            F.col("first_offset"),
            " and ",
            F.col("last_offset"),
            " of __consumer_offsets partition ",
            F.col("source_partition"),
            " are not in the export; expected, since the topic is compacted and transaction"
            " markers take offsets",
        ),
        Where(
            source_partition="source_partition", source_offset="first_offset", affected="_missing"
        ),
    )


@finding_rule(FindingCode.BACKFILL_APPLIED, Severity.INFO)
def backfill_applied(backfilled: DataFrame) -> Found:
    """Rows below the last run's checkpoint arrived in this incremental run (a late file, or
    a re-export of a range the export had lost) and were applied, one finding per exported
    partition: the share-partitions they touch were replayed again from their stored
    records, so every table is as a full run over the export would have it. Listed by the
    run that applied them only; nothing to do."""
    per_partition = backfilled.groupBy("source", "source_partition").agg(
        F.count(F.lit(1)).alias("_rows"),
        F.min("source_offset").alias("_first"),
        F.max("source_offset").alias("_last"),
    )
    return Found(
        per_partition,
        message(
            F.col("_rows"),
            " row(s) of partition ",
            F.col("source_partition"),
            " (offsets ",
            F.col("_first"),
            "-",
            F.col("_last"),
            ") arrived below the last run's checkpoint and were applied: the share-partitions"
            " they touch were replayed again, so every table is as a full run would have it",
        ),
        Where(source_partition="source_partition", source_offset="_first", affected="_rows"),
        source=F.col("source"),
    )
