"""The output folder's Delta tables as an incremental run changes them: read, append, replace
rows, overwrite, restore; each change one commit.

A change is computed by Spark and committed by one of two writers. Where the output folder
is on the local file system the commit is made by delta-rs (the `deltalake` package) from
Arrow on the driver: a small commit through Spark runs several Spark jobs (the table's
snapshot, the write, Delta's post-commit work), delta-rs runs none, and an incremental run
makes a dozen commits. Elsewhere (HDFS, object stores, Databricks) Spark's Delta writer
makes the same commits, and a change too large to bring to the driver goes through Spark
everywhere. Both write the same Delta protocol (reader 1, writer 2): what one writes the
other reads and changes, and so do other Delta readers.

`replace` is the one keyed change: it deletes the stored rows that match `delete` on the
`on` columns and inserts `rows`, in one commit: a MERGE, or, for a small unpartitioned table
of a local output, the table read, filtered and written again on the driver (delta-rs's
MERGE takes seconds to delete thousands of keys from a table that Arrow filters in
milliseconds). Each change reports what it read and wrote (files, bytes, rows) from its own
commit (delta-rs's snapshots of the table before and after it, or Spark's `DESCRIBE
HISTORY`), for the run's log and the benchmark.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.arrow_keys import rows_by_key
from sharestate.backend import backend
from sharestate.io.files import local_path
from sharestate.io.tables import (
    delta_table_sql,
    read_table,
    without_collations,
    write_delta_on_driver,
)
from sharestate.places import arrow_frame as arrow_frame

#: Rows above which a change goes through Spark's writer even for a local output: bringing
#: them to the driver as Arrow would cost more than Spark's fixed cost per commit.
DRIVER_ROWS_LIMIT: Final = 1_000_000
#: Rows above which a small result (`rows_on_driver`) stays in Spark rather than coming to
#: the driver.
SMALL_TABLE_ROWS: Final = 100_000
#: A table is compacted once one of its partitions holds more than this many files smaller
#: than COMPACT_TARGET_BYTES: each incremental run adds a file to the tables it appends to
#: and to the settled ranges' partition, and a MERGE scans every file of its table.
COMPACT_ABOVE_FILES: Final = 32
#: The size compaction packs small files into (files this large or larger are left alone).
COMPACT_TARGET_BYTES: Final = 16 * 2**20
#: A local unpartitioned table smaller than this is changed by `replace` as a whole (read,
#: filtered and written again in one commit) rather than by a MERGE: the tables of a row or a
#: few per share-partition or group. One that grows with the history (the segments) goes
#: back to the MERGE once past it, so a rewrite's cost stays bounded.
REWRITE_BELOW_BYTES: Final = 8 * 2**20
#: The marker column of `replace`'s MERGE source: which source rows delete, which insert.
_OP: Final = "_sharestate_op"

log = logging.getLogger("sharestate")


@dataclass(frozen=True)
class Change:
    """What one commit read and wrote: the table's files it read (scanned) and their bytes,
    the files and bytes it added, the rows it inserted and deleted."""

    table: str
    operation: str
    version: int | None
    files_read: int = 0
    bytes_read: int = 0
    files_written: int = 0
    bytes_written: int = 0
    rows_inserted: int = 0
    rows_deleted: int = 0
    writer: str = "delta-rs"

    def describe(self) -> str:
        if self.version is None:
            return f"{self.operation}: nothing to change, no commit"
        return (
            f"{self.operation} v{self.version}: +{self.rows_inserted:,} -{self.rows_deleted:,}"
            f" rows; read {self.files_read} file(s) {_mib(self.bytes_read)},"
            f" wrote {self.files_written} file(s) {_mib(self.bytes_written)} ({self.writer})"
        )


def _mib(size: int) -> str:
    return f"{size / 2**20:.2f} MiB"


def rows_on_driver(df: DataFrame, limit: int = SMALL_TABLE_ROWS) -> pa.Table | None:
    """`df`'s rows on the driver, as Arrow, if it has at most `limit` of them; else None
    (then no more than `limit` + 1 rows came to the driver): a small result, once brought
    to the driver, is read by later queries as a local relation, computed once, without
    Spark's cache (which a serverless session refuses)."""
    rows = df.limit(limit + 1).toArrow()
    return None if rows.num_rows > limit else rows


def is_local(path: str, spark: SparkSession | None = None) -> bool:
    """Whether `path` is on the local file system (a plain path or a `file:` URI) and, with
    `spark`, one that this process and the session's Spark both see
    (`sharestate.backend.Backend.is_local`)."""
    if spark is not None:
        return backend(spark).is_local(path)
    return urlparse(path).scheme in ("", "file")


#: A partition of a table: (partition column, value).
Partition = tuple[str, bool | int | str]


class TableStore:
    """The Delta tables under `output` (one folder each)."""

    def __init__(self, spark: SparkSession, output: str) -> None:
        self.spark = spark
        self.output = output.rstrip("/")
        #: delta-rs commits where the output is local.
        self.local = is_local(self.output, spark)
        #: The version each table was first read at: a DataFrame Spark reads lazily would
        #: otherwise see this run's own later commits when it is computed.
        self._read_versions: dict[str, int] = {}
        #: Tables (or a partition of one) read on the driver, until the table changes: a
        #: run reads some twice.
        self._on_driver: dict[tuple[str, Partition | None], pa.Table] = {}

    def path(self, name: str) -> str:
        return f"{self.output}/{name}"

    def _local_path(self, name: str) -> str:
        return os.path.abspath(local_path(self.path(name)))

    def exists(self, name: str) -> bool:
        if self.local:
            return os.path.isdir(os.path.join(self._local_path(name), "_delta_log"))
        return read_table(self.spark, self.path(name), "delta") is not None

    def version(self, name: str) -> int | None:
        """The table's latest version; None when there is no such table."""
        if not self.exists(name):
            return None
        if self.local:
            return int(_delta_rs_table(self._local_path(name)).version())
        row = self.spark.sql(f"DESCRIBE HISTORY {delta_table_sql(self.path(name))} LIMIT 1")
        return int(row.collect()[0]["version"])

    def read(self, name: str, *, small: bool = True) -> DataFrame:
        """The table as a DataFrame. `small`: a table of a few MB, read on the driver
        through delta-rs where the output is local (no Spark job for Delta's snapshot)."""
        if self.local and small:
            return arrow_frame(self.spark, self._read_on_driver(name))
        if name not in self._read_versions:
            version = self.version(name)
            if version is None:
                raise FileNotFoundError(self.path(name))
            self._read_versions[name] = version
        df = read_table(self.spark, self.path(name), "delta", self._read_versions[name])
        if df is None:
            raise FileNotFoundError(self.path(name))
        return df

    def read_arrow_matching(
        self, name: str, keys: pa.Table, on: Sequence[str], partition: Partition | None = None
    ) -> pa.Table:
        """The rows of table `name` whose `on` columns equal those of a row of `keys`, each
        row once, with the table's columns only, on the driver; with `partition` (column,
        value), only that partition's. Where the output is local the table is read and
        filtered on the driver (delta-rs); elsewhere Spark joins it with the keys (the rows a
        run needs of a table that grows with the history are few)."""
        if not self.local:
            return self.read_arrow_joined(name, keys, on, partition)
        if keys.num_rows == 0:  # no key asks: the table's schema, not its rows
            schema = pa.schema(_delta_rs_table(self._local_path(name)).schema().to_arrow())
            return schema.empty_table()
        table = self._read_on_driver(name, partition)
        # A semi join gives each row once, however often its key comes.
        return table.take(rows_by_key(table, keys, on, "left semi"))

    def read_arrow_joined(
        self, name: str, keys: pa.Table, on: Sequence[str], partition: Partition | None = None
    ) -> pa.Table:
        """`read_arrow_matching` through Spark, wherever the output is: for a table that
        grows with the history (the rows a run needs of it are few, the table is not)."""
        table_df = self.read(name, small=False)
        if partition is not None:
            table_df = table_df.filter(F.col(partition[0]) == F.lit(partition[1]))
        wanted = arrow_frame(self.spark, keys.select(list(on))).distinct()
        rows: pa.Table = table_df.join(wanted, list(on), "left_semi").toArrow()
        return rows

    def arrow_schema(self, name: str) -> pa.Schema:
        """The table's schema as Arrow (as delta-rs reads the table where the output is
        local, as Spark hands its rows over elsewhere)."""
        if self.local:
            return pa.schema(_delta_rs_table(self._local_path(name)).schema().to_arrow())
        # No row: Spark plans an empty relation, and no job runs.
        schema: pa.Schema = self.read(name, small=False).limit(0).toArrow().schema
        return schema

    def read_arrow(self, name: str) -> pa.Table:
        """A small table as Arrow, on the driver."""
        if self.local:
            return self._read_on_driver(name)
        return self.read(name, small=False).toArrow()

    def _read_on_driver(self, name: str, partition: Partition | None = None) -> pa.Table:
        """The whole table (or one `partition` of it) through delta-rs, logged with the files
        and bytes it read (a run's reads, like its commits, are part of what it costs); read
        again only once the table changed."""
        if (name, partition) in self._on_driver:
            return self._on_driver[name, partition]
        table = _delta_rs_table(self._local_path(name))
        sizes = _file_sizes(table, partition)
        where = "" if partition is None else f" (partition {partition[0]}={partition[1]})"
        log.info(
            "%s: read v%d%s on the driver: %d file(s) %s (delta-rs)",
            name,
            table.version(),
            where,
            len(sizes),
            _mib(sum(sizes.values())),
        )
        filters = None if partition is None else [(partition[0], "=", partition[1])]
        self._on_driver[name, partition] = table.to_pyarrow_table(filters=filters)
        return self._on_driver[name, partition]

    def _forget(self, name: str) -> None:
        """Drop what was read of table `name` on the driver: it changes."""
        # A copy of the keys: steps run side by side read other tables meanwhile.
        for key in [key for key in list(self._on_driver) if key[0] == name]:
            del self._on_driver[key]

    def restore(self, name: str, version: int) -> None:
        """Put the table back as it was at `version` (a new commit)."""
        self._forget(name)
        if self.local:
            _delta_rs_table(self._local_path(name)).restore(version)
            return
        self.spark.sql(
            f"RESTORE TABLE {delta_table_sql(self.path(name))} TO VERSION AS OF {version}"
        )

    def append(self, name: str, rows: DataFrame, *, row_count: int | None = None) -> Change:
        """Add `rows` to the table (one commit)."""
        self._forget(name)
        if self._through_spark(row_count):
            without_collations(rows).write.format("delta").mode("append").save(self.path(name))
            return self._spark_change(name, "append")
        return self.append_arrow(name, rows.toArrow())

    def append_arrow(self, name: str, rows: pa.Table) -> Change:
        """`append` with `rows` already on the driver, as Arrow."""
        if not self.local:
            return self.append(name, arrow_frame(self.spark, rows))
        self._forget(name)
        if rows.num_rows == 0:  # nothing to add: no commit
            return Change(table=name, operation="append", version=None)
        from deltalake import write_deltalake

        write_deltalake(self._local_path(name), rows, mode="append")
        return self._delta_rs_change(name, "append")

    def overwrite(self, name: str, rows: DataFrame) -> Change:
        """Replace every row of the table with `rows` (one commit)."""
        self._forget(name)
        if self._through_spark(None):
            written = without_collations(rows).write.format("delta").mode("overwrite")
            written.save(self.path(name))
            return self._spark_change(name, "overwrite")
        return self.overwrite_arrow(name, rows.toArrow())

    def overwrite_arrow(self, name: str, rows: pa.Table) -> Change:
        """`overwrite` with `rows` already on the driver, as Arrow (one file)."""
        if not self.local:
            return self.overwrite(name, arrow_frame(self.spark, rows).coalesce(1))
        self._forget(name)
        write_delta_on_driver(self._local_path(name), rows)
        return self._delta_rs_change(name, "overwrite")

    def replace(
        self,
        name: str,
        rows: DataFrame,
        delete: DataFrame,
        on: Sequence[str],
        *,
        row_count: int | None = None,
    ) -> Change:
        """Delete the stored rows whose `on` columns equal those of a row of `delete`, and
        insert `rows`, in one commit (a MERGE, or the table written again where it is local,
        unpartitioned and smaller than REWRITE_BELOW_BYTES). `delete` holds the `on` columns
        only, each combination once (a stored row may match one of them at most)."""
        stored = self._on_driver.get((name, None))
        self._forget(name)
        source = _merge_source(rows, delete, on)
        condition = " AND ".join(f"t.`{c}` = s.`{c}`" for c in on) + f" AND s.{_OP} = 'delete'"
        insert = f"s.{_OP} = 'insert'"
        if self._through_spark(row_count):
            # SQL, not delta-spark's DeltaTable: over Spark Connect that needs Delta's
            # Connect plugins on the server; MERGE INTO runs wherever Delta does.
            columns = ", ".join(f"`{c}`" for c in rows.columns)
            values = ", ".join(f"s.`{c}`" for c in rows.columns)
            self.spark.sql(
                f"MERGE INTO {delta_table_sql(self.path(name))} t USING {{source}} s"
                f" ON {condition} WHEN MATCHED THEN DELETE"
                f" WHEN NOT MATCHED AND {insert} THEN INSERT ({columns}) VALUES ({values})",
                source=without_collations(source),
            )
            return self._spark_change(name, "replace")
        return self._replace_on_driver(name, stored, source.toArrow(), on)

    def replace_arrow(
        self, name: str, rows: pa.Table, delete: pa.Table, on: Sequence[str]
    ) -> Change:
        """`replace` with `rows` and `delete` already on the driver, as Arrow: where the
        output is local no Spark job runs."""
        if not self.local:
            spark = self.spark
            return self.replace(name, arrow_frame(spark, rows), arrow_frame(spark, delete), on)
        stored = self._on_driver.get((name, None))
        self._forget(name)
        return self._replace_on_driver(name, stored, _arrow_merge_source(rows, delete, on), on)

    def _replace_on_driver(
        self, name: str, stored: pa.Table | None, source: pa.Table, on: Sequence[str]
    ) -> Change:
        """`replace` by delta-rs from its merge source (`_merge_source`) as Arrow: the table
        written again whole, or a MERGE. `stored`: the table as this run read it, if it did."""
        if source.num_rows == 0:  # nothing to delete or insert: no commit
            return Change(table=name, operation="replace", version=None)
        table = _delta_rs_table(self._local_path(name))
        if _rewritten_whole(table):
            return self._rewrite(name, table, stored, source, on)
        condition = " AND ".join(f"t.`{c}` = s.`{c}`" for c in on) + f" AND s.{_OP} = 'delete'"
        metrics = (
            table.merge(source, condition, source_alias="s", target_alias="t")
            .when_matched_delete()
            .when_not_matched_insert_all(predicate=f"s.{_OP} = 'insert'", except_cols=[_OP])
            .execute()
        )
        return self._delta_rs_change(name, "replace", metrics)

    def _rewrite(
        self, name: str, table: Any, stored: pa.Table | None, source: pa.Table, on: Sequence[str]
    ) -> Change:
        """`replace` on the driver: the stored rows less those matching a delete row of
        `source` (`_merge_source`), with its insert rows, written in one commit."""
        if stored is None:  # not read on the driver this run, or changed since
            stored = table.to_pyarrow_table()
        marked = pc.field(_OP) == "insert"
        inserts = source.filter(marked).drop_columns([_OP]).select(stored.column_names)
        kept = rows_by_key(stored, source.filter(~marked), on, "left anti")
        rows = pa.concat_tables([stored.take(kept), inserts.cast(stored.schema)])
        from deltalake import write_deltalake

        write_deltalake(self._local_path(name), rows, mode="overwrite")
        metrics = {
            "num_target_rows_inserted": inserts.num_rows,
            "num_target_rows_deleted": stored.num_rows - len(kept),
        }
        return self._delta_rs_change(name, "replace", metrics)

    def compact(self, name: str) -> Change:
        """Rewrite the table's small files into fewer (one commit) when a partition of it
        holds more than COMPACT_ABOVE_FILES files smaller than COMPACT_TARGET_BYTES; else no
        commit. The rows stay as they are, and so does their order within a partition.
        Only where the output is local (delta-rs): elsewhere the platform's own compaction
        (Delta's `OPTIMIZE`, auto compaction) applies."""
        if not self.local:
            return Change(table=name, operation="compact", version=None)
        table = _delta_rs_table(self._local_path(name))
        if max(_small_files_per_partition(table), default=0) <= COMPACT_ABOVE_FILES:
            return Change(table=name, operation="compact", version=None)
        self._forget(name)
        table.optimize.compact(target_size=COMPACT_TARGET_BYTES)
        # A compaction adds and removes the same rows.
        return dataclasses.replace(self._delta_rs_change(name, "compact"), rows_inserted=0)

    def _through_spark(self, row_count: int | None) -> bool:
        return not self.local or (row_count is not None and row_count > DRIVER_ROWS_LIMIT)

    def _delta_rs_change(
        self, name: str, operation: str, metrics: dict[str, Any] | None = None
    ) -> Change:
        table = _delta_rs_table(self._local_path(name))
        version = int(table.version())
        after = _file_stats(table)
        before: dict[str, tuple[int, int]] = {}
        if version > 0:
            table.load_as_version(version - 1)
            before = _file_stats(table)
        # The commit's adds and removes, as the difference of the two snapshots (a path is
        # written once: a file that changes is a new file).
        added = {p: stats for p, stats in after.items() if p not in before}
        removed = {p: stats for p, stats in before.items() if p not in after}
        # A MERGE joins its source with every file of the table (no partition predicate
        # narrows it): what it read is the whole table before the commit.
        read = before if operation == "replace" else removed
        return Change(
            table=name,
            operation=operation,
            version=version,
            files_read=len(read),
            bytes_read=sum(size for size, _ in read.values()),
            files_written=len(added),
            bytes_written=sum(size for size, _ in added.values()),
            rows_inserted=int(metrics.get("num_target_rows_inserted", 0))
            if metrics is not None
            else sum(rows for _, rows in added.values()),
            rows_deleted=int((metrics or {}).get("num_target_rows_deleted", 0)),
        )

    def _spark_change(self, name: str, operation: str) -> Change:
        row = self.spark.sql(
            f"DESCRIBE HISTORY {delta_table_sql(self.path(name))} LIMIT 1"
        ).collect()[0]
        metrics = {k: int(v) for k, v in (row["operationMetrics"] or {}).items() if v.isdigit()}
        inserted = metrics.get("numTargetRowsInserted", metrics.get("numOutputRows", 0))
        return Change(
            table=name,
            operation=operation,
            version=int(row["version"]),
            files_read=metrics.get("numTargetFilesRemoved", 0),
            bytes_read=metrics.get("numTargetBytesRemoved", 0),
            files_written=metrics.get("numTargetFilesAdded", metrics.get("numFiles", 0)),
            bytes_written=metrics.get("numTargetBytesAdded", metrics.get("numOutputBytes", 0)),
            rows_inserted=inserted,
            rows_deleted=metrics.get("numTargetRowsDeleted", 0),
            writer="spark",
        )


def _arrow_merge_source(rows: pa.Table, delete: pa.Table, on: Sequence[str]) -> pa.Table:
    """`_merge_source` of Arrow tables."""
    schema = pa.schema([field.with_nullable(True) for field in rows.schema])
    count = delete.num_rows
    markers = pa.Table.from_arrays(
        [
            delete.column(f.name).cast(f.type) if f.name in on else pa.nulls(count, f.type)
            for f in schema
        ],
        schema=schema,
    )
    marked = [
        table.append_column(_OP, pa.array([op] * table.num_rows, pa.string()))
        for table, op in ((rows.cast(schema), "insert"), (markers, "delete"))
    ]
    return pa.concat_tables(marked)


def _merge_source(rows: DataFrame, delete: DataFrame, on: Sequence[str]) -> DataFrame:
    """`rows` marked to insert and `delete` marked to delete, in one DataFrame of `rows`'
    columns (a delete row carries its `on` columns, nulls elsewhere)."""
    types = {f.name: f.dataType for f in rows.schema.fields}
    markers = delete.select(
        *[(F.col(c) if c in on else F.lit(None)).cast(types[c]).alias(c) for c in rows.columns],
        F.lit("delete").alias(_OP),
    )
    return rows.withColumn(_OP, F.lit("insert")).unionByName(markers)


def _rewritten_whole(table: Any) -> bool:
    """Whether `replace` writes the delta-rs `table` again whole rather than MERGE into it."""
    if table.metadata().partition_columns:
        return False
    return sum(_file_sizes(table).values()) < REWRITE_BELOW_BYTES


def _delta_rs_table(path: str) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(path)


def _file_stats(table: Any) -> dict[str, tuple[int, int]]:
    """The files of a delta-rs table (as loaded) -> their size and rows (0 where the
    statistics do not give them)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    return {
        path: (size, rows or 0)
        for path, size, rows in zip(
            actions.column("path").to_pylist(),
            actions.column("size_bytes").to_pylist(),
            actions.column("num_records").to_pylist(),
            strict=True,
        )
    }


def _file_sizes(table: Any, partition: Partition | None = None) -> dict[str, int]:
    """The files of a delta-rs table (as loaded), with their sizes; with `partition`, only
    that partition's."""
    actions = pa.table(table.get_add_actions(flatten=True))
    if partition is not None:
        column, value = partition
        actions = actions.filter(pc.field(f"partition.{column}") == pa.scalar(value))
    return dict(
        zip(
            actions.column("path").to_pylist(),
            actions.column("size_bytes").to_pylist(),
            strict=True,
        )
    )


def _small_files_per_partition(table: Any) -> list[int]:
    """How many files smaller than COMPACT_TARGET_BYTES each partition of a delta-rs table
    holds (an unpartitioned table is one partition)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    small = actions.filter(pc.less(actions.column("size_bytes"), COMPACT_TARGET_BYTES))
    keys = [c for c in small.column_names if c.startswith("partition.")]
    if not keys:
        return [small.num_rows]
    counts = small.group_by(keys).aggregate([([], "count_all")])
    return list(counts.column("count_all").to_pylist())
