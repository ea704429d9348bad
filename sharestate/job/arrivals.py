"""What an incremental run applies: the rows that arrived in the exports since the checkpoint.

Each input's stream (`sharestate.io.streams`) delivers what arrived in its export since
the last run. Every row delivered is placed, on the driver (`place_rows`), against what
the checkpoint says was processed (`Extent`s per partition):

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

from sharestate.arrow_keys import distinct_keys, rows_by_key
from sharestate.io.checkpoint import Extent
from sharestate.io.exports import ROW_IDENTITY, RowCounts

NEW: Final = "new"
BACKFILL: Final = "backfill"
PROCESSED: Final = "processed"


@dataclass(frozen=True)
class Arrivals:
    """One input's arrivals in this run, counted: how many rows were read, were already
    processed and were backfilled, and how many are to process (`counts`)."""

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


@dataclass(frozen=True)
class PlacedRows:
    """One input's rows to process (new and backfilled), deduplicated, as Arrow, and how
    they were placed."""

    rows: pa.Table
    read: int
    processed: int
    backfill: int
    counts: RowCounts
    #: (partition, offset) of the backfilled rows, each once.
    backfill_positions: pa.Table

    def arrivals(self, fmt: str, path: str, tracked: bool) -> Arrivals:
        """How these rows were placed, counted (`Arrivals`)."""
        return Arrivals(
            format=fmt,
            path=path,
            read=self.read,
            processed=self.processed,
            backfill=self.backfill,
            tracked=tracked,
            counts=self.counts,
        )


def arrival_kinds(
    rows: pa.Table, extents: Mapping[int, Extent], gaps: pa.Table | None = None
) -> pa.Array:
    """NEW, BACKFILL or PROCESSED (see the module) for each row of `rows` (partition,
    offset). `gaps`: source_partition, _from, _to (the export's known gaps; without them
    every row inside the extents counts as processed)."""
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
    """The rows this run processes of an input's delivered `rows` (Kafka-record columns),
    placed against the checkpoint's `extents`. `stored(positions)`: those of `positions`
    (partition, offset) that the stored tables hold, asked only for the rows found inside
    the extents (an input whose gaps are not listed: a row inside them may be one the
    earlier runs never had)."""
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
