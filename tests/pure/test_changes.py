"""`rows_above`: the rows of new Parquet files above the offsets processed, from the files'
footers where they tell and from two columns where they do not (an incremental run's size
check before Spark reads a row); and a local Delta export's version and the files new since
an earlier one, as delta-rs reads the table (`list_export`, `new_files`)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from sharestate.io.changes import DELTA, ExportFiles, list_export, new_files, rows_above


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


# ------------------------------------------------------------- a local Delta export's changes


def _delta_append(path: Path, partition: int, offsets: range) -> None:
    write_deltalake(str(path), _records(partition, offsets), mode="append")


def test_a_delta_exports_version_and_the_files_its_appends_added(tmp_path: Path) -> None:
    table = tmp_path / "export"
    _delta_append(table, 0, range(0, 10))
    first = list_export(str(table), DELTA)
    assert first == ExportFiles(DELTA, version=0)
    _delta_append(table, 0, range(10, 20))
    _delta_append(table, 1, range(0, 5))
    now = list_export(str(table), DELTA)
    assert now == ExportFiles(DELTA, version=2)
    assert not now.unchanged_since(first)

    added = new_files(str(table), first, now)

    assert added is not None and len(added) == 2
    assert set(added) == set(DeltaTable(str(table)).file_uris()) - set(
        DeltaTable(str(table), version=0).file_uris()
    )
    assert all(os.path.isfile(path) for path in added)
    assert rows_above(added, {0: 9}) == 10 + 5
    assert new_files(str(table), now, now) == []


def test_a_partition_folder_is_named_as_on_disk(tmp_path: Path) -> None:
    """The log escapes a partition folder's name once more (`p=a%253Ab` for the folder
    `p=a%3Ab`): the files are named as they are on disk."""
    table = tmp_path / "export"
    rows = _records(0, range(3)).append_column("p", pa.array(["a:b c"] * 3))
    write_deltalake(str(table), rows.slice(0, 1), partition_by=["p"])
    first = list_export(str(table), DELTA)
    write_deltalake(str(table), rows.slice(1), mode="append", partition_by=["p"])

    added = new_files(str(table), first, list_export(str(table), DELTA))

    assert added is not None and len(added) == 1
    assert os.path.isfile(added[0])
    (folder,) = [name for name in os.listdir(table) if name.startswith("p=")]
    assert "%3A" in folder
    assert os.path.dirname(added[0]) == str(table / folder)


def test_files_gone_in_between_tell_nothing(tmp_path: Path) -> None:
    """A delete (its rows rewritten) or a compaction takes files away: which rows are new
    is not told by the files, and the check is skipped."""
    for change in ("delete", "compact"):
        table = tmp_path / change
        _delta_append(table, 0, range(0, 10))
        _delta_append(table, 0, range(10, 20))
        first = list_export(str(table), DELTA)
        _delta_append(table, 0, range(20, 30))
        if change == "delete":
            DeltaTable(str(table)).delete('"offset" = 3')
        else:
            DeltaTable(str(table)).optimize.compact()
        now = list_export(str(table), DELTA)
        assert now.version == 3
        assert new_files(str(table), first, now) is None, change


def test_a_version_the_log_no_longer_has_tells_nothing(tmp_path: Path) -> None:
    table = tmp_path / "export"
    _delta_append(table, 0, range(0, 10))
    _delta_append(table, 0, range(10, 20))
    now = list_export(str(table), DELTA)
    assert new_files(str(table), ExportFiles(DELTA, version=5), now) is None  # now < earlier
    (table / "_delta_log" / "00000000000000000000.json").unlink()
    assert new_files(str(table), ExportFiles(DELTA, version=0), now) is None


def test_a_delta_log_without_a_commit_has_no_version(tmp_path: Path) -> None:
    (tmp_path / "export" / "_delta_log").mkdir(parents=True)
    assert list_export(str(tmp_path / "export"), DELTA) == ExportFiles(DELTA, version=None)
