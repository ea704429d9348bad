"""Findings about the final replayed state of each share-partition: delivery counts above the
limit, and start offsets that stopped moving while records wait."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits.columns import (
    EXACT,
    age_at_least,
    as_java_long,
    hours_between,
    live_state,
    message,
)
from sharestate.audits.findings.registry import (
    FindingCode,
    Found,
    Severity,
    Source,
    Where,
    finding_rule,
)
from sharestate.decode.columns import KEY
from sharestate.replay.fold import LATEST_TIMESTAMP, SINCE


@finding_rule(FindingCode.DELIVERY_COUNT_ABOVE_LIMIT, Severity.WARNING, per_share_partition=True)
def delivery_count_above_limit(delivery_counts: DataFrame, delivery_count_limit: int) -> Found:
    """A share-partition whose final state holds delivery counts above
    --delivery-count-limit. Kafka archives a record when a release finds its count at the
    group's limit, so the group runs with a higher limit (group.share.delivery.count.limit,
    or the group's share.delivery.count.limit) and the poison ranges are counted against
    the wrong one. Run with the limit the group uses."""
    above = (
        delivery_counts.filter(F.col("delivery_count") > F.lit(delivery_count_limit))
        .groupBy(*KEY)
        .agg(
            as_java_long(F.sum(F.col("offsets").cast(EXACT))).alias("_offsets"),
            F.max("delivery_count").alias("_max"),
        )
    )
    return Found(
        above,
        message(
            F.col("_offsets"),
            " offset(s) in the final state have a delivery count above --delivery-count-limit ",
            str(delivery_count_limit),
            " (up to ",
            F.col("_max"),
            "). Kafka archives a record once its count reaches the group's limit, so the"
            " limit is higher (group.share.delivery.count.limit, or the group's"
            " share.delivery.count.limit): run with the limit the group uses",
        ),
        Where(group_id="group_id", topic_id="topic_id", partition="partition", affected="_offsets"),
    )


def _waiting_share_partitions(state: DataFrame, lag: DataFrame | None) -> DataFrame:
    """Live share-partitions with records waiting: Available or Acquired offsets in the final
    state (`_waiting`), or lag > 0 (`_lag`); with when the start offset last moved
    (`_since`)."""
    # Exact, then a long as Java wraps it (as the counts are): no ANSI overflow.
    waiting = as_java_long(
        F.col("available_offsets").cast(EXACT) + F.col("acquired_offsets").cast(EXACT)
    )
    candidates = live_state(state).select(
        *KEY, "effective_start_offset", waiting.alias("_waiting"), F.col(SINCE).alias("_since")
    )
    if lag is not None:
        candidates = candidates.join(
            lag.select(*KEY, F.col("lag").alias("_lag")), list(KEY), "left"
        )
    else:
        candidates = candidates.withColumn("_lag", F.lit(None).cast("long"))
    return candidates.filter((F.col("_waiting") > 0) | F.coalesce(F.col("_lag") > 0, F.lit(False)))


@finding_rule(FindingCode.SPSO_STALLED, Severity.WARNING, source=Source.SHARE_STATE)
def spso_stalled(
    state: DataFrame, stall_span_seconds: float, lag: DataFrame | None = None
) -> Found:
    """A live share-partition with records waiting (Available or Acquired offsets, or lag > 0)
    whose effective start offset has not moved for --stall-span before the export's last
    record (not the wall clock: the result does not depend on when the job runs). An idle
    partition with no new records does not move its start offset either, so only those with
    work waiting count. Check the group's consumers, and poison records at the start
    offset."""
    reference = state.agg(F.max(LATEST_TIMESTAMP).alias("_end"))
    since = F.col("_since.source_timestamp")
    stalled = (
        _waiting_share_partitions(state, lag)
        .crossJoin(F.broadcast(reference))
        .filter(age_at_least(F.col("_end"), since, stall_span_seconds))
    )
    return Found(
        stalled,
        message(
            "the start offset has stayed at ",
            F.col("effective_start_offset"),
            " since ",
            since,
            " (",
            hours_between(F.col("_end"), since),
            " h before the export's last record, --stall-span ",
            str(round(stall_span_seconds / 3600, 3)),
            " h) while ",
            F.col("_waiting"),
            " offset(s) are Available or Acquired",
            F.when(F.col("_lag").isNotNull(), message(" and the lag is ", F.col("_lag"))).otherwise(
                F.lit("")
            ),
            ": check the group's consumers, and poison records at the start offset",
        ),
        Where(
            group_id="group_id",
            topic_id="topic_id",
            partition="partition",
            source_partition=F.col("_since.source_partition"),
            source_offset=F.col("_since.source_offset"),
            affected="_waiting",
        ),
    )
