"""`share_partition_lag`: lag per live share-partition against a table of end offsets."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sharestate.decode.columns import KEY
from sharestate.kafka.constants import TERMINAL


def _live(state: DataFrame) -> DataFrame:
    """The rows of `share_partition_state` whose share-partition is not deleted."""
    return state.filter(~F.coalesce(F.col("deleted"), F.lit(False)))


def _end_offsets_by_topic_id(end_offsets: DataFrame, names: DataFrame | None) -> DataFrame:
    """topic_id, partition, end_offset (the highest given) and `_end_topic` (a name given
    with it); rows with only a topic name get their id through `names`, rows still without
    one are left out."""
    ends = end_offsets.select(
        F.col("topic_id").cast("string").alias("topic_id"),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("end_offset").cast("long").alias("end_offset"),
    )
    if names is not None:
        by_name = names.select(
            F.col("topic_id").alias("_named_id"), F.col("topic_name").alias("_name")
        )
        ends = ends.join(by_name, ends["topic"] == by_name["_name"], "left").select(
            F.coalesce("topic_id", "_named_id").alias("topic_id"),
            "topic",
            "partition",
            "end_offset",
        )
    return (
        ends.filter(F.col("topic_id").isNotNull())
        .groupBy("topic_id", "partition")
        .agg(F.max("end_offset").alias("end_offset"), F.max("topic").alias("_end_topic"))
    )


def _terminal_offsets_past_start() -> Column:
    """Acknowledged or Archived offsets of the state's batches at or past the effective start
    offset."""
    eso = F.col("effective_start_offset")
    return F.aggregate(
        F.coalesce(F.col("state_batches"), F.array()),
        F.lit(0).cast("long"),
        lambda acc, b: (
            acc
            + F.when(
                b["delivery_state"].isin(*TERMINAL),
                F.greatest(b["last_offset"] - F.greatest(b["first_offset"], eso) + 1, F.lit(0)),
            ).otherwise(F.lit(0))
        ),
    )


def share_partition_lag(
    state: DataFrame, end_offsets: DataFrame, names: DataFrame | None = None
) -> DataFrame:
    """Lag of every live share-partition: records at or past its start offset that are not
    yet delivered to completion.

    `end_offsets`: topic_id (nullable), topic (nullable), partition, end_offset (see
    `sharestate.io.read_end_offsets`); rows with only a topic name are matched through
    `names` (topic_id, topic_name from `topic_names`). With a DeliveryCompleteCount (4.2+,
    >= 0), lag = end_offset - start_offset - delivery_complete_count, as Kafka computes it
    (the count is of Acknowledged/Archived offsets at or past the persisted start offset).
    Otherwise lag = end_offset - effective_start_offset - the Acknowledged/Archived offsets
    of the batches at or past it."""
    dcc_known = F.coalesce(F.col("delivery_complete_count") >= 0, F.lit(False))
    initialized = F.col("start_offset") >= 0
    lag_dcc = F.when(
        dcc_known & initialized,
        F.col("end_offset") - F.col("start_offset") - F.col("delivery_complete_count"),
    )
    lag_batches = F.when(
        initialized,
        F.col("end_offset")
        - F.col("effective_start_offset")
        - F.col("terminal_offsets_past_start"),
    )
    live = (
        _live(state)
        .select(
            *KEY,
            "start_offset",
            "effective_start_offset",
            "delivery_complete_count",
            _terminal_offsets_past_start().alias("terminal_offsets_past_start"),
            "last_source_partition",
            "last_source_offset",
        )
        .join(_end_offsets_by_topic_id(end_offsets, names), ["topic_id", "partition"], "left")
    )
    topic = F.col("_end_topic")
    if names is not None:
        known = names.groupBy("topic_id").agg(F.min("topic_name").alias("_known_name"))
        live = live.join(known, "topic_id", "left")
        topic = F.coalesce(topic, F.col("_known_name"))
    return live.select(
        *KEY,
        topic.alias("topic"),
        "start_offset",
        "effective_start_offset",
        "delivery_complete_count",
        "terminal_offsets_past_start",
        "end_offset",
        F.when(dcc_known, lag_dcc).otherwise(lag_batches).alias("lag"),
        F.when(dcc_known, F.lit("delivery_complete_count"))
        .otherwise(F.lit("state_batches"))
        .alias("lag_method"),
        lag_dcc.alias("lag_from_delivery_complete_count"),
        lag_batches.alias("lag_from_state_batches"),
        "last_source_partition",
        "last_source_offset",
    )
