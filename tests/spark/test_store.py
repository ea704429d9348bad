"""The output's tables as an incremental run changes them (`sharestate.io.store`): small
files compacted once they pile up, rows kept; the rows of given keys read alike whether the
keys are on the driver or in Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from sharestate.io import store as store_module
from sharestate.io.store import (
    COMPACT_ABOVE_FILES,
    COMPACT_TARGET_BYTES,
    REWRITE_BELOW_BYTES,
    TableStore,
    arrow_frame,
)
from tests.support.paths import ROOT


def _appended(path: Path, settled: list[bool]) -> None:
    """A table partitioned by `settled`, one append (one file) per entry of `settled`."""
    for number, flag in enumerate(settled):
        rows = pa.table(
            {
                "first_offset": pa.array([3 * number, 3 * number + 1, 3 * number + 2], pa.int64()),
                "settled": pa.array([flag] * 3),
            }
        )
        write_deltalake(str(path), rows, mode="append", partition_by=["settled"])


def _partition(path: Path, settled: bool) -> list[int]:
    table = DeltaTable(str(path)).to_pyarrow_table(filters=[("settled", "=", settled)])
    return list(table.column("first_offset").to_pylist())


@pytest.mark.spark
def test_a_partition_with_too_many_small_files_is_compacted_rows_and_order_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    settled_files = COMPACT_ABOVE_FILES + 1
    _appended(tmp_path / "ranges", [True] * settled_files + [False, False])
    before = {flag: _partition(tmp_path / "ranges", flag) for flag in (True, False)}
    version = DeltaTable(str(tmp_path / "ranges")).version()

    change = TableStore(spark, str(tmp_path)).compact("ranges")

    assert change.version == version + 1
    assert change.files_read == settled_files + 2  # the other partition's small files too
    assert change.files_written == 2  # one per partition
    assert (change.rows_inserted, change.rows_deleted) == (0, 0)
    assert len(DeltaTable(str(tmp_path / "ranges")).file_uris()) == 2
    assert {flag: _partition(tmp_path / "ranges", flag) for flag in (True, False)} == before


@pytest.mark.spark
def test_no_partition_over_the_limit_no_commit(spark: SparkSession, tmp_path: Path) -> None:
    # Many files in all, but no partition holds more than the limit.
    _appended(tmp_path / "ranges", [True, False] * COMPACT_ABOVE_FILES)
    version = DeltaTable(str(tmp_path / "ranges")).version()

    change = TableStore(spark, str(tmp_path)).compact("ranges")

    assert change.version is None
    assert DeltaTable(str(tmp_path / "ranges")).version() == version


@pytest.mark.spark
def test_files_at_the_target_size_are_not_small(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _appended(tmp_path / "ranges", [True] * (COMPACT_ABOVE_FILES + 1))
    monkeypatch.setattr(store_module, "COMPACT_TARGET_BYTES", 1)  # every file is as large
    assert TableStore(spark, str(tmp_path)).compact("ranges").version is None


@pytest.mark.spark
@pytest.mark.parametrize("local", [True, False], ids=["delta-rs", "spark"])
def test_the_rows_of_keys_read_on_the_driver_or_through_spark_are_the_same(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local: bool
) -> None:
    if not local:  # as on a cluster: read through Spark's Delta reader
        monkeypatch.setattr(store_module, "is_local", lambda path, spark=None: False)
    _appended(tmp_path / "ranges", [True, False, True])  # offsets 0-2 and 6-8 settled
    store = TableStore(spark, str(tmp_path))
    keys = pa.table(
        {
            "first_offset": pa.array([1, 4, 7, 7, 99], pa.int64()),
            "wanted": [True, False, True, True, True],
        }
    )

    def offsets(scope: pa.Table, partition: tuple[str, bool] | None = None) -> list[int]:
        rows = store.read_arrow_matching("ranges", scope, ["first_offset"], partition=partition)
        assert sorted(rows.column_names) == ["first_offset", "settled"]  # the table's columns
        return sorted(rows.column("first_offset").to_pylist())

    # A key asked twice gives its row once.
    assert offsets(keys.filter(pc.field("wanted")), ("settled", True)) == [1, 7]
    assert offsets(keys) == [1, 4, 7]
    assert offsets(keys.slice(0, 0)) == []


def test_the_docs_give_the_limits_the_code_compacts_and_rewrites_at() -> None:
    text = " ".join((ROOT / "docs" / "incremental.md").read_text(encoding="utf-8").split())
    limits = (
        f"more than {COMPACT_ABOVE_FILES} files smaller than {COMPACT_TARGET_BYTES // 2**20} MiB"
    )
    assert limits in text
    assert f"smaller than {REWRITE_BELOW_BYTES // 2**20} MiB (`REWRITE_BELOW_BYTES`" in text


@pytest.mark.spark
@pytest.mark.parametrize("rewrite", [True, False], ids=["rewritten", "merge"])
def test_replace_deletes_the_keys_rows_and_inserts_the_new_ones_in_one_commit(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rewrite: bool
) -> None:
    if not rewrite:  # as for a table too large to write again whole
        monkeypatch.setattr(store_module, "REWRITE_BELOW_BYTES", 0)
    stored = pa.table(
        {
            "key": pa.array(["a", "a", "b", "c", "d"]),
            "n": pa.array([1, 2, 3, 4, 5], pa.int32()),
            "sizes": pa.array([[1], [2], [], None, [5, 5]], pa.list_(pa.int64())),
        }
    )
    write_deltalake(str(tmp_path / "keyed"), stored)
    store = TableStore(spark, str(tmp_path))
    store.read_arrow("keyed")  # read on the driver first, as a run does for some tables
    rows = spark.createDataFrame(
        [("a", 10, [10]), ("e", 11, None)], "key string, n int, sizes array<bigint>"
    )
    delete = spark.createDataFrame([("a",), ("c",), ("zz",)], "key string")

    change = store.replace("keyed", rows, delete, ["key"])

    assert (change.version, change.rows_inserted, change.rows_deleted) == (1, 2, 3)
    assert (change.files_read, change.files_written) == (1, 1)
    after = DeltaTable(str(tmp_path / "keyed")).to_pyarrow_table()
    assert sorted(zip(*after.to_pydict().values(), strict=True)) == [
        ("a", 10, [10]),
        ("b", 3, []),
        ("d", 5, [5, 5]),
        ("e", 11, None),
    ]
    assert after.schema == DeltaTable(str(tmp_path / "keyed"), version=0).to_pyarrow_table().schema


@pytest.mark.spark
def test_an_append_and_an_overwrite_report_their_commits_files_and_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """What a delta-rs commit added and removed, from the table before and after it: the
    file sizes on disk, the rows from the files' statistics."""
    store = TableStore(spark, str(tmp_path))
    rows = pa.table({"n": pa.array(range(7), pa.int64())})
    store.overwrite_arrow("counted", rows)

    appended = store.append_arrow("counted", rows.slice(0, 3))

    (new_file,) = set(DeltaTable(str(tmp_path / "counted")).file_uris()) - set(
        DeltaTable(str(tmp_path / "counted"), version=0).file_uris()
    )
    assert (appended.version, appended.rows_inserted, appended.rows_deleted) == (1, 3, 0)
    assert (appended.files_read, appended.bytes_read, appended.files_written) == (0, 0, 1)
    assert appended.bytes_written == Path(new_file).stat().st_size
    before = DeltaTable(str(tmp_path / "counted")).file_uris()

    overwritten = store.overwrite_arrow("counted", rows.slice(0, 5))

    assert (overwritten.version, overwritten.rows_inserted) == (2, 5)
    # Not a replace: what it read is what it removed.
    assert overwritten.files_read == len(before) == 2
    assert overwritten.bytes_read == sum(Path(f).stat().st_size for f in before)
    assert overwritten.files_written == 1


@pytest.mark.spark
def test_a_frame_of_an_arrow_table_keeps_rows_after_empty_batches(spark: SparkSession) -> None:
    # Concatenated and filtered tables have empty batches; two in a row made PySpark
    # 4.2.0's createDataFrame drop the rows after them.
    rows = pa.table({"n": pa.array(range(5), pa.int64())})
    batches = [
        rows.slice(0, 0),
        rows.slice(0, 0),
        rows.slice(0, 3),
        rows.slice(3, 0),
        rows.slice(3),
    ]
    table = pa.concat_tables(batches)
    assert [b.num_rows for b in table.to_batches()] == [0, 0, 3, 0, 2]
    frame = arrow_frame(spark, table)
    assert sorted(r.n for r in frame.collect()) == [0, 1, 2, 3, 4]
