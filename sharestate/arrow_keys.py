"""Rows of Arrow tables matched on key columns, on the driver: the joins an incremental run
makes between a few thousand touched keys and a table's rows, without Spark."""

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
