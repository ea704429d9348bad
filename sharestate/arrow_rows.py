"""Python rows as Spark's `createDataFrame` takes them (tuples for structs, dicts for maps),
as an Arrow table of the same schema: a few rows the driver writes itself (a run's summary
and checkpoint) with no Spark job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa


def _value(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(kind):
        return [(key, _value(item, kind.item_type)) for key, item in value.items()]
    if pa.types.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        items = value.values() if isinstance(value, dict) else value
        return {f.name: _value(item, f.type) for f, item in zip(fields, items, strict=True)}
    if pa.types.is_list(kind):
        return [_value(item, kind.value_type) for item in value]
    return value


def arrow_rows(rows: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """`rows` (each a tuple in `schema`'s column order) as an Arrow table of `schema`."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    return pa.table(
        [
            pa.array([_value(v, f.type) for v in values], f.type)
            for f, values in zip(schema, columns, strict=True)
        ],
        schema=schema,
    )
