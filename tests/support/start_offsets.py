"""When each share-partition's effective start offset last moved: the columns the replay's
fold puts on `share_partition_state`, computed here from the history with a window (the
reference the fold is tested against, and what the tests' hand-built states get)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type

from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.replay.fold import LATEST_TIMESTAMP, MOVED_AT_TYPE, SINCE


def start_offset_moves(history: DataFrame, prior_state: DataFrame | None = None) -> DataFrame:
    """The SINCE and LATEST_TIMESTAMP columns the replay's fold puts on
    share_partition_state, computed from the history with a window (the reference the fold
    is tested against, and what a state built without the fold gets).

    Per share-partition in `history`: SINCE (source_timestamp, source_partition,
    source_offset of the last record after which effective_start_offset differed from the
    row before; the first row counts when it has an offset) and LATEST_TIMESTAMP.

    With `prior_state` (a stored share_partition_state with both columns, whose records all
    come before `history`), each share-partition goes on from its stored values: a seed row
    at its stored last record carries them, as in `sharestate.replay`."""
    moved_at = F.struct("source_timestamp", *LOG_ORDER)
    rows = history.select(
        *KEY,
        *LOG_ORDER,
        "source_timestamp",
        "effective_start_offset",
        F.lit(False).alias("_seed"),
        F.lit(None).cast(from_arrow_type(MOVED_AT_TYPE)).alias("_stored_since"),
    )
    if prior_state is not None:
        seeds = prior_state.join(history.select(*KEY).distinct(), list(KEY), "left_semi").select(
            *KEY,
            F.col("last_source_partition").alias("source_partition"),
            F.col("last_source_offset").alias("source_offset"),
            F.col(LATEST_TIMESTAMP).alias("source_timestamp"),
            "effective_start_offset",
            F.lit(True).alias("_seed"),
            F.col(SINCE).alias("_stored_since"),
        )
        rows = rows.unionByName(seeds)
    eso = F.col("effective_start_offset")
    changed = ~eso.eqNullSafe(F.lag(eso).over(Window.partitionBy(*KEY).orderBy(*LOG_ORDER)))
    return (
        rows.withColumn(
            "_moved",
            F.when(F.col("_seed"), F.col("_stored_since")).when(changed, moved_at),
        )
        .groupBy(*KEY)
        .agg(
            F.max("_moved").alias(SINCE),
            F.max("source_timestamp").alias(LATEST_TIMESTAMP),
        )
    )
