"""A full run's output folder: which writer commits each table, what it wrote (to put it
back if the run fails), and the tables read back for the audits and the summary."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final, cast

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from sharestate.errors import InputError
from sharestate.io.checkpoint import (
    CHECKPOINT_TABLE,
    PARTITION_COLUMNS,
    PLACEMENTS_TABLE,
    stats_columns,
)
from sharestate.io.files import local_path
from sharestate.io.store import arrow_frame, is_local, rows_on_driver
from sharestate.io.tables import (
    Written,
    keep_writes,
    read_table,
    undo_writes,
    write_delta_on_driver,
    write_table,
)
from sharestate.job.config import JobConfig
from sharestate.job.pipeline import Results
from sharestate.job.side_by_side import run_side_by_side

log = logging.getLogger("sharestate")

#: The tables of a few rows per share-partition or fewer, which a full run brings to the
#: driver to write (`OutputTables._write`): the per-record tables, and those that grow
#: with the history (ranges, segments), are written by Spark from its executors.
DRIVER_TABLES: Final = frozenset(
    {
        "share_partition_state",
        "delivery_counts",
        PLACEMENTS_TABLE,
        "pruning_cutoff",
        "share_groups",
        "share_partition_lag",
        "findings",
        "run_summary",
        CHECKPOINT_TABLE,
    }
)
#: The tables a full run writes first, one at a time, before the small ones it writes with
#: them (`_compute_and_write`).
PER_RECORD_WRITTEN_FIRST: Final = ("share_state_records", "share_partition_history")
#: How many audit tables a full run writes at once (`OutputTables.write_side_by_side`).
AUDIT_WRITERS: Final = 4


class OutputTables:
    """A full run's output folder: writes each table and logs it, remembers what it wrote
    to put it back if the run fails, and reads the per-record tables back."""

    def __init__(self, spark: SparkSession, config: JobConfig, output: str) -> None:
        self.spark, self.config, self.output = spark, config, output
        #: Path -> what this run wrote there, put back if it fails.
        self.done: dict[str, Written] = {}
        #: Table -> the Delta commit this run made.
        self.versions: dict[str, int | None] = {}
        #: The tables that came to the driver to be written (`_write`), as written.
        self.on_driver: dict[str, pa.Table] = {}
        #: Whether delta-rs commits the tables on the driver: a Delta output on the local
        #: file system that this process and Spark both see.
        self.commits_on_driver = config.output_format == "delta" and is_local(output, spark)
        #: A run that works on the driver (`sharestate.places`): its small tables all come
        #: to the driver.
        self.worked_on_driver = False

    def write(self, name: str, df: DataFrame | pa.Table) -> None:
        """Write one table and log what it wrote: the tables are computed as they are
        written, so each write is a stage of the run. (An Arrow table is written from the
        driver.)"""
        log.info("writing %s", name)
        started = time.monotonic()
        written = self._write(name, df)
        rows = f"{written.rows:,} rows" if written.rows is not None else "rows not counted"
        log.info("wrote %s: %s in %.1f s", name, rows, time.monotonic() - started)

    def _write(self, name: str, df: DataFrame | pa.Table) -> Written:
        """Write table `name`: one of DRIVER_TABLES (in a run that works on the driver, any
        but the two per-record tables) comes to the driver first if it is small (and is read
        back from there), and is committed by delta-rs where the output is a local Delta folder; any
        other through Spark. Rows already on the driver (Arrow) are written from there."""
        path = f"{self.output}/{name}"
        to_driver = name in DRIVER_TABLES or (
            self.worked_on_driver and name not in PER_RECORD_WRITTEN_FIRST
        )
        if isinstance(df, pa.Table):
            rows: pa.Table | None = df
        else:
            rows = rows_on_driver(df) if to_driver else None
        if rows is not None:
            self.on_driver[name] = rows
        if rows is not None and self.commits_on_driver:
            written = write_delta_on_driver(
                path,
                rows,
                stats_columns=stats_columns(name),
                partition_by=PARTITION_COLUMNS.get(name, ()),
            )
        else:
            # Rows on the driver make one file: coalescing them runs no work upstream.
            written = write_table(
                arrow_frame(self.spark, rows).coalesce(1)
                if rows is not None
                else cast(DataFrame, df),
                path,
                self.config.output_format,
                stats_columns=stats_columns(name),
                partition_by=PARTITION_COLUMNS.get(name, ()),
                keep_previous=True,
            )
        self.done[path] = written
        self.versions[name] = written.version
        return written

    def write_side_by_side(self, frames: Mapping[str, DataFrame | pa.Table]) -> None:
        """Write the tables of `frames`, AUDIT_WRITERS at a time: each is small (a row per
        share-partition or fewer, or a range or segment per share-partition), so its time
        is mostly Spark's fixed cost per job and Delta's per commit, which overlap."""
        steps = [lambda name=name, df=df: self.write(name, df) for name, df in frames.items()]
        run_side_by_side(steps, at_most=AUDIT_WRITERS)

    def versions_written(self) -> dict[str, int]:
        return {name: v for name, v in self.versions.items() if v is not None}

    def write_checkpoint(self, checkpoint: DataFrame | pa.Table) -> None:
        self._write(CHECKPOINT_TABLE, checkpoint)

    def arrow_of(self, name: str, columns: Sequence[str] | None = None) -> pa.Table:
        """The table this run wrote to `name` (its `columns`, or all), on the driver: as
        it came there, else read by delta-rs at the version this run committed (a local
        Delta output), else through Spark."""
        wanted = list(columns) if columns is not None else None
        if name in self.on_driver:
            rows = self.on_driver[name]
            return rows.select(wanted) if wanted is not None else rows
        version = self.versions.get(name)
        if self.commits_on_driver and version is not None:
            from deltalake import DeltaTable

            table = DeltaTable(local_path(f"{self.output}/{name}"), version=version)
            return table.to_pyarrow_table(columns=wanted)
        df = self.read_back(name)
        return (df.select(*wanted) if wanted is not None else df).toArrow()

    def read_back(self, name: str) -> DataFrame:
        """The table this run wrote to `name` (from the driver, if it came there)."""
        if name in self.on_driver:
            return arrow_frame(self.spark, self.on_driver[name])
        table = read_table(self.spark, f"{self.output}/{name}", self.config.output_format)
        if table is None:
            raise InputError(f"{self.output}/{name}: the table this run wrote cannot be read back")
        return table

    def as_written(self, results: Results) -> Results:
        """`results` with the per-record tables read back, for the run summary to count: it
        then counts what was written, and a few columns of the written tables are cheaper
        to read than the decoded rows, whole, from the disk cache (or, when nothing was
        cached, than decoding again for each count)."""
        groups = results.share_group_records
        return replace(
            results,
            share_state_records=self.read_back("share_state_records"),
            quarantine=self.read_back("quarantine"),
            share_group_records=self.read_back("share_group_records")
            if groups is not None
            else None,
        )

    def put_back(self) -> None:
        """After a failure: the tables as the run found them, so that the output is the
        earlier run's throughout, not partly this one's. (A killed run cannot do this: the
        next incremental run does it.)"""
        if not self.done:
            return
        log.warning("the run failed: putting back the %d table(s) it had written", len(self.done))
        try:
            undo_writes(self.spark, self.done, self.config.output_format)
        except Exception:  # the run's own error is the one to report
            log.exception("could not put back every table written before the failure")

    def keep(self) -> None:
        """After a run that ended well: drop the previous tables kept for `put_back`."""
        keep_writes(self.spark, self.done, self.config.output_format)
