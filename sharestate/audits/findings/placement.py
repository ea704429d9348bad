"""Findings of the state-topic partition check: share-partitions whose records sit on a
`__share_group_state` partition other than the one Kafka's partitioner picks
(`sharestate.kafka.partitioning.state_topic_partition`), from `share_partition_placements`.

The partition count is `--state-topic-partitions`; without it, it is chosen inside Spark:
Kafka's default (50) or the highest exported partition + 1, whichever puts more
share-partitions on their own partition. A correct count puts every share-partition in place
while a wrong one misplaces nearly all, so when even the better one fits fewer than half,
the topic has some other count and the check is skipped with one info finding.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits.columns import kafka_key_hash, message, share_partition_text
from sharestate.audits.findings.registry import (
    FindingCode,
    Found,
    Severity,
    Source,
    Where,
    finding_rule,
)
from sharestate.decode.columns import KEY
from sharestate.kafka.partitioning import DEFAULT_STATE_TOPIC_PARTITIONS

#: A column of the placements a caller may give with Kafka's partitioner hash of each key
#: already computed (`partitioning.share_partition_key_hashes`): an incremental run does, on
#: the driver, where the hash as a Spark expression is most of the check's cost.
KEY_HASH: Final = "_key_hash"


def _placed_share_partitions(placements: DataFrame) -> DataFrame:
    """Per share-partition and state-topic partition (`share_partition_placements`): its
    records (`_records`), its first record's offset (`_first`) and Kafka's partitioner hash
    of its key (`_hash`: the `KEY_HASH` column where the placements have one)."""
    if KEY_HASH in placements.columns:
        hashed = F.col(KEY_HASH)
    else:
        hashed = kafka_key_hash(*[F.col(c) for c in KEY])
    return placements.select(
        *KEY,
        "source_partition",
        F.col("records").alias("_records"),
        F.col("first_offset").alias("_first"),
        # Not nullable (decoded keys are never null): Spark would otherwise infer
        # `_hash IS NOT NULL` from the comparisons that follow and push it down to the
        # rows the placements come from.
        F.coalesce(hashed, F.lit(-1)).alias("_hash"),
    )


def _inferred_partition_count(placed: DataFrame) -> DataFrame:
    """One row: Kafka's default count or the highest exported partition + 1, whichever fits
    more share-partitions (`_n`), whether it fits at least half (`_usable`), the
    share-partitions (`_total`) and why that count (`_why`)."""
    default = F.lit(DEFAULT_STATE_TOPIC_PARTITIONS)
    inferred = placed.agg((F.max("source_partition") + 1).alias("_inferred"))
    scored = placed.crossJoin(F.broadcast(inferred)).agg(
        F.first("_inferred").alias("_inferred"),
        F.count(F.lit(1)).alias("_total"),
        F.sum(
            F.when((F.col("_hash") % default) == F.col("source_partition"), 1).otherwise(0)
        ).alias("_fit_default"),
        F.sum(
            F.when((F.col("_hash") % F.col("_inferred")) == F.col("source_partition"), 1).otherwise(
                0
            )
        ).alias("_fit_inferred"),
    )
    use_default = (F.col("_inferred") <= default) & (
        F.col("_fit_default") >= F.col("_fit_inferred")
    )
    return scored.select(
        F.when(use_default, default).otherwise(F.col("_inferred")).alias("_n"),
        (
            F.when(use_default, F.col("_fit_default")).otherwise(F.col("_fit_inferred")) * 2
            >= F.col("_total")
        ).alias("_usable"),
        "_total",
        F.when(use_default, F.lit("Kafka's default, which fits this export"))
        .otherwise(F.lit("inferred: highest exported partition + 1"))
        .alias("_why"),
    )


def _partition_count(placed: DataFrame, partitions: int | None) -> DataFrame:
    """The one-row choice of `_inferred_partition_count`, or `partitions` when given."""
    if partitions is None:
        return _inferred_partition_count(placed)
    return placed.agg(
        F.lit(partitions).alias("_n"),
        F.lit(True).alias("_usable"),
        F.count(F.lit(1)).alias("_total"),
        F.lit("given by --state-topic-partitions").alias("_why"),
    )


@finding_rule(FindingCode.WRONG_STATE_PARTITION, Severity.ERROR, source=Source.SHARE_STATE)
def wrong_state_partition(
    placements: DataFrame, state_topic_partitions: int | None = None
) -> Found:
    """Records of a share-partition on a `__share_group_state` partition other than the one
    Kafka's partitioner puts it on, one finding per (share-partition, partition). Kafka's
    share coordinator never reads them for this share-partition, while this replay merges
    them in log order, so the replay cannot match Kafka's. Check --state-topic-partitions
    and how the export was produced."""
    placed = _placed_share_partitions(placements)
    # The one-row side is broadcast: as a cartesian product Spark recomputed the whole
    # aggregation over the records once per partition.
    checked = placed.crossJoin(F.broadcast(_partition_count(placed, state_topic_partitions)))
    fits = (F.col("_hash") % F.col("_n")) == F.col("source_partition")
    return Found(
        checked.filter(F.col("_usable") & ~fits),
        message(
            F.col("_records"),
            " record(s) of this share-partition are on __share_group_state partition ",
            F.col("source_partition"),
            ", but Kafka's partitioner (hash of '",
            share_partition_text(),
            "') puts it on partition ",
            F.col("_hash") % F.col("_n"),
            " of ",
            F.col("_n"),
            " (",
            F.col("_why"),
            "). Kafka's share coordinator never reads them for this share-partition, while"
            " this replay merges them in log order; check --state-topic-partitions and how"
            " the export was produced",
        ),
        Where(
            group_id="group_id",
            topic_id="topic_id",
            partition="partition",
            source_partition="source_partition",
            source_offset="_first",
            affected="_records",
        ),
    )


@finding_rule(FindingCode.STATE_PARTITION_CHECK_SKIPPED, Severity.INFO, source=Source.SHARE_STATE)
def state_partition_check_skipped(
    placements: DataFrame, state_topic_partitions: int | None = None
) -> Found:
    """The wrong-partition check did not run: with the partition count it could choose,
    fewer than half of the share-partitions sit where Kafka's partitioner puts them, so
    `__share_group_state` has another partition count. Give it with
    --state-topic-partitions."""
    choice = _partition_count(_placed_share_partitions(placements), state_topic_partitions)
    return Found(
        choice.filter(~F.col("_usable") & (F.col("_total") > 0)),
        message(
            "records on the wrong __share_group_state partition were not checked: with ",
            F.col("_n"),
            " partitions (",
            F.col("_why"),
            ") fewer than half of the ",
            F.col("_total"),
            " share-partitions sit where Kafka's partitioner puts them, so the topic has another"
            " partition count; give it with --state-topic-partitions",
        ),
        Where(affected="_total"),
    )


def wrong_state_partition_findings(placements: DataFrame, partitions: int | None) -> DataFrame:
    """The whole check on its own: the rows of both its rules."""
    return wrong_state_partition(placements, partitions).unionByName(
        state_partition_check_skipped(placements, partitions)
    )
