"""Rows of Arrow tables matched and grouped on key columns, on the driver: the joins an
incremental run makes between a few thousand touched keys and a table's rows, and the
groups its Arrow audits roll up, without Spark."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def rows_by_key(table: pa.Table, keys: pa.Table, on: Sequence[str], join_type: str) -> pa.Array:
    """The numbers, in order, of the rows of `table` that a `join_type` join ("left semi":
    those with a key in `keys`; "left anti": those without) on the `on` columns keeps."""
    keys = keys.select(list(on)).cast(pa.schema([table.schema.field(c) for c in on]))
    # Joined on the key columns and a row number only: Arrow's join does not carry every
    # nested type along.
    numbered = table.select(list(on)).append_column(
        "_row", pa.array(np.arange(table.num_rows, dtype=np.int64))
    )
    found = numbered.join(keys, list(on), join_type=join_type).column("_row")
    return pc.take(found, pc.sort_indices(found))


def with_keys(table: pa.Table, keys: pa.Table, on: Sequence[str]) -> pa.Table:
    """The rows of `table` whose `on` columns equal those of a row of `keys`, in order."""
    return table.take(rows_by_key(table, keys, on, "left semi"))


def without_keys(table: pa.Table, keys: pa.Table, on: Sequence[str]) -> pa.Table:
    """The rows of `table` whose `on` columns equal those of no row of `keys`, in order."""
    return table.take(rows_by_key(table, keys, on, "left anti"))


def distinct_keys(table: pa.Table, on: Sequence[str]) -> pa.Table:
    """Each combination of the `on` columns of `table` once."""
    return table.select(list(on)).group_by(list(on), use_threads=False).aggregate([])


def take_indices(rows: np.ndarray) -> pa.Array:
    """Row numbers for `take`, -1 as null: a null index takes a null (a missing row)."""
    return pa.array(rows, type=pa.int64(), mask=rows < 0)


class KeyGroups:
    """The rows of a table in groups of equal `keys` (the segments', the placements', the
    archived ranges' rolled up on the driver): `order` sorts the rows by the keys (and,
    within a group, by the `within` columns ascending), `starts` is where each group begins
    in that order and `group` the group of each sorted row."""

    def __init__(self, table: pa.Table, keys: Sequence[str], within: Sequence[str] = ()) -> None:
        sort = [(c, "ascending") for c in (*keys, *within)]
        self.order = pc.sort_indices(table, sort_keys=sort)
        ordered = table.select(list(keys)).take(self.order)
        n = ordered.num_rows
        change = np.zeros(n, dtype=bool)
        if n:
            change[0] = True
        for name in keys:
            column = ordered.column(name).combine_chunks()
            if n > 1:
                differs = pc.not_equal(column.slice(1), column.slice(0, n - 1))
                change[1:] |= differs.to_numpy(zero_copy_only=False)
        self.starts = np.flatnonzero(change)
        self.group = np.cumsum(change) - 1
        self.ends = np.append(self.starts[1:], n)
        #: The first sorted row of each group, as a row number of the table.
        self.first = self.order.to_numpy()[self.starts] if n else np.zeros(0, np.int64)

    @property
    def count(self) -> int:
        return len(self.starts)

    def sum(self, values: np.ndarray) -> np.ndarray:
        if not self.count:
            return np.zeros(0, dtype=np.int64)
        return np.add.reduceat(values[self.order.to_numpy()], self.starts)

    def spread_max(self, values: pa.ChunkedArray) -> np.ndarray:
        """Per row of the table, the largest of `values` (no nulls) in its group."""
        order = self.order.to_numpy()
        best = np.maximum.reduceat(values.to_numpy()[order], self.starts)
        out = np.empty(len(order), dtype=best.dtype)
        out[order] = best[self.group]
        return out

    def arg_max(self, values: pa.Array) -> np.ndarray:
        """Per group, the row number of the table whose `values` (int64, nulls ignored) are
        largest; -1 where the group has none."""
        return self._arg(values, np.maximum, np.iinfo(np.int64).min)

    def arg_min(self, values: pa.Array) -> np.ndarray:
        """Per group, the row number with the smallest `values`; -1 where none."""
        return self._arg(values, np.minimum, np.iinfo(np.int64).max)

    def _arg(self, values: pa.Array, pick: np.ufunc, missing: int) -> np.ndarray:
        if not self.count:
            return np.zeros(0, dtype=np.int64)
        order = self.order.to_numpy()
        filled = pc.fill_null(values, missing).to_numpy(zero_copy_only=False)[order]
        best = pick.reduceat(filled, self.starts)
        # The first sorted row of its group that holds the group's best value (values are
        # unique within a group: offsets of one share-partition's log).
        at = np.full(self.count, -1, dtype=np.int64)
        hits = np.flatnonzero(filled == best[self.group])
        groups = self.group[hits]
        first_hit = np.unique(groups, return_index=True)
        at[first_hit[0]] = order[hits[first_hit[1]]]
        at[best == missing] = -1
        return at
