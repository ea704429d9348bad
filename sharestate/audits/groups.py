"""`share_groups`: the share groups of `__consumer_offsets` as Kafka's group coordinator holds
them after replaying the latest record of every record key; and the topic names the group
records carry (for matching end offsets given by topic name).

Record type ids (`sharestate.kafka.schemas.GROUP_RECORD_TYPES`): 9 ShareGroupPartitionMetadata
(Kafka 4.0 only), 10 ShareGroupMemberMetadata, 11 ShareGroupMetadata, 12
ShareGroupTargetAssignmentMetadata, 14 ShareGroupCurrentMemberAssignment, 15
ShareGroupStatePartitionMetadata.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from sharestate.decode.columns import LOG_ORDER


def latest_group_records(group_records: DataFrame) -> DataFrame:
    """The latest share-group record (log order) of every record key: (type, group, member).
    Records of one group all sit on the group's `__consumer_offsets` partition."""
    newest_first = Window.partitionBy("record_type_id", "group_id", "member_id").orderBy(
        *[F.col(c).desc() for c in LOG_ORDER]
    )
    return (
        group_records.filter(F.col("is_share_record"))
        .withColumn("_rank", F.row_number().over(newest_first))
        .filter("_rank = 1")
        .drop("_rank")
    )


def _names(topics: Column) -> Column:
    return F.transform(F.coalesce(topics, F.array()), lambda t: t["topic_name"])


def topic_names(group_records: DataFrame) -> DataFrame:
    """(topic_id, topic_name) pairs named by share-group records (types 15 and 9)."""
    share = group_records.filter(F.col("is_share_record") & ~F.col("tombstone"))
    pairs = [
        share.select(F.explode(column).alias("t")).select("t.topic_id", "t.topic_name")
        for column in (
            "initializing_topics",
            "initialized_topics",
            "deleting_topics",
            "partition_metadata_topics",
        )
    ]
    out = pairs[0]
    for more in pairs[1:]:
        out = out.unionByName(more)
    return out.filter(F.col("topic_name").isNotNull()).distinct()


def _partition_count(topics: Column) -> Column:
    return F.aggregate(
        F.coalesce(topics, F.array()),
        F.lit(0).cast("long"),
        lambda acc, t: acc + F.coalesce(F.size(t["partitions"]), F.lit(0)).cast("long"),
    )


def _group_level_records(latest: DataFrame) -> DataFrame:
    """Per group: its last record and last live record, and its latest record of each
    group-level type (11, 12, 15, 9) as a struct (a tombstone's fields are null)."""
    kind = F.col("record_type_id")
    alive = ~F.col("tombstone")
    at = F.struct(*LOG_ORDER, "source_timestamp")

    def latest_of(record_type: int, *fields: str | Column) -> Column:
        return F.first(F.when(kind == record_type, F.struct(*fields)), ignorenulls=True)

    return latest.groupBy("group_id").agg(
        F.max(at).alias("_last"),
        F.max(F.when(alive, at)).alias("_last_live"),
        latest_of(11, "tombstone", "group_epoch", "metadata_hash", at.alias("at")).alias("_meta"),
        latest_of(12, "tombstone", "assignment_epoch").alias("_assignment"),
        latest_of(
            15,
            "tombstone",
            "initializing_topics",
            "initialized_topics",
            "deleting_topics",
            at.alias("at"),
        ).alias("_spm"),
        latest_of(9, "tombstone", "partition_metadata_topics").alias("_pm"),
    )


def _live_members(latest: DataFrame) -> DataFrame:
    """Per group: its live members (type 10) with their current assignment (type 14)."""
    kind = F.col("record_type_id")
    alive = ~F.col("tombstone")
    member = latest.filter(alive & (kind == 10)).select(
        "group_id", "member_id", "client_id", "client_host", "rack_id", "subscribed_topic_names"
    )
    assignment = latest.filter(alive & (kind == 14)).select(
        "group_id", "member_id", "member_epoch", "member_state", "assigned_partitions"
    )
    return (
        member.join(assignment, ["group_id", "member_id"], "left")
        .groupBy("group_id")
        .agg(
            F.collect_list(
                F.struct(
                    "member_id",
                    "client_id",
                    "client_host",
                    "rack_id",
                    "subscribed_topic_names",
                    "member_epoch",
                    "member_state",
                    "assigned_partitions",
                )
            ).alias("_members")
        )
    )


def _members_by_id() -> Column:
    return F.array_sort(
        F.coalesce(F.col("_members"), F.array()),
        lambda a, b: (
            F.when(a["member_id"] < b["member_id"], -1)
            .when(a["member_id"] > b["member_id"], 1)
            .otherwise(0)
        ),
    )


def share_groups(group_records: DataFrame) -> DataFrame:
    """One row per share group seen in `__consumer_offsets`, from the latest record of every
    record key, as Kafka's group coordinator replays them (a tombstone removes its key)."""
    latest = latest_group_records(group_records)
    meta_live = F.col("_meta").isNotNull() & ~F.col("_meta.tombstone")
    # Deleted: the latest ShareGroupMetadata is a tombstone and nothing live came after it.
    deleted = F.coalesce(F.col("_meta.tombstone"), F.lit(False)) & (
        F.col("_last_live").isNull() | (F.col("_last_live") < F.col("_meta.at"))
    )
    spm_live = F.col("_spm").isNotNull() & ~F.col("_spm.tombstone")

    def spm(field: str) -> Column:
        return F.when(spm_live, F.col(f"_spm.{field}"))

    pm_topics = F.when(
        F.col("_pm").isNotNull() & ~F.col("_pm.tombstone"), F.col("_pm.partition_metadata_topics")
    )
    all_names = F.array_sort(
        F.array_distinct(
            F.filter(
                F.concat(
                    _names(spm("initializing_topics")),
                    _names(spm("initialized_topics")),
                    _names(spm("deleting_topics")),
                    _names(pm_topics),
                ),
                lambda name: name.isNotNull(),
            )
        )
    )
    members = _members_by_id()
    return (
        _group_level_records(latest)
        .join(_live_members(latest), "group_id", "left")
        .select(
            "group_id",
            F.when(meta_live, F.col("_meta.group_epoch")).alias("group_epoch"),
            F.when(meta_live, F.col("_meta.metadata_hash")).alias("metadata_hash"),
            F.when(
                F.col("_assignment").isNotNull() & ~F.col("_assignment.tombstone"),
                F.col("_assignment.assignment_epoch"),
            ).alias("assignment_epoch"),
            deleted.alias("deleted"),
            F.when(deleted, F.col("_meta.at.source_offset")).alias("deleted_at_source_offset"),
            F.when(deleted, F.col("_meta.at.source_timestamp")).alias("deleted_at_timestamp"),
            F.size(members).alias("member_count"),
            members.alias("members"),
            spm("initializing_topics").alias("initializing_topics"),
            spm("initialized_topics").alias("initialized_topics"),
            spm("deleting_topics").alias("deleting_topics"),
            _partition_count(spm("initializing_topics")).alias("initializing_partitions"),
            _partition_count(spm("initialized_topics")).alias("initialized_partitions"),
            F.size(F.coalesce(spm("deleting_topics"), F.array())).alias("deleting_topic_count"),
            all_names.alias("topic_names"),
            F.when(spm_live, F.col("_spm.at.source_offset")).alias("state_metadata_source_offset"),
            F.when(spm_live, F.col("_spm.at.source_timestamp")).alias("state_metadata_timestamp"),
            F.col("_last.source_partition").alias("last_source_partition"),
            F.col("_last.source_offset").alias("last_source_offset"),
            F.col("_last.source_timestamp").alias("last_source_timestamp"),
        )
    )
