"""`pruning_cutoff`: per `__share_group_state` partition, the offset Kafka's share
coordinator would prune the log up to (`ShareCoordinatorOffsetsManager.lastRedundantOffset`),
from `share_partition_placements`, and how many exported rows lie before it."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.kafka.constants import SNAPSHOT, TOMBSTONE


def exported_positions(records: DataFrame, quarantine: DataFrame | None, source: str) -> DataFrame:
    """(source_partition, source_offset) of every exported row of one input that reached a
    table: decoded records and quarantined rows (not rows of another topic)."""
    positions = records.select(*LOG_ORDER)
    if quarantine is not None:
        positions = positions.unionByName(
            quarantine.filter(
                (F.col("source") == source) & (F.col("reason_kind") != "wrong topic")
            ).select(*LOG_ORDER)
        )
    return positions


def _cutoffs(placements: DataFrame) -> DataFrame:
    """Per `__share_group_state` partition: the cut-off and the share-partitions behind it,
    from `share_partition_placements`."""
    per_key = placements.select(
        "source_partition",
        *KEY,
        F.col("last_record").alias("_last"),
        F.col("last_snapshot_or_tombstone").alias("_event"),
    )
    tracked = F.coalesce(F.col("_event.record_type") == SNAPSHOT, F.lit(False))
    live = F.col("_last.record_type") != TOMBSTONE
    held = F.struct(
        F.col("_event.source_offset").alias("offset"),
        F.col("_event.source_timestamp").alias("timestamp"),
        *[F.col(c).alias(c) for c in KEY],
    )
    last_event = F.struct(
        F.col("_event.source_offset").alias("offset"),
        F.col("_event.source_timestamp").alias("timestamp"),
    )
    per_partition = per_key.groupBy("source_partition").agg(
        F.min(F.when(tracked, held)).alias("_held"),
        F.max(last_event).alias("_last_event"),
        F.count(F.when(live, 1)).alias("live_share_partitions"),
        F.count(F.when(tracked, 1)).alias("tracked_share_partitions"),
        F.count(F.when(live & ~tracked, 1)).alias("untracked_live_share_partitions"),
        F.count(F.when(~live, 1)).alias("deleted_share_partitions"),
    )
    return per_partition.select(
        "source_partition",
        F.coalesce(F.col("_held.offset"), F.col("_last_event.offset")).alias("cutoff_offset"),
        F.when(F.col("_held").isNotNull(), F.col("_held.timestamp"))
        .otherwise(F.col("_last_event.timestamp"))
        .alias("cutoff_timestamp"),
        "live_share_partitions",
        "tracked_share_partitions",
        "untracked_live_share_partitions",
        "deleted_share_partitions",
        F.col("_held.group_id").alias("held_by_group_id"),
        F.col("_held.topic_id").alias("held_by_topic_id"),
        F.col("_held.partition").alias("held_by_partition"),
    )


def _pruning_table(counted: DataFrame, cutoffs: DataFrame) -> DataFrame:
    zero = F.lit(0).cast("long")
    return counted.join(cutoffs, "source_partition", "left").select(
        "source_partition",
        "cutoff_offset",
        F.coalesce(F.col("cutoff_offset") > 0, F.lit(False)).alias("prunable"),
        "cutoff_timestamp",
        *[
            F.coalesce(F.col(c), zero).alias(c)
            for c in (
                "live_share_partitions",
                "tracked_share_partitions",
                "untracked_live_share_partitions",
                "deleted_share_partitions",
            )
        ],
        "held_by_group_id",
        "held_by_topic_id",
        "held_by_partition",
        F.col("records_before_cutoff").cast("long").alias("records_before_cutoff"),
        F.col("exported_records").cast("long").alias("exported_records"),
        "first_exported_offset",
        "last_exported_offset",
    )


def pruning_cutoff(placements: DataFrame, positions: DataFrame) -> DataFrame:
    """Per `__share_group_state` partition: the offset Kafka's share coordinator would prune
    its log up to after loading these records (ShareCoordinatorOffsetsManager), from
    `share_partition_placements`, and how many exported `positions` (`exported_positions`)
    lie before it.

    Kafka tracks, per share-partition, the offset of its latest ShareSnapshot (updates are
    not tracked); a tombstone drops the share-partition. The cut-off is the minimum of the
    tracked offsets, computed at each snapshot or tombstone including the record itself, so
    a partition whose share-partitions are all deleted keeps its last tombstone's offset.
    Kafka deletes records below the cut-off only when it is > 0."""
    cutoffs = _cutoffs(placements)
    counted = (
        positions.join(
            F.broadcast(cutoffs.select("source_partition", "cutoff_offset")),
            "source_partition",
            "left",
        )
        .groupBy("source_partition")
        .agg(
            F.count(F.lit(1)).alias("exported_records"),
            F.min("source_offset").alias("first_exported_offset"),
            F.max("source_offset").alias("last_exported_offset"),
            F.count(F.when(F.col("source_offset") < F.col("cutoff_offset"), 1)).alias(
                "records_before_cutoff"
            ),
        )
    )
    return _pruning_table(counted, cutoffs)
