"""The job's tables: writing them (Delta or Parquet), putting them back after a failed run,
and reading them again (an incremental run reads the earlier run's)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlparse

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sharestate.backend import backend, is_connect
from sharestate.errors import InputError, SparkSetupError
from sharestate.io.files import (
    DELTA_MISSING,
    FileSystem,
    file_system,
    is_missing_source,
    local_path,
    session_settings,
)

#: Spark writes Parquet timestamps as legacy INT96 by default, which pandas and DuckDB read
#: without a time zone; INT64 microseconds adjusted to UTC read as timestamp[us, UTC], as the
#: files delta-rs writes do.
PARQUET_TIMESTAMPS: Final = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")


@contextmanager
def parquet_timestamps_as_int64_micros(spark: SparkSession) -> Iterator[None]:
    """Spark's Parquet writes (Parquet tables and Delta's data files) with timestamps as
    INT64 microseconds adjusted to UTC; the session's own setting is back afterwards (a
    notebook's session is the caller's)."""
    key, value = PARQUET_TIMESTAMPS
    with session_settings(spark, {key: value}):
        yield


@dataclass(frozen=True)
class Written:
    """What one `write_table` call wrote."""

    rows: int | None  # rows written (None: Delta kept no metrics for the commit)
    version: int | None  # the Delta commit it made; None for Parquet


def write_table(
    df: DataFrame,
    path: str,
    output_format: str,
    *,
    replace_where: str | None = None,
    append: bool = False,
    stats_columns: Sequence[str] | None = None,
    partition_by: Sequence[str] = (),
    keep_previous: bool = False,
) -> Written:
    """Replace the table at `path` (or, with `replace_where`, the Delta rows matching it; or,
    with `append`, add the rows to the Delta table), and say how many rows it wrote.

    Readers never see a half-written table: a Delta write is one atomic commit (and the
    previous version stays readable by time travel); Parquet is written beside the table
    and swapped in by two renames. `keep_previous`: the previous Parquet table stays beside
    the new one until `keep_writes` drops it or `undo_writes` puts it back.

    `stats_columns`: a Delta table this write creates keeps file statistics on these
    columns only (`delta.dataSkippingStatsColumns`); Delta applies table properties given
    to a writer only when it creates the table, so an existing table keeps its own.
    `partition_by`: the table's partition columns (a Delta table replaced whole takes them).
    Timestamps are written as INT64 microseconds adjusted to UTC, in either format."""
    if append and replace_where is not None:
        raise ValueError("append and replace_where exclude each other")
    with parquet_timestamps_as_int64_micros(df.sparkSession):
        return _write_table(
            without_collations(df),
            path,
            output_format,
            replace_where,
            append,
            stats_columns,
            partition_by,
            keep_previous,
        )


def _write_table(
    df: DataFrame,
    path: str,
    output_format: str,
    replace_where: str | None,
    append: bool,
    stats_columns: Sequence[str] | None,
    partition_by: Sequence[str],
    keep_previous: bool,
) -> Written:
    if output_format == "delta":
        writer = df.write.format("delta").mode("append" if append else "overwrite")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        if stats_columns:
            writer = writer.option("delta.dataSkippingStatsColumns", ",".join(stats_columns))
        if replace_where is not None:
            writer = writer.option("replaceWhere", replace_where)
        elif not append:
            writer = writer.option("overwriteSchema", "true")
        try:
            writer.save(path)
        except Exception as err:
            if is_missing_source(err, "delta"):
                raise SparkSetupError(f"--output-format delta: {DELTA_MISSING}") from None
            raise
        # The commit's own metrics: counting the DataFrame would compute it a second time.
        version, metrics = _last_commit(df.sparkSession, path)
        rows = metrics.get("numOutputRows")
        return Written(int(rows) if rows is not None else None, version)
    if replace_where is not None or append:
        raise ValueError("replace_where and append need a Delta table")
    _write_parquet_swapped(df, path, keep_previous)
    # Counting a Parquet table reads its files' footers only.
    return Written(df.sparkSession.read.parquet(path).count(), None)


def write_delta_on_driver(
    path: str,
    rows: pa.Table,
    *,
    stats_columns: Sequence[str] | None = None,
    partition_by: Sequence[str] = (),
) -> Written:
    """Replace the local Delta table at `path` with `rows`, from the driver by delta-rs: one
    commit, and no Spark job (Spark's writer runs several for the smallest table: the
    table's snapshot, the write, Delta's post-commit work, the commit's metrics). Every
    column is nullable in the table's schema, as Spark's Delta writer makes them, so the
    table reads the same whichever writer wrote it. `stats_columns` and `partition_by` as
    `write_table`'s."""
    from deltalake import DeltaTable, write_deltalake

    local = os.path.abspath(local_path(path))
    configuration = (
        {"delta.dataSkippingStatsColumns": ",".join(stats_columns)} if stats_columns else None
    )
    write_deltalake(
        local,
        _nullable(rows),
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=list(partition_by) or None,
        configuration=configuration,
    )
    return Written(rows.num_rows, int(DeltaTable(local).version()))


def _nullable(rows: pa.Table) -> pa.Table:
    schema = pa.schema([_nullable_field(field) for field in rows.schema])
    return rows if schema == rows.schema else rows.cast(schema)


def _nullable_field(field: pa.Field) -> pa.Field:
    kind = field.type
    if pa.types.is_struct(kind):
        kind = pa.struct([_nullable_field(kind.field(i)) for i in range(kind.num_fields)])
    elif pa.types.is_map(kind):  # a map's keys are never null
        kind = pa.map_(kind.key_field, _nullable_field(kind.item_field))
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = _nullable_field(kind.value_field)
        kind = pa.list_(item) if pa.types.is_list(kind) else pa.large_list(item)
    return field.with_type(kind).with_nullable(True)


def _previous_copy(path: str) -> str:
    """Where a Parquet table's previous version waits until the run that replaced it ends."""
    return path.rstrip("/") + ".sharestate-old"


def _reachable(spark: SparkSession, path: str) -> FileSystem:
    files = file_system(spark, path)
    if files is None:  # refused before any work (JobConfig.validate_for_run)
        raise InputError(f"{path}: this session cannot reach the file system there")
    return files


def _write_parquet_swapped(df: DataFrame, path: str, keep_previous: bool) -> None:
    files = _reachable(df.sparkSession, path)
    staged = path.rstrip("/") + ".sharestate-new"
    retired = _previous_copy(path)
    files.delete(staged)
    df.write.mode("overwrite").parquet(staged)
    files.delete(retired)
    if files.exists(path) and not files.rename(path, retired):
        raise InputError(f"{path}: cannot move the previous table aside")
    if not files.rename(staged, path):
        files.rename(retired, path)
        raise InputError(f"{path}: cannot move the new table into place")
    if not keep_previous:
        files.delete(retired)


def keep_writes(spark: SparkSession, written: Mapping[str, Written], output_format: str) -> None:
    """A run that replaced the tables at `written`'s paths (`keep_previous`) has ended well:
    drop the previous Parquet tables kept for `undo_writes` (Delta keeps its versions)."""
    if output_format != "parquet":
        return
    for path in written:
        _reachable(spark, path).delete(_previous_copy(path))


def undo_writes(spark: SparkSession, written: Mapping[str, Written], output_format: str) -> None:
    """Put back the tables a failed run replaced (path -> what it wrote there): a Delta table
    is restored to the version before the run's commit (a new commit, so the run's own stays
    in the history), a Parquet table gets its previous files back; a table the run created
    is removed (where no file system is reachable, a Delta table the run created is emptied
    instead, by a commit of no rows)."""
    for path, wrote in reversed(list(written.items())):
        files = file_system(spark, path)
        if output_format == "delta":
            if wrote.version is None:
                continue
            if wrote.version == 0:
                if files is not None:
                    files.delete(path)
                else:
                    _empty_delta_table(spark, path)
                continue
            table = delta_table_sql(path)
            spark.sql(f"RESTORE TABLE {table} TO VERSION AS OF {wrote.version - 1}")
            continue
        files = _reachable(spark, path)
        previous = _previous_copy(path)
        files.delete(path)
        if files.exists(previous):
            files.rename(previous, path)


def _empty_delta_table(spark: SparkSession, path: str) -> None:
    """Replace every row of the Delta table at `path` with none (one commit)."""
    spark.sql(f"DELETE FROM {delta_table_sql(path)}")


def without_collations(df: DataFrame) -> DataFrame:
    """`df` with its string columns (nested ones too) of Spark's plain string type.

    A Spark Connect client sends every string type with its collation named (UTF8_BINARY),
    and the server (Spark 4.2, Delta 4.4) then writes `string collate UTF8_BINARY` into a
    Delta table's schema, which readers without collation support (delta-rs, polars,
    DuckDB) refuse; a cast that the server parses from SQL gives the plain type. Classic
    sessions have the plain type already."""
    if not is_connect(df.sparkSession):
        return df
    fields = df.schema.fields
    if not any(_holds_strings(field.dataType) for field in fields):
        return df
    return df.select(
        *[
            F.expr(f"CAST(`{field.name}` AS {field.dataType.simpleString()})").alias(field.name)
            if _holds_strings(field.dataType)
            else F.col(f"`{field.name}`")
            for field in fields
        ]
    )


def _holds_strings(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.StringType):
        return True
    if isinstance(data_type, T.ArrayType):
        return _holds_strings(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _holds_strings(data_type.keyType) or _holds_strings(data_type.valueType)
    if isinstance(data_type, T.StructType):
        return any(_holds_strings(field.dataType) for field in data_type.fields)
    return False


def read_table(
    spark: SparkSession, path: str, output_format: str, version: int | None = None
) -> DataFrame | None:
    """A table the job wrote earlier (a Delta `version` of it), or None if there is none."""
    reader = spark.read.format(output_format)
    if version is not None:
        reader = reader.option("versionAsOf", version)
    try:
        table = reader.load(path)
        table.schema  # noqa: B018 - resolved now: Spark Connect analyses lazily
        return table
    except AnalysisException as err:
        if (
            "PATH_NOT_FOUND" in str(err)
            or "DELTA_TABLE_NOT_FOUND" in str(err)
            or ("is not a Delta table" in str(err))
        ):
            return None
        raise


def delta_version(spark: SparkSession, path: str) -> int:
    """The latest commit version of the Delta table at `path`."""
    return _last_commit(spark, path)[0]


def delta_table_sql(path: str) -> str:
    """The Delta table at `path` as SQL names it (delta.`path` wants an absolute path)."""
    return f"delta.`{os.path.abspath(path) if urlparse(path).scheme == '' else path}`"


def _last_commit(spark: SparkSession, path: str) -> tuple[int, dict[str, str]]:
    """The latest commit of the Delta table at `path`: its version and operation metrics.
    A table this process sees on its own file system is read by delta-rs (its log's last
    entry, no Spark job); any other through Spark (`DESCRIBE HISTORY`)."""
    if backend(spark).is_local(path):
        from deltalake import DeltaTable

        (entry,) = DeltaTable(os.path.abspath(local_path(path))).history(1)
        return int(entry["version"]), dict(entry.get("operationMetrics") or {})
    row = spark.sql(f"DESCRIBE HISTORY {delta_table_sql(path)} LIMIT 1").collect()[0]
    return int(row["version"]), dict(row["operationMetrics"] or {})
