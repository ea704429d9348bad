"""`rows_above`: the rows of new Parquet files above the offsets processed, from the files'
footers where they tell and from two columns where they do not (an incremental run's size
check before Spark reads a row)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sharestate.io.changes import rows_above


def _records(partition: int, offsets: range) -> pa.Table:
    return pa.table(
        {
            "partition": pa.array([partition] * len(offsets), pa.int32()),
            "offset": pa.array(list(offsets), pa.int64()),
            "value": pa.array([b"v"] * len(offsets), pa.binary()),
        }
    )


def _write(path: Path, table: pa.Table, **options: object) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=10, **options)  # type: ignore[arg-type]
    return str(path)


def test_row_groups_above_the_last_offsets_count_and_those_below_do_not(tmp_path: Path) -> None:
    # Partition 0 processed up to 19: of its 30 rows in three row groups, the last is new.
    # Partition 1 processed up to 4: its row group 0-9 straddles it, so it is read: 5-9.
    files = [
        _write(tmp_path / "a.parquet", _records(0, range(30))),
        _write(tmp_path / "b.parquet", _records(1, range(10))),
    ]
    assert rows_above(files, {0: 19, 1: 4}) == 10 + 5


def test_row_groups_of_several_partitions_are_read(tmp_path: Path) -> None:
    # Partitions 0 and 1 interleaved in every row group: their statistics span both.
    mixed = pa.concat_tables([_records(0, range(10)), _records(1, range(10))])
    order = [i // 2 + (i % 2) * 10 for i in range(20)]
    files = [_write(tmp_path / "a.parquet", mixed.take(order))]
    assert rows_above(files, {0: 9, 1: 4}) == 5
    assert rows_above(files, {0: 9, 1: 9}) == 0


def test_an_export_moved_elsewhere_has_no_row_above(tmp_path: Path) -> None:
    files = [
        _write(tmp_path / "moved" / "a.parquet", _records(0, range(30))),
        _write(tmp_path / "moved" / "b.parquet", _records(1, range(10))),
    ]
    assert rows_above(files, {0: 29, 1: 9}) == 0


def test_a_partition_never_processed_counts_whole(tmp_path: Path) -> None:
    files = [_write(tmp_path / "a.parquet", _records(7, range(25)))]
    assert rows_above(files, {0: 1_000}) == 25


def test_row_groups_without_statistics_are_read(tmp_path: Path) -> None:
    files = [_write(tmp_path / "a.parquet", _records(0, range(30)), write_statistics=False)]
    assert rows_above(files, {0: 14}) == 15


def test_a_partition_folder_gives_the_partition(tmp_path: Path) -> None:
    rows = _records(3, range(20)).drop_columns(["partition"])
    files = [_write(tmp_path / "partition=3" / "a.parquet", rows)]
    assert rows_above(files, {3: 9, 4: 100}) == 10
