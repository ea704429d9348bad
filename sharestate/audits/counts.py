"""`delivery_counts`: offsets per (share-partition, delivery state, delivery count) in the
final replayed state."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits.columns import EXACT, as_java_long, delivery_state_name, live_state
from sharestate.decode.columns import KEY


def delivery_counts(state: DataFrame, delivery_count_limit: int = 5) -> DataFrame:
    """Offsets per (share-partition, delivery_state, delivery_count) in the final state of
    every share-partition that is not deleted."""
    batch = F.col("b")
    # Exact, in decimals: an impossible batch (offsets near the ends of a long) must not
    # overflow Spark's ANSI arithmetic; the total is then a long as Java's arithmetic
    # wraps it, as the state's offset counts are.
    exact = batch["last_offset"].cast(EXACT) - batch["first_offset"].cast(EXACT) + F.lit(1)
    size = F.greatest(exact, F.lit(0).cast(EXACT))
    return (
        live_state(state)
        .select(*KEY, F.explode("state_batches").alias("b"))
        .groupBy(
            *KEY,
            batch["delivery_state"].alias("delivery_state"),
            batch["delivery_count"].alias("delivery_count"),
        )
        .agg(
            as_java_long(F.sum(size)).alias("offsets"),
            F.count(F.lit(1)).alias("batches"),
            F.min(batch["first_offset"]).alias("first_offset"),
            F.max(batch["last_offset"]).alias("last_offset"),
        )
        .select(
            *KEY,
            "delivery_state",
            delivery_state_name(F.col("delivery_state")).alias("delivery_state_name"),
            "delivery_count",
            "offsets",
            "batches",
            "first_offset",
            "last_offset",
            (F.col("delivery_count") >= F.lit(delivery_count_limit)).alias("at_delivery_limit"),
        )
    )
