"""Replay: decoded `share_state_records` -> the state Kafka's share coordinator holds.

Distributed, with nothing proportional to the data on the driver:

1. Rows are hashed over tasks by share-partition (group_id, topic_id, partition) and sorted
   by log order (source_partition, source_offset): one shuffle and a sort.
2. `mapInArrow` streams through them (`sharestate.replay.fold.fold_batches`). The fold numbers
   each share-partition's *segments* as it goes: a snapshot replaces the state and a
   tombstone deletes it, so each starts a segment whose states do not depend on anything
   before it; segment 0 holds records before the first snapshot the export has (an export
   that starts after Kafka pruned the log). Each segment is folded from no state. (The
   number is the running sum a window over the log order would give; in the fold it costs
   nothing, while Spark's window is a pass of its own over every row.) Many short segments
   cost no more per record than a few long ones (a group-per-call API such as `applyInArrow`
   pays a Python call per group, and measured far slower). A hot share-partition stays in
   one task; its cost is linear in its records. With the jar scripts/build_jvm.sh builds,
   `sharestate.jvm.Fold` does the same fold on the JVM (`mapPartitions`, same columns,
   several times faster); `engine` picks one. Measurements: docs/where-time-goes.md.
3. The fold marks each share-partition's last row; that row's state is
   `share_partition_state`, with when its effective start offset last moved and its latest
   record time (tracked by the fold in log order). Every row is a row of
   `share_partition_history`.

The JVM fold turns its input plan into an RDD: with adaptive execution, that runs the
shuffle of step 1 when `replay` is called. Its pass over the history also hands the last
rows to the state (`Replayed.tee`), so the state costs no second fold once the history
has been computed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Final

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type

from sharestate import jvm
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.replay.combiner import LATEST
from sharestate.replay.fold import (
    COUNT_COLUMNS,
    FOLD_INPUT,
    HISTORY_FIELDS,
    LATEST_TIMESTAMP,
    MOVED_AT_TYPE,
    PASSTHROUGH_FIELDS,
    SEED,
    SEED_DELETED,
    SINCE,
    fold_batches,
)
from sharestate.replay.state import STATE_FIELDS

_BATCHES_DDL: Final = (
    "array<struct<first_offset:bigint,last_offset:bigint,delivery_state:int,delivery_count:int>>"
)
_MOVED_AT: Final = from_arrow_type(MOVED_AT_TYPE)
_SORT_HASH: Final = "_share_partition_hash"


@dataclass(frozen=True)
class Replayed:
    """Both tables derive from `folded` (the fold's output). On the JVM, the state comes from
    the pass that computes the history through `tee`: compute the history first and the
    state costs no second fold (unpersist the tee once both are computed)."""

    history: DataFrame
    state: DataFrame
    folded: DataFrame
    tee: jvm.Tee | None = None


def _fold(kafka: tuple[int, int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    # mapInArrow passes the iterator last.
    return fold_batches(batches, kafka)


def _seeds(prior_state: DataFrame, records: DataFrame) -> DataFrame:
    """One row per share-partition that has new records and a stored state: that state,
    placed at the stored last record so that it sorts before every new one, with the stored
    latest record time as its source_timestamp (a state written before those columns
    existed goes on from none)."""
    touched = records.select(*KEY).distinct()
    stored = set(prior_state.columns)
    latest = F.col(LATEST_TIMESTAMP) if LATEST_TIMESTAMP in stored else F.lit(None)
    since = F.col(SINCE) if SINCE in stored else F.lit(None)
    return prior_state.join(touched, list(KEY), "left_semi").select(
        *KEY,
        F.col("last_source_partition").alias("source_partition"),
        F.col("last_source_offset").alias("source_offset"),
        latest.cast("timestamp").alias("source_timestamp"),
        F.when(F.col("deleted"), F.lit(SEED_DELETED)).otherwise(F.lit(SEED)).alias("record_type"),
        *STATE_FIELDS,
        "state_batches",
        F.col("segment").alias("seed_segment"),
        F.col("last_snapshot_offset").alias("seed_last_snapshot_offset"),
        since.cast(_MOVED_AT).alias("seed_since"),
    )


def as_of(
    records: DataFrame, *, source_offset: int | None = None, timestamp: datetime | None = None
) -> DataFrame:
    """The records a replay "as of" a point sees: those at or before `source_offset` (an
    offset of the state-topic partitions) and/or at or before `timestamp`."""
    if source_offset is not None:
        records = records.filter(F.col("source_offset") <= F.lit(source_offset))
    if timestamp is not None:
        records = records.filter(F.col("source_timestamp") <= F.lit(timestamp))
    return records


def replay(
    records: DataFrame,
    kafka: tuple[int, int] = LATEST,
    prior_state: DataFrame | None = None,
    engine: jvm.Engine = "auto",
) -> Replayed:
    """`share_partition_history` and `share_partition_state` from decoded records, as Kafka
    release `kafka` (major, minor) replays them (the releases merge batches differently).

    With `prior_state` (the `share_partition_state` a previous run wrote, whose records all
    come before `records`), share-partitions go on from their stored state: the result
    holds the rows for share-partitions that have new records, as a run over all records
    would have them.

    `engine` picks the fold (see `sharestate.jvm.Engine`); both give the same columns,
    except that the JVM fold sets `state_batches` on each segment's last row only."""
    use_jvm = jvm.choose(
        engine, "replay", None if jvm.available(records.sparkSession) else jvm.MISSING
    )
    inputs = records.select(
        *(f.name for f in PASSTHROUGH_FIELDS if f.name != "segment"),
        *STATE_FIELDS,
        "state_batches",
        F.lit(None).cast("long").alias("seed_segment"),
        F.lit(None).cast("long").alias("seed_last_snapshot_offset"),
        F.lit(None).cast(_MOVED_AT).alias("seed_since"),
    )
    if prior_state is not None:
        inputs = inputs.unionByName(_seeds(prior_state, records))
    # One shuffle, hash by share-partition, and a sort by (share-partition, log order). The
    # sort leads with a hash of the share-partition: Spark compares rows by an 8-byte prefix
    # of the first sort column first, and group ids often share their first 8 bytes (then
    # every comparison compares whole strings, which showed in CPU profiles).
    # Equal hashes still sort by the share-partition itself, so its rows stay together.
    # (A column, not an expression in the sort: the comparator would hash on every call.)
    ordered = (
        inputs.repartition(*KEY)
        .withColumn(_SORT_HASH, F.xxhash64(*KEY))
        .sortWithinPartitions(_SORT_HASH, *KEY, *LOG_ORDER)
        .select(*FOLD_INPUT)
    )
    tee = None
    if use_jvm:
        # The state's rows come from the pass that folds the history (see Replayed).
        (folded, last_rows), tee = jvm.call_teed(
            ordered.sparkSession, "Fold", "fold", ordered, kafka[0], kafka[1]
        )
    else:
        folded = last_rows = ordered.mapInArrow(
            partial(_fold, kafka), from_arrow_schema(pa.schema(HISTORY_FIELDS))
        )
    # The fold marks each share-partition's last row: its final state, without a shuffle.
    state = last_rows.filter(F.col("last_of_share_partition")).select(
        *KEY,
        "deleted",
        *STATE_FIELDS,
        "effective_start_offset",
        F.coalesce("state_batches", F.array().cast(_BATCHES_DDL)).alias("state_batches"),
        *COUNT_COLUMNS,
        F.col("source_partition").alias("last_source_partition"),
        F.col("source_offset").alias("last_source_offset"),
        "last_snapshot_offset",
        "replay_error",
        F.col("segment").alias("segment"),
        SINCE,
        LATEST_TIMESTAMP,
    )
    history = folded.filter(~F.col("record_type").isin(SEED, SEED_DELETED)).drop(
        "state_batches", "last_of_share_partition", SINCE, LATEST_TIMESTAMP
    )
    return Replayed(history, state, folded, tee)
