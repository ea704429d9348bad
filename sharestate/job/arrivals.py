"""What an incremental run applies: the rows that arrived in the exports since the checkpoint.

Each input's stream (`sharestate.io.streams`) delivers what arrived in its export since
the last run. Every row delivered is placed against what the checkpoint says was
processed (`Extent`s per partition):

* `new`: above the last processed offset of its partition (or on a partition not seen);
* `backfill`: below the checkpoint but not processed: before the partition's first
  processed offset, or in a gap of `__share_group_state` the last run found (a late file,
  a re-export of a lost range), or, for `__consumer_offsets` (compacted: its gaps are not
  listed), absent from the stored tables;
* `processed`: a row the last runs already processed (a file that repeats rows, or the
  whole export read again): counted, not decoded again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.arrow_keys import distinct_keys, rows_by_key
from sharestate.io.checkpoint import Checkpoint, Extent
from sharestate.io.exports import ROW_IDENTITY, RowCounts, count_rows, deduplicate
from sharestate.io.store import arrow_frame
from sharestate.job.cache import CacheScope

NEW: Final = "new"
BACKFILL: Final = "backfill"
PROCESSED: Final = "processed"
#: The column `classify` adds.
ARRIVAL: Final = "_arrival"


@dataclass(frozen=True)
class Arrivals:
    """One input's rows to process in this run (new and backfilled, not deduplicated yet),
    and how many rows were read and were already processed."""

    rows: DataFrame
    format: str
    path: str
    #: Rows its stream delivered (the whole export when it was read whole).
    read: int
    processed: int
    backfill: int
    #: False when the export was read whole (its stream started again: its path changed).
    tracked: bool
    #: The rows to process, counted (`count_rows`: duplicates among them too).
    counts: RowCounts
    #: (partition, offset) of the backfilled rows.
    backfill_positions: DataFrame

    def deduplicated(self) -> DataFrame:
        """The rows to process, one per (topic, partition, offset)."""
        return deduplicate(self.rows, self.counts)


def extents_frame(spark: SparkSession, extents: Mapping[int, Extent]) -> DataFrame:
    rows = [(p, e.first, e.last) for p, e in sorted(extents.items())]
    return spark.createDataFrame(rows, "partition int, _first bigint, _last bigint")


def classify(rows: DataFrame, extents: DataFrame, gaps: DataFrame | None = None) -> DataFrame:
    """`rows` (Kafka-record schema) with ARRIVAL: NEW, BACKFILL or PROCESSED (see the module).
    `extents`: partition, _first, _last; `gaps`: partition, _from, _to (the export's known
    gaps; without them every row inside the extents counts as processed)."""
    placed = rows.join(F.broadcast(extents), "partition", "left")
    offset = F.col("offset")
    above = F.col("_last").isNull() | (offset > F.col("_last"))
    below = offset < F.col("_first")
    inside_gap = F.lit(False)
    if gaps is not None:
        in_gap = gaps.select(F.col("partition").alias("_gap_partition"), "_from", "_to").withColumn(
            "_in_gap", F.lit(True)
        )
        placed = placed.join(
            F.broadcast(in_gap),
            (F.col("partition") == F.col("_gap_partition"))
            & offset.between(F.col("_from"), F.col("_to")),
            "left",
        ).drop("_gap_partition", "_from", "_to")
        inside_gap = F.coalesce(F.col("_in_gap"), F.lit(False))
    arrival = (
        F.when(above, F.lit(NEW))
        .when(below | inside_gap, F.lit(BACKFILL))
        .otherwise(F.lit(PROCESSED))
    )
    return placed.withColumn(ARRIVAL, arrival).drop("_first", "_last", "_in_gap")


def look_up(placed: DataFrame, stored_positions: DataFrame) -> DataFrame:
    """`placed` (`classify`'s output) with its PROCESSED rows that are not among
    `stored_positions` (partition, offset) turned BACKFILL: for an input whose gaps are
    not listed (`__consumer_offsets`, compacted), a row inside the extents may be one the
    earlier runs never had."""
    stored = stored_positions.select("partition", "offset").withColumn("_stored", F.lit(True))
    return (
        placed.join(stored, ["partition", "offset"], "left")
        .withColumn(
            ARRIVAL,
            F.when(
                (F.col(ARRIVAL) == PROCESSED) & F.col("_stored").isNull(), F.lit(BACKFILL)
            ).otherwise(F.col(ARRIVAL)),
        )
        .drop("_stored")
    )


#: The Kafka-record schema of an input with nothing new.
_EMPTY_EXPORT: Final = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"
)


def place_arrivals(
    spark: SparkSession,
    *,
    source: str,
    rows: DataFrame | None,
    fmt: str,
    path: str,
    read_whole: bool,
    checkpoint: Checkpoint,
    cache: CacheScope,
    gaps: DataFrame | None = None,
    stored_positions: Callable[[], DataFrame] | None = None,
) -> Arrivals:
    """The rows of input `source` (export at `path`) that this run processes, of `rows`:
    what its stream delivered (`sharestate.io.streams`; None: nothing, and then nothing is
    placed or counted), the whole export when `read_whole`. `stored_positions` (partition,
    offset of the stored rows of an input without listed gaps; read only if needed): looked
    up for the rows that lie inside the extents."""
    if rows is None:
        nothing = spark.createDataFrame([], _EMPTY_EXPORT)
        return Arrivals(
            rows=nothing,
            format=fmt,
            path=path,
            read=0,
            processed=0,
            backfill=0,
            tracked=not read_whole,
            counts=RowCounts(read=0, duplicates=0),
            backfill_positions=nothing.select("partition", "offset"),
        )
    extents = extents_frame(spark, checkpoint.extents.get(source, {}))
    placed = cache.keep(classify(rows, extents, gaps), StorageLevel.MEMORY_AND_DISK)
    counts = _counts(placed)
    # An export read whole would look up every row: its rows inside the extents are
    # taken as processed.
    if stored_positions is not None and not read_whole and counts.get(PROCESSED, 0):
        placed = cache.keep(look_up(placed, stored_positions()), StorageLevel.MEMORY_AND_DISK)
        counts = _counts(placed)
    to_process = placed.filter(F.col(ARRIVAL) != PROCESSED)
    return Arrivals(
        rows=to_process.drop(ARRIVAL),
        format=fmt,
        path=path,
        read=sum(counts.values()),
        processed=counts.get(PROCESSED, 0),
        backfill=counts.get(BACKFILL, 0),
        tracked=not read_whole,
        counts=count_rows(to_process),
        backfill_positions=to_process.filter(F.col(ARRIVAL) == BACKFILL)
        .select("partition", "offset")
        .distinct(),
    )


def _counts(placed: DataFrame) -> dict[str, int]:
    return {row[ARRIVAL]: int(row["count"]) for row in placed.groupBy(ARRIVAL).count().collect()}


# --- the same on the driver, in Arrow (a small increment: sharestate.job.driver_increment) ---


@dataclass(frozen=True)
class PlacedRows:
    """`Arrivals` on the driver: one input's rows to process, deduplicated, as Arrow."""

    rows: pa.Table
    read: int
    processed: int
    backfill: int
    counts: RowCounts
    #: (partition, offset) of the backfilled rows, each once.
    backfill_positions: pa.Table

    def arrivals(self, spark: SparkSession, fmt: str, path: str, tracked: bool) -> Arrivals:
        """These rows as `Arrivals` (local relations: read without a Spark job)."""
        return Arrivals(
            rows=arrow_frame(spark, self.rows),
            format=fmt,
            path=path,
            read=self.read,
            processed=self.processed,
            backfill=self.backfill,
            tracked=tracked,
            counts=self.counts,
            backfill_positions=arrow_frame(spark, self.backfill_positions),
        )


def arrival_kinds(
    rows: pa.Table, extents: Mapping[int, Extent], gaps: pa.Table | None = None
) -> pa.Array:
    """`classify` on the driver: NEW, BACKFILL or PROCESSED for each row of `rows`
    (partition, offset). `gaps`: source_partition, _from, _to."""
    partitions = sorted(extents)
    at = pc.index_in(rows.column("partition"), pa.array(partitions, pa.int32()))
    first = pa.array([extents[p].first for p in partitions], pa.int64()).take(at)
    last = pa.array([extents[p].last for p in partitions], pa.int64()).take(at)
    offset = rows.column("offset")
    above = pc.or_kleene(pc.is_null(last), pc.greater(offset, last))
    earlier = pc.less(offset, first)
    if gaps is not None:
        in_gap = pa.array(np.zeros(rows.num_rows, dtype=bool))
        for gap in gaps.to_pylist():
            inside = pc.and_(
                pc.equal(rows.column("partition"), gap["source_partition"]),
                pc.and_(pc.greater_equal(offset, gap["_from"]), pc.less_equal(offset, gap["_to"])),
            )
            in_gap = pc.or_(in_gap, pc.fill_null(inside, False))
        earlier = pc.or_kleene(earlier, in_gap)
    return pc.if_else(
        pc.fill_null(above, False),
        NEW,
        pc.if_else(pc.fill_null(earlier, False), BACKFILL, PROCESSED),
    )


def _first_of_each(rows: pa.Table, on: tuple[str, ...]) -> pa.Array:
    """The numbers of the first row of each combination of `on` (nulls one value), in order."""
    numbered = rows.select(list(on)).append_column("_row", pa.array(np.arange(rows.num_rows)))
    firsts = numbered.group_by(list(on), use_threads=False).aggregate([("_row", "min")])
    return pa.array(np.sort(firsts.column("_row_min").to_numpy()))


def place_rows(
    rows: pa.Table,
    extents: Mapping[int, Extent],
    gaps: pa.Table | None = None,
    stored: Callable[[pa.Table], pa.Table] | None = None,
) -> PlacedRows:
    """`place_arrivals` on the driver, of an input's delivered `rows` (Kafka-record
    columns). `stored(positions)`: those of `positions` (partition, offset) that the
    stored tables hold, asked only for the rows found inside the extents (an input whose
    gaps are not listed)."""
    kinds = arrival_kinds(rows, extents, gaps)
    processed = pc.equal(kinds, PROCESSED)
    if stored is not None and pc.any(processed).as_py():
        inside = rows.filter(processed).select(["partition", "offset"])
        held = stored(inside)
        known = np.zeros(rows.num_rows, dtype=bool)
        candidates = np.flatnonzero(processed.to_numpy(zero_copy_only=False))
        found = rows_by_key(inside, held, ["partition", "offset"], "left semi").to_numpy()
        known[candidates[found]] = True
        kinds = pc.if_else(pc.and_(processed, pc.invert(pa.array(known))), BACKFILL, kinds)
    values, counts_of = pc.value_counts(kinds).flatten()
    counted = dict(zip(values.to_pylist(), counts_of.to_pylist(), strict=True))
    keep = pc.not_equal(kinds, PROCESSED)
    to_process = rows.filter(keep)
    firsts = _first_of_each(to_process, ROW_IDENTITY)
    counts = RowCounts(read=to_process.num_rows, duplicates=to_process.num_rows - len(firsts))
    backfilled = to_process.filter(pc.equal(kinds.filter(keep), BACKFILL))
    return PlacedRows(
        rows=to_process if counts.duplicates == 0 else to_process.take(firsts),
        read=sum(counted.values()),
        processed=counted.get(PROCESSED, 0),
        backfill=counted.get(BACKFILL, 0),
        counts=counts,
        backfill_positions=distinct_keys(backfilled, ["partition", "offset"]),
    )
