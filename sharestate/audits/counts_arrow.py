"""`delivery_counts`: offsets per share-partition, delivery state and delivery count in the
final replayed state. Pure pyarrow and numpy: no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.kafka.constants import DELIVERY_STATE_NAMES

#: The columns of `delivery_counts`.
DELIVERY_COUNTS_SCHEMA: Final = pa.schema(
    [
        pa.field("group_id", pa.string()),
        pa.field("topic_id", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("delivery_state", pa.int32()),
        pa.field("delivery_state_name", pa.string()),
        pa.field("delivery_count", pa.int32()),
        pa.field("offsets", pa.int64()),
        pa.field("batches", pa.int64(), nullable=False),
        pa.field("first_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("at_delivery_limit", pa.bool_()),
    ]
)
_KEY_AND_BATCH: Final = ("group_id", "topic_id", "partition", "delivery_state", "delivery_count")
_INT64_MIN: Final = np.iinfo(np.int64).min
_INT64_MAX: Final = np.iinfo(np.int64).max


def exploded(table: pa.Table, column: str) -> tuple[pa.Table, pa.Array]:
    """Spark's `explode` of the list `column` of `table`: each row repeated once per element
    of its list (a null or empty list gives no row), with the elements in that order."""
    table = table.filter(pc.is_valid(table.column(column)))
    lists = table.column(column).combine_chunks()
    # Without null lists, the flattened elements and their parent rows line up (a null list
    # can hide elements that `list_flatten` skips and `list_parent_indices` does not).
    return table.drop_columns([column]).take(pc.list_parent_indices(lists)), pc.list_flatten(lists)


def group_numbers(
    columns: Sequence[pa.Array | pa.ChunkedArray],
) -> tuple[np.ndarray[Any, Any], int]:
    """Per row, the number of its group of equal values of `columns` (nulls equal each other,
    as Spark's `groupBy` takes them), and the count of groups."""
    n = len(columns[0]) if columns else 0
    group = np.zeros(n, dtype=np.int64)
    # Each column's codes are appended as digits of a mixed-radix number below `size`, the
    # rows numbered again (sorted once) only where the next digit would pass an int64.
    size = 1
    for values in columns:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        encoded = pc.dictionary_encode(values, null_encoding="encode")
        codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        digits = max(len(encoded.dictionary), 1)
        if size * digits >= 1 << 62:
            group, size = _numbered(group)
        group = group * digits + codes
        size *= digits
    group, count = _numbered(group)
    return group, count if n else 0


def _numbered(values: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], int]:
    """`values` as 0, 1, ... in their order, and how many distinct ones there are."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), len(distinct)


def _numbers(values: pa.Array) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """An int64 column as numpy values (0 where null) and its validity."""
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    filled = pc.fill_null(values, 0).to_numpy(zero_copy_only=False)
    return np.asarray(filled, dtype=np.int64), valid


def _extreme(
    values: np.ndarray[Any, Any],
    valid: np.ndarray[Any, Any],
    group: np.ndarray[Any, Any],
    count: int,
    smallest: bool,
) -> pa.Array:
    """Per group, the min (or max) of its valid `values`; null where it has none."""
    found = np.full(count, _INT64_MAX if smallest else _INT64_MIN, dtype=np.int64)
    (np.minimum if smallest else np.maximum).at(found, group[valid], values[valid])
    seen = np.bincount(group[valid], minlength=count) > 0
    return pa.array(found, pa.int64(), mask=~seen)


def delivery_state_names(states: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """`columns.delivery_state_name`: `Available`, `Acquired`, ... for a delivery state
    number, `Unknown(n)` for another, null for null."""
    names = pc.binary_join_element_wise("Unknown(", pc.cast(states, pa.string()), ")", "")
    for number, text in DELIVERY_STATE_NAMES.items():
        names = pc.if_else(pc.equal(states, number), text, names)
    return names


def delivery_counts(state: pa.Table, delivery_count_limit: int = 5) -> pa.Table:
    """Offsets per (share-partition, delivery_state,
    delivery_count) in the final state (`share_partition_state` rows) of every
    share-partition that is not deleted.

    A batch counts last - first + 1 offsets, 0 when it ends before it starts or has a null
    bound; the sum is taken modulo 2**64 (unsigned numpy arithmetic wraps so) and read as a
    signed long, as Spark's exact decimal sum made a Java long gives it, batches near the
    ends of a long included."""
    live = pc.invert(pc.fill_null(state.column("deleted"), False))
    rows, batches = exploded(
        state.select(["group_id", "topic_id", "partition", "state_batches"]).filter(live),
        "state_batches",
    )
    if rows.num_rows == 0:
        return DELIVERY_COUNTS_SCHEMA.empty_table()
    fields = {
        name: pc.struct_field(batches, name)
        for name in ("first_offset", "last_offset", "delivery_state", "delivery_count")
    }
    columns = {**{name: rows.column(name) for name in rows.column_names}, **fields}
    group, count = group_numbers([columns[name] for name in _KEY_AND_BATCH])
    first, first_valid = _numbers(fields["first_offset"])
    last, last_valid = _numbers(fields["last_offset"])
    counted = first_valid & last_valid & (last >= first)
    sizes = np.where(
        counted, last.astype(np.uint64) - first.astype(np.uint64) + np.uint64(1), np.uint64(0)
    )
    offsets = np.zeros(count, dtype=np.uint64)
    np.add.at(offsets, group, sizes)
    # The first row of each group gives its key and batch values.
    firsts = np.full(count, len(group), dtype=np.int64)
    np.minimum.at(firsts, group, np.arange(len(group), dtype=np.int64))
    picked = pa.array(firsts)
    states = columns["delivery_state"].take(picked)
    delivery_count = columns["delivery_count"].take(picked)
    table = {
        "group_id": columns["group_id"].take(picked),
        "topic_id": columns["topic_id"].take(picked),
        "partition": columns["partition"].take(picked),
        "delivery_state": states,
        "delivery_state_name": delivery_state_names(states),
        "delivery_count": delivery_count,
        "offsets": pa.array(offsets.view(np.int64)),
        "batches": pa.array(np.bincount(group, minlength=count).astype(np.int64)),
        "first_offset": _extreme(first, first_valid, group, count, smallest=True),
        "last_offset": _extreme(last, last_valid, group, count, smallest=False),
        "at_delivery_limit": pc.greater_equal(delivery_count, delivery_count_limit),
    }
    return pa.table(table).cast(DELIVERY_COUNTS_SCHEMA)
