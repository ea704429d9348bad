"""Findings from the group metadata (`share_groups`, with --consumer-offsets): share state the
metadata does not account for, and partitions stuck initializing (topics deleting)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sharestate.audits.columns import age_at_least, hours_between, live_state, message
from sharestate.audits.findings.registry import (
    FindingCode,
    Found,
    Severity,
    Source,
    Where,
    at_last_state_record,
    finding_rule,
)
from sharestate.decode.columns import KEY


def _live_state_with_group(state: DataFrame, groups: DataFrame) -> DataFrame:
    """Live share-partitions with what `share_groups` says of their group (`_known` is null
    when it has no share-group record)."""
    known = groups.select(
        "group_id",
        F.col("deleted").alias("_group_deleted"),
        F.col("deleted_at_source_offset").alias("_deleted_at"),
        F.col("initializing_topics").alias("_initializing"),
        F.col("initialized_topics").alias("_initialized"),
        F.col("deleting_topics").alias("_deleting"),
        F.col("state_metadata_source_offset").alias("_spm_offset"),
        F.lit(True).alias("_known"),
    )
    live = live_state(state).select(*KEY, "last_source_partition", "last_source_offset")
    return live.join(known, "group_id", "left")


def _contains_partition(topics: Column) -> Column:
    return F.exists(
        F.coalesce(topics, F.array()),
        lambda t: (
            (t["topic_id"] == F.col("topic_id"))
            & F.coalesce(F.array_contains(t["partitions"], F.col("partition")), F.lit(False))
        ),
    )


def _contains_topic(topics: Column) -> Column:
    return F.exists(F.coalesce(topics, F.array()), lambda t: t["topic_id"] == F.col("topic_id"))


@finding_rule(FindingCode.STATE_FOR_UNKNOWN_GROUP, Severity.WARNING, source=Source.SHARE_STATE)
def state_for_unknown_group(state: DataFrame, groups: DataFrame) -> Found:
    """Live share state of a group that has no share-group record in `__consumer_offsets`:
    the two exports are from different times or clusters, or the group's records are missing
    from the consumer-offsets export. Export both topics from the same cluster at the same
    time."""
    joined = _live_state_with_group(state, groups)
    return Found(
        joined.filter(F.col("_known").isNull()),
        message(
            "live share state, but __consumer_offsets has no share-group record of group '",
            F.col("group_id"),
            "': the exports are from different times or clusters, or the group's records"
            " are missing from the export",
        ),
        at_last_state_record(),
    )


@finding_rule(FindingCode.STATE_FOR_DELETED_GROUP, Severity.WARNING, source=Source.SHARE_STATE)
def state_for_deleted_group(state: DataFrame, groups: DataFrame) -> Found:
    """Live share state of a group that `__consumer_offsets` shows deleted. Deleting a group
    deletes its share state (tombstones on `__share_group_state`), so the state was left
    behind, or the share-state export ends before the deletion. Compare the exports' end
    times; state left behind is garbage on the cluster."""
    joined = _live_state_with_group(state, groups)
    return Found(
        joined.filter(F.col("_known") & F.col("_group_deleted")),
        message(
            "live share state for group '",
            F.col("group_id"),
            "', which __consumer_offsets shows deleted (ShareGroupMetadata tombstone at offset ",
            F.col("_deleted_at"),
            "). Deleting a group deletes its share state (tombstones on __share_group_state):"
            " the state was left behind, or the share-state export ends before the deletion",
        ),
        at_last_state_record(),
    )


@finding_rule(
    FindingCode.PARTITION_NOT_INITIALIZED,
    Severity.WARNING,
    Severity.INFO,
    source=Source.SHARE_STATE,
)
def partition_not_initialized(state: DataFrame, groups: DataFrame) -> Found:
    """Live share state for a topic-partition that the group's
    ShareGroupStatePartitionMetadata does not list as initialized. Info when the partition is
    still initializing or its topic is being deleted; a warning otherwise: the group no
    longer consumes it and its state was not deleted, or the exports are from different
    times. Skipped for groups without that record (Kafka 4.0 never writes it)."""
    joined = _live_state_with_group(state, groups)
    in_initializing = _contains_partition(F.col("_initializing"))
    in_deleting = _contains_topic(F.col("_deleting"))
    not_initialized = (
        F.col("_known")
        & ~F.col("_group_deleted")
        & F.col("_spm_offset").isNotNull()
        & ~_contains_partition(F.col("_initialized"))
    )
    return Found(
        joined.filter(not_initialized),
        message(
            "live share state, but the group's ShareGroupStatePartitionMetadata (offset ",
            F.col("_spm_offset"),
            ") does not list this topic-partition as initialized",
            F.when(in_initializing, F.lit(": it is still initializing"))
            .when(in_deleting, F.lit(": its topic is being deleted"))
            .otherwise(
                F.lit(
                    ": the group no longer consumes it and its state was not deleted, or the"
                    " exports are from different times"
                )
            ),
        ),
        at_last_state_record(),
        severity=F.when(in_initializing | in_deleting, F.lit(Severity.INFO.value)).otherwise(
            F.lit(Severity.WARNING.value)
        ),
    )


def _listed_topics(groups: DataFrame, topics: str) -> DataFrame:
    """The topics a live group's ShareGroupStatePartitionMetadata lists in `topics`, one row
    each (`t`), with the record's offset and time."""
    listed = groups.filter(~F.col("deleted") & F.col("state_metadata_timestamp").isNotNull())
    return listed.select(
        "group_id",
        "state_metadata_source_offset",
        "state_metadata_timestamp",
        "last_source_partition",
        F.explode(topics).alias("t"),
    )


def _export_end(group_records: DataFrame) -> DataFrame:
    """One row: the consumer-offsets export's last record time (`_end`), cross-joined
    (broadcast) to the listed topics."""
    return F.broadcast(group_records.agg(F.max("source_timestamp").alias("_end")))


def _stuck_severity(stall_span_seconds: float) -> Column:
    """A warning once listed for --stall-span before the export's last record, else info."""
    old = age_at_least(F.col("_end"), F.col("state_metadata_timestamp"), stall_span_seconds)
    return F.when(old, F.lit(Severity.WARNING.value)).otherwise(F.lit(Severity.INFO.value))


def _stuck_for() -> Column:
    """` has been ... since at least <time> (<hours> h before ...)` of a listed topic."""
    at = F.col("state_metadata_timestamp")
    return message(
        " since at least ",
        at,
        " (",
        hours_between(F.col("_end"), at),
        " h before the __consumer_offsets export's last record)",
    )


@finding_rule(
    FindingCode.STUCK_INITIALIZING,
    Severity.WARNING,
    Severity.INFO,
    source=Source.CONSUMER_OFFSETS,
)
def stuck_initializing(
    state: DataFrame, groups: DataFrame, group_records: DataFrame, stall_span_seconds: float
) -> Found:
    """A topic-partition the group's ShareGroupStatePartitionMetadata lists as initializing,
    one finding per partition: a warning once listed for --stall-span before the
    consumer-offsets export's last record, info before. If `__share_group_state` already
    holds its state, the group coordinator did not record the completed initialization;
    check the group coordinator's and the share coordinator's logs."""
    live_keys = live_state(state).select(*KEY, F.lit(True).alias("_has_state"))
    initializing = (
        _listed_topics(groups, "initializing_topics")
        .select(
            "group_id",
            F.col("t.topic_id").alias("topic_id"),
            F.col("t.topic_name").alias("_topic_name"),
            F.explode("t.partitions").alias("partition"),
            "state_metadata_source_offset",
            "state_metadata_timestamp",
            "last_source_partition",
        )
        .join(live_keys, list(KEY), "left")
        .crossJoin(_export_end(group_records))
    )
    return Found(
        initializing,
        message(
            "partition ",
            F.col("partition"),
            " of topic ",
            F.coalesce(F.col("_topic_name"), F.col("topic_id")),
            " has been initializing",
            _stuck_for(),
            F.when(
                F.col("_has_state"),
                F.lit(
                    "; __share_group_state already holds its state, so the group coordinator"
                    " did not record the completed initialization"
                ),
            ).otherwise(F.lit("; no share state exists for it yet")),
        ),
        Where(
            group_id="group_id",
            topic_id="topic_id",
            partition="partition",
            source_partition="last_source_partition",
            source_offset="state_metadata_source_offset",
            affected=F.lit(1),
        ),
        severity=_stuck_severity(stall_span_seconds),
    )


@finding_rule(
    FindingCode.STUCK_DELETING,
    Severity.WARNING,
    Severity.INFO,
    source=Source.CONSUMER_OFFSETS,
)
def stuck_deleting(
    state: DataFrame, groups: DataFrame, group_records: DataFrame, stall_span_seconds: float
) -> Found:
    """A topic the group's ShareGroupStatePartitionMetadata lists as deleting, one finding
    per topic with how many of its share-partitions still have live state: a warning once
    listed for --stall-span before the consumer-offsets export's last record, info before.
    Deleting a topic from a group deletes its share state first; a topic stuck here points
    at the share coordinator: check its logs."""
    state_per_topic = (
        live_state(state)
        .groupBy("group_id", "topic_id")
        .agg(F.count(F.lit(1)).alias("_live_partitions"))
    )
    deleting = (
        _listed_topics(groups, "deleting_topics")
        .select(
            "group_id",
            F.col("t.topic_id").alias("topic_id"),
            F.col("t.topic_name").alias("_topic_name"),
            "state_metadata_source_offset",
            "state_metadata_timestamp",
            "last_source_partition",
        )
        .join(state_per_topic, ["group_id", "topic_id"], "left")
        .crossJoin(_export_end(group_records))
    )
    live_partitions = F.coalesce(F.col("_live_partitions"), F.lit(0))
    return Found(
        deleting,
        message(
            "topic ",
            F.coalesce(F.col("_topic_name"), F.col("topic_id")),
            " has been deleting",
            _stuck_for(),
            "; ",
            live_partitions,
            " of its share-partitions still have live share state",
        ),
        Where(
            group_id="group_id",
            topic_id="topic_id",
            source_partition="last_source_partition",
            source_offset="state_metadata_source_offset",
            affected=live_partitions,
        ),
        severity=_stuck_severity(stall_span_seconds),
    )
