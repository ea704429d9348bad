"""The `replay` job: compute the tables, write them in order, undo a failed run.

`main(spark, config)` is the entry point every launcher shares: `spark-submit
jobs/replay_share_state.py`, the `sharestate` console script, `python -m sharestate`.
The options are parsed in `options`, the counts at the end are `summary`'s.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sharestate.errors import InputError
from sharestate.io.checkpoint import (
    APPENDED_TABLES,
    CARRIED_TABLES,
    CHECKPOINT_TABLE,
    PreviousOutput,
    checkpoint_table,
    new_rows_predicate,
    read_prior_run,
    stats_columns,
)
from sharestate.io.files import unreadable_files_named
from sharestate.io.tables import (
    Written,
    delta_version,
    keep_writes,
    read_table,
    undo_writes,
    write_table,
)
from sharestate.job.cache import CacheScope
from sharestate.job.config import JobConfig
from sharestate.job.pipeline import (
    Results,
    WrittenTables,
    audit_replayed,
    decode_inputs,
    read_inputs,
    replay_decoded,
)
from sharestate.job.summary import format_summary, summarize, summary_table, write_summary_file
from sharestate.replay.fold import SINCE

log = logging.getLogger("sharestate")


def main(spark: SparkSession, config: JobConfig, show: int = 0) -> dict[str, Any]:
    """Run the job: read and decode the exports, write every table, print the summary.

    The checkpoint is written last: a run killed before it leaves the previous run's
    checkpoint in force, and the next incremental run redoes this one's work. A run that
    fails puts back every table it had written. A file of an input that Spark cannot read
    (corrupt, truncated, not Parquet) fails the run with an `InputError` naming the file
    and the option, whichever stage first reads it."""
    output = config.validate_for_run()
    with unreadable_files_named(config.read_paths()):
        previous = _previous_run(spark, config, output)
        tables = _OutputTables(spark, config, output, previous)
        with CacheScope() as cache:
            summary = _compute_and_write(spark, config, tables, cache)
        tables.keep()
        _report(spark, config, output, summary, previous, show)
        return summary


def _compute_and_write(
    spark: SparkSession, config: JobConfig, tables: _OutputTables, cache: CacheScope
) -> dict[str, Any]:
    """Read, decode, replay; write the per-record tables and the state; audit; write the
    audit tables; count the summary; write the checkpoint. If a step fails, the tables
    written so far are put back."""
    previous = tables.previous
    incremental = previous is not None
    # A full run's audits read the per-record tables as written: a few columns of a written
    # table cost less than folding or decoding again, or than caching the fold's output or
    # the decode. An incremental run's new rows are few and are cached instead: they lie
    # scattered over the written tables, and finding them there is slow.
    log.info("reading and decoding %s", config.share_state)
    inputs = read_inputs(spark, config, previous, cache)
    decoded = decode_inputs(
        inputs, config, cache, only_new_rows=incremental, read_back=not incremental
    )
    replayed = replay_decoded(inputs, decoded, config, previous, cache, keep_history=incremental)
    try:
        first = replayed.tables()
        for name, df in first.items():
            tables.write(name, df)
        written = None if incremental else tables.written_tables()
        log.info("auditing the replayed state")
        results = audit_replayed(replayed, config, previous, written)
        for name, df in results.tables().items():
            if name not in first:
                tables.write(name, df)
        log.info("counting the run summary")
        summary = summarize(tables.as_written(results))
        checkpoint = _checkpoint(spark, config, results, tables)
        if config.as_of is None:  # a replay "as of" the past is not a point to go on from
            tables.write_checkpoint(checkpoint)
    except BaseException:
        tables.put_back()
        raise
    return summary


def _previous_run(spark: SparkSession, config: JobConfig, output: str) -> PreviousOutput | None:
    """For --mode incremental: the last complete run's checkpoint and tables, if any."""
    if config.mode != "incremental":
        return None
    previous = _previous_output(spark, output)
    if previous is None:
        log.info("no complete earlier run under %s: replaying everything", output)
    return previous


def _previous_output(spark: SparkSession, output: str) -> PreviousOutput | None:
    prior = read_prior_run(read_table(spark, f"{output}/{CHECKPOINT_TABLE}", "delta"))
    if prior is None or prior.state_version is None:
        return None
    tables: dict[str, DataFrame] = {}
    for name in (*APPENDED_TABLES, "share_partition_state"):
        version = prior.state_version if name == "share_partition_state" else None
        table = read_table(spark, f"{output}/{name}", "delta", version)
        if table is not None:
            tables[name] = table
    # Carried audit tables only at the versions the checkpointed run wrote: a later run
    # that was killed may have written newer ones.
    for name, version in prior.carried.get("versions", {}).items():
        table = read_table(spark, f"{output}/{name}", "delta", int(version))
        if table is not None:
            tables[name] = table
    if "share_partition_state" not in tables:
        return None
    if SINCE not in tables["share_partition_state"].columns:
        log.info("the state under %s predates %s: replaying everything", output, SINCE)
        return None
    return PreviousOutput(prior, tables)


class _OutputTables:
    """The run's output folder: writes each table (of an appended table, this run's rows)
    and logs it, remembers what it wrote to put it back if the run fails, and reads this
    run's rows back."""

    def __init__(
        self,
        spark: SparkSession,
        config: JobConfig,
        output: str,
        previous: PreviousOutput | None,
    ) -> None:
        self.spark, self.config, self.output, self.previous = spark, config, output, previous
        #: Path -> what this run wrote there, put back if it fails.
        self.done: dict[str, Written] = {}
        #: Table -> the Delta commit this run made.
        self.versions: dict[str, int | None] = {}

    def write(self, name: str, df: DataFrame) -> None:
        """Write one table and log what it wrote: the tables are computed as they are
        written, so each write is a stage of the run."""
        log.info("writing %s", name)
        started = time.monotonic()
        path = f"{self.output}/{name}"
        where, append = None, False
        if self.previous is not None and name in APPENDED_TABLES:
            append = self._untouched_since_checkpoint(self.previous, name)
            if not append:
                where = new_rows_predicate(self.previous.prior, APPENDED_TABLES[name])
        written = write_table(
            df,
            path,
            self.config.output_format,
            replace_where=where,
            append=append,
            stats_columns=stats_columns(name),
            keep_previous=True,
        )
        self.done[path] = written
        self.versions[name] = written.version
        rows = f"{written.rows:,} rows" if written.rows is not None else "rows not counted"
        how = " (appended)" if append or where is not None else ""
        log.info("wrote %s: %s%s in %.1f s", name, rows, how, time.monotonic() - started)

    def write_checkpoint(self, checkpoint: DataFrame) -> None:
        path = f"{self.output}/{CHECKPOINT_TABLE}"
        self.done[path] = write_table(
            checkpoint, path, self.config.output_format, keep_previous=True
        )

    def _untouched_since_checkpoint(self, previous: PreviousOutput, name: str) -> bool:
        """Whether the appended table `name` is as the checkpointed run left it (no later,
        unfinished run wrote to it): then new rows are appended as they are, without the
        `replaceWhere`, which would scan the whole table for rows above the checkpoint."""
        recorded = previous.prior.carried.get("appended_versions", {}).get(name)
        return (
            recorded is not None
            and name in previous.tables
            and delta_version(self.spark, f"{self.output}/{name}") == int(recorded)
        )

    def read_back(self, name: str) -> DataFrame:
        """The table this run wrote to `name` (of an appended table, this run's rows)."""
        table = read_table(self.spark, f"{self.output}/{name}", self.config.output_format)
        if table is None:
            raise InputError(f"{self.output}/{name}: the table this run wrote cannot be read back")
        if self.previous is not None and name in APPENDED_TABLES:
            table = table.filter(new_rows_predicate(self.previous.prior, APPENDED_TABLES[name]))
        return table

    def written_tables(self) -> WrittenTables:
        """The per-record tables as written, for the audits of a full run."""
        return WrittenTables(
            share_partition_history=self.read_back("share_partition_history"),
            share_state_records=self.read_back("share_state_records"),
            quarantine=self.read_back("quarantine"),
        )

    def as_written(self, results: Results) -> Results:
        """`results` with the per-record tables read back (this run's rows of them), for the
        run summary to count: it then counts what was written, and a few columns of the
        written tables are cheaper to read than the decoded rows, whole, from the disk
        cache (or, when nothing was cached, than decoding again for each count)."""
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
        earlier run's throughout, not partly this one's. (A killed run cannot do this; see
        README.)"""
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


def _checkpoint(
    spark: SparkSession, config: JobConfig, results: Results, tables: _OutputTables
) -> DataFrame:
    """The new `_checkpoint`: the offsets this run reached, the state's version, and (Delta)
    the versions of the tables the next incremental run goes on from."""
    previous = tables.previous
    versions = tables.versions
    read = {source: export.rows for source, export in results.inputs.items()}
    carried = None
    if config.output_format == "delta":
        carried = {
            "versions": {name: versions[name] for name in CARRIED_TABLES},
            "appended_versions": {
                name: versions[name] for name in APPENDED_TABLES if name in versions
            },
            "delivery_count_limit": config.delivery_count_limit,
        }
    return checkpoint_table(
        spark,
        previous.prior if previous else None,
        read,
        versions["share_partition_state"],
        carried,
    )


def _report(
    spark: SparkSession,
    config: JobConfig,
    output: str,
    summary: dict[str, Any],
    previous: PreviousOutput | None,
    show: int,
) -> None:
    """The run summary: completed, written as a table and a file, printed; and `show` rows
    of the state."""
    summary["mode"] = "incremental" if previous is not None else "full"
    summary["run_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_table(summary_table(spark, summary), f"{output}/run_summary", config.output_format)
    write_summary_file(output, summary)
    print(format_summary(summary))
    if show:
        shown = spark.read.format(config.output_format).load(f"{output}/share_partition_state")
        shown.select(
            "group_id",
            "topic_id",
            "partition",
            "deleted",
            "start_offset",
            "effective_start_offset",
            "leader_epoch",
            "state_batches",
        ).orderBy("group_id", "topic_id", "partition").show(show, truncate=80)
