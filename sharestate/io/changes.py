"""What a local export holds now, without Spark: for the checks an incremental run makes
before Spark reads a row.

What a run reads is what the inputs' streams deliver (`sharestate.io.streams`: Spark's own
sources, on any file system). A local export is also listed here, so that a scheduled run
can tell "nothing new" before it starts Spark, and tell a history's worth of new rows
(`rows_above`) before a stream reads them:

* Parquet folder: its files as Spark lists them (recursively, without names starting with
  `_` or `.`), with size and modification time.
* Delta table: its version; the files new since a version are the files of the table now
  that it did not have then, as delta-rs (`deltalake`) reads the two snapshots (None where
  files went away in between, or rows were deleted in place: the check is skipped).
* Anything else (off the local file system, `kafka://`): untracked; its stream tells.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from sharestate.backend import backend
from sharestate.io.files import local_path

PARQUET: Final = "parquet"
DELTA: Final = "delta"
UNTRACKED: Final = "untracked"


@dataclass(frozen=True)
class ExportFiles:
    """What an export held when a run listed it: its files (a Parquet folder; path ->
    [size, modification time in ms], or [-1, -1] where the file system gives neither
    cheaply) or its version (a Delta table)."""

    kind: str
    files: dict[str, list[int]] = field(default_factory=dict)
    version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "files": self.files, "version": self.version}

    @staticmethod
    def from_json(data: dict[str, Any] | None) -> ExportFiles | None:
        if not data:
            return None
        files = {str(k): [int(x) for x in v] for k, v in (data.get("files") or {}).items()}
        version = data.get("version")
        return ExportFiles(str(data["kind"]), files, None if version is None else int(version))

    def unchanged_since(self, earlier: ExportFiles | None) -> bool:
        """Whether nothing was added since `earlier` (untracked exports always may have)."""
        if earlier is None or self.kind != earlier.kind or self.kind == UNTRACKED:
            return False
        if self.kind == DELTA:
            return self.version == earlier.version
        return self.files == earlier.files


def _hidden(name: str) -> bool:
    """Names Spark's file listing leaves out."""
    return name.startswith(("_", ".")) or name.endswith("._COPYING_")


def _list_local_parquet(root: str) -> dict[str, list[int]]:
    files: dict[str, list[int]] = {}
    base = os.path.abspath(local_path(root))
    for folder, subfolders, names in os.walk(base):
        subfolders[:] = sorted(d for d in subfolders if not _hidden(d))
        for name in sorted(names):
            if _hidden(name):
                continue
            full = os.path.join(folder, name)
            stat = os.stat(full)
            files[full] = [int(stat.st_size), int(stat.st_mtime_ns // 1_000_000)]
    return files


def _local_delta_version(root: str) -> int | None:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(os.path.abspath(local_path(root))).version()
    except TableNotFoundError:  # a `_delta_log/` without a commit yet
        return None


def list_export(path: str, fmt: str, spark: SparkSession | None = None) -> ExportFiles:
    """What the export at `path` (format `fmt`: parquet, delta or kafka) holds now, if it
    is local (else: untracked; its stream tells what is new)."""
    local = urlparse(path).scheme in ("", "file")
    if spark is not None:
        local = backend(spark).is_local(path)
    if fmt == PARQUET and local:
        return ExportFiles(PARQUET, _list_local_parquet(path))
    if fmt == DELTA and local:
        return ExportFiles(DELTA, version=_local_delta_version(path))
    return ExportFiles(UNTRACKED)


def new_files(path: str, earlier: ExportFiles, now: ExportFiles) -> list[str] | None:
    """The files of the export at `path` that hold what was added since `earlier`; None
    when that cannot be told (the run then filters the whole export)."""
    if earlier.kind != now.kind or now.kind == UNTRACKED:
        return None
    if now.kind == PARQUET:
        return sorted(p for p, seen in now.files.items() if earlier.files.get(p) != seen)
    if earlier.version is None or now.version is None or now.version < earlier.version:
        return None
    return _delta_added_files(path, earlier.version, now.version)


def _delta_added_files(path: str, after: int, upto: int) -> list[str] | None:
    """The data files a local Delta table has at version `upto` and had not at `after`; None
    when that does not tell the rows added: a file went away in between (rows deleted or
    rewritten, a compaction), a file has rows deleted in place (a deletion vector), the files
    name their columns otherwise than the table (column mapping: `rows_above` reads them by
    name), or version `after` is no longer in the log."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError

    try:
        table = DeltaTable(os.path.abspath(local_path(path)), version=upto)
        mapping = table.metadata().configuration.get("delta.columnMapping.mode", "none")
        if mapping != "none" or pa.table(table.deletion_vectors()).num_rows:
            return None
        now = set(table.file_uris())
        table.load_as_version(after)
        before = set(table.file_uris())
    except DeltaError:
        return None
    return sorted(now - before) if before <= now else None


def rows_above(files: list[str], last_offsets: Mapping[int, int]) -> int:
    """How many rows of the local Parquet `files` (Kafka-record schema) lie above
    `last_offsets` (partition -> the last offset processed; a partition without one was
    never processed), without Spark: an incremental run tells from it, before reading any
    row through Spark, an increment too large for one (rows below the offsets, backfilled,
    are counted when read). A row group's footer statistics settle it when its offsets all
    lie at or below the last offsets of the partitions it spans, or it holds one partition
    and its offsets all lie above; any other row group has its `partition` and `offset`
    columns read and compared row by row."""
    rows = 0
    for file in files:
        parquet = pq.ParquetFile(local_path(file))
        metadata = parquet.metadata
        names = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
        folder_partition = _folder_partition(file)
        for index in range(metadata.num_row_groups):
            group = metadata.row_group(index)
            offsets = _min_max(group, names, "offset")
            partitions = _min_max(group, names, "partition")
            if partitions is None and folder_partition is not None:
                partitions = (folder_partition, folder_partition)
            settled = _settled_by_footer(offsets, partitions, last_offsets)
            if settled is not None:
                rows += group.num_rows if settled else 0
                continue
            columns = [c for c in ("partition", "offset") if c in names]
            read = parquet.read_row_group(index, columns=columns)
            rows += _count_above(read, folder_partition, last_offsets)
    return rows


def _settled_by_footer(
    offsets: tuple[int, int] | None,
    partitions: tuple[int, int] | None,
    last_offsets: Mapping[int, int],
) -> bool | None:
    """True: every row of the row group lies above; False: none does; None: its footer
    cannot tell."""
    if offsets is None or partitions is None or partitions[1] - partitions[0] > len(last_offsets):
        return None
    spanned = [last_offsets.get(p) for p in range(partitions[0], partitions[1] + 1)]
    if all(last is not None and offsets[1] <= last for last in spanned):
        return False
    last = spanned[0]
    if partitions[0] == partitions[1] and (last is None or offsets[0] > last):
        return True
    return None


def _count_above(
    read: pa.Table, folder_partition: int | None, last_offsets: Mapping[int, int]
) -> int:
    """Rows of `read` (its `partition` and `offset` columns) above their partition's last
    offset processed."""
    if "offset" not in read.column_names:  # not a Kafka-record file: its schema check says so
        return int(read.num_rows)
    # A null offset counts above; a null partition is one never processed.
    offsets = pc.fill_null(read.column("offset"), np.iinfo(np.int64).max).to_numpy()
    if "partition" in read.column_names:
        partitions = pc.fill_null(read.column("partition"), -1).to_numpy()
    elif folder_partition is not None:
        partitions = np.full(len(offsets), folder_partition)
    else:  # no partition to go by: above the lowest last offset
        lowest = min(last_offsets.values(), default=-1)
        return int(np.count_nonzero(offsets > lowest))
    size = max([*last_offsets, int(partitions.max(initial=0))]) + 1
    # -1 below every offset: a partition never processed has all its rows above.
    last = np.full(size, -1, dtype=np.int64)
    for partition, offset in last_offsets.items():
        if partition >= 0:
            last[partition] = offset
    known = partitions >= 0
    above = np.ones(len(offsets), dtype=bool)
    above[known] = offsets[known] > last[partitions[known]]
    return int(np.count_nonzero(above))


def _min_max(group: Any, names: list[str], column: str) -> tuple[int, int] | None:
    """The min and max statistics of `column` in a row group's metadata, if it has them."""
    if column not in names:
        return None
    stats = group.column(names.index(column)).statistics
    if stats is None or not stats.has_min_max:
        return None
    return int(stats.min), int(stats.max)


def _folder_partition(file: str) -> int | None:
    """The Kafka partition a `partition=N` folder of the file's path names, if one does."""
    for part in reversed(os.path.dirname(file).split("/")):
        if part.startswith("partition="):
            try:
                return int(unquote(part.split("=", 1)[1]))
            except ValueError:
                return None
    return None
