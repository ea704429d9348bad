"""Comparing two outputs' Delta tables row for row, read on the driver through delta-rs: the
tests' tables are a few thousand rows, and reading them through Spark (a sort and a collect
of each side) cost seconds per table."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

#: How many differing rows a failure shows of each side.
SHOWN: int = 5


def _columns(table: pa.Table) -> list[tuple[str, pa.DataType]]:
    """Names and types, nullability aside."""
    return [(field.name, field.type) for field in table.schema]


def assert_same_rows(got: Path, want: Path) -> None:
    """The Delta tables at `got` and `want` have the same columns (names, types and order;
    nullability aside) and the same rows, each as many times, in any order."""
    got_table = DeltaTable(str(got)).to_pyarrow_table()
    want_table = DeltaTable(str(want)).to_pyarrow_table()
    assert _columns(got_table) == _columns(want_table), f"{got.name}: columns differ"
    got_rows = Counter(map(repr, got_table.to_pylist()))
    want_rows = Counter(map(repr, want_table.to_pylist()))
    if got_rows != want_rows:
        extra = list((got_rows - want_rows).elements())
        missing = list((want_rows - got_rows).elements())
        raise AssertionError(
            f"{got.name}: {len(extra)} row(s) not in {want}, {len(missing)} row(s) missing; "
            f"first not wanted: {extra[:SHOWN]}; first missing: {missing[:SHOWN]}"
        )


#: Written by every run with its own time: outputs are compared without them.
RUN_TABLES: frozenset[str] = frozenset({"run_summary", "_checkpoint"})


def delta_tables(output: Path) -> list[str]:
    """The Delta tables under `output` but RUN_TABLES, by name."""
    return sorted(
        p.name for p in output.iterdir() if (p / "_delta_log").is_dir() and p.name not in RUN_TABLES
    )


def assert_same_tables(got: Path, want: Path) -> None:
    """The outputs `got` and `want` hold the same tables (RUN_TABLES aside), row for row."""
    assert delta_tables(got) == delta_tables(want)
    for name in delta_tables(want):
        assert_same_rows(got / name, want / name)
