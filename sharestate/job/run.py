"""The `replay` job: compute the tables, write them in order, undo a failed run.

`main(spark, config)` is the entry point every launcher shares: `spark-submit
jobs/replay_share_state.py`, the `sharestate` console script, `python -m sharestate`. It
holds the output folder's lock for the whole run (`sharestate.io.lock`: one run at a time).
A full run computes everything from the exports (`sharestate.job.pipeline`); an incremental
one goes on from the last complete run's checkpoint (`sharestate.job.incremental`), or runs
as a full run when there is none to go on from. Options are parsed in `options`, the counts
at the end are `summary`'s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from sharestate.audits.findings.records import (
    exported_positions as exported_positions_arrow,
)
from sharestate.io import streams as streams_io
from sharestate.io.changes import ExportFiles
from sharestate.io.checkpoint import (
    CHECKPOINT_TABLE,
    Checkpoint,
    Extent,
    checkpoint_table,
    read_checkpoint,
)
from sharestate.io.files import unreadable_files_named
from sharestate.io.lock import output_lock
from sharestate.io.store import TableStore
from sharestate.io.streams import Streams
from sharestate.io.tables import (
    parquet_timestamps_as_int64_micros,
)
from sharestate.job.audit_written import audit_written
from sharestate.job.cache import CacheScope
from sharestate.job.config import JobConfig
from sharestate.job.extents import arrow_extents, full_run_extents
from sharestate.job.increment import Increment
from sharestate.job.incremental import (
    IncrementalRun,
    NothingArrived,
    export_listings,
    run_incremental,
    run_options,
    why_not_incremental,
)
from sharestate.job.new_rows import FullRunNeeded, NewInputs, stream_inputs
from sharestate.job.output_tables import PER_RECORD_WRITTEN_FIRST, OutputTables
from sharestate.job.pipeline import (
    decode_inputs,
    read_inputs,
    replay_decoded,
    rows_read,
)
from sharestate.job.preflight import check_before_work
from sharestate.job.session import job_settings
from sharestate.job.side_by_side import run_side_by_side
from sharestate.job.summary import (
    engine_summary,
    format_summary,
    running_totals,
    summarize,
    summary_table,
    write_summary_file,
)
from sharestate.job.summary_incremental import NewRowCounts, count_new_rows, incremental_summary
from sharestate.jvm import EngineInUse, engine_in_use
from sharestate.places import place_for

log = logging.getLogger("sharestate")


def main(spark: SparkSession, config: JobConfig, show: int = 0) -> dict[str, Any]:
    """Run the job: read and decode the exports, write every table, print the summary.

    The checkpoint is written last: a run killed before it leaves the previous run's
    checkpoint in force, and the next incremental run puts back what the killed one wrote.
    A run that fails puts back every table it had written. A file of an input that Spark
    cannot read (corrupt, truncated, not Parquet) fails the run with an `InputError` naming
    the file and the option, whichever stage first reads it. Another run writing to the
    same output stops this one at once (`OutputLockedError`). Misuse is refused before any
    work, in one line: `--output` a file, not writable, an input, inside one or around one
    (`JobConfig.validate_for_run`); executors whose Python lacks what the job needs, a
    kafka:// input whose broker does not answer (`preflight`, once the run knows it has
    work to do)."""
    output = config.validate_for_run(spark)
    # An incremental run commits through Spark's Delta writer too (outside the local file
    # system): its Parquet timestamps are INT64 UTC as write_table's are.
    with (
        job_settings(spark),
        output_lock(output, spark),
        unreadable_files_named(config.read_paths()),
        parquet_timestamps_as_int64_micros(spark),
    ):
        if config.mode == "incremental":
            checkpoint = read_checkpoint(spark, output)
            reason = why_not_incremental(config, checkpoint)
            if reason is None:
                assert checkpoint is not None
                try:
                    return _incremental(spark, config, output, checkpoint, show)
                except FullRunNeeded as needed:
                    reason = needed.reason
            log.info("running as a full run: %s", reason)
            return _full(spark, config, output, show, because=reason)
        return _full(spark, config, output, show)


# --- full runs ---------------------------------------------------------------------------------


def _full(
    spark: SparkSession, config: JobConfig, output: str, show: int, because: str | None = None
) -> dict[str, Any]:
    """A full run; `because`: why a run asked to be incremental is not (in its summary)."""
    engine = _start_work(spark, config, engine_in_use(spark))
    # Listed, and the streams started, before anything is read: what arrives during the run
    # is read by the next (and what both read, applied once).
    listings = export_listings(config, spark)
    streams = _start_streams(spark, config, output)
    tables = OutputTables(spark, config, output)
    try:
        with CacheScope() as cache:
            summary = _compute_and_write(
                spark, config, tables, cache, listings, engine, because, streams
            )
    except BaseException:
        if streams is not None:  # no checkpoint names it
            streams_io.discard(spark, streams)
        raise
    tables.keep()
    if streams is not None:
        streams_io.tidy(spark, streams)
    _report(config, output, summary, show, spark)
    return summary


def _compute_and_write(
    spark: SparkSession,
    config: JobConfig,
    tables: OutputTables,
    cache: CacheScope,
    listings: dict[str, ExportFiles],
    engine: EngineInUse,
    because: str | None = None,
    streams: Streams | None = None,
) -> dict[str, Any]:
    """Read, decode, replay; write the per-record tables and the state; audit; write the
    audit tables; count the summary; write the checkpoint. If a step fails, the tables
    written so far are put back."""
    # The audits read the per-record tables as written: a few columns of a written table
    # cost less than folding or decoding again, or than caching the fold's output or the
    # decode.
    log.info("reading and decoding %s", config.share_state)
    inputs = read_inputs(spark, config)
    read = rows_read(inputs.exports())
    place = place_for(read)
    log.info(
        "working on the %s: %s rows read", place, f"{read:,}" if read is not None else "uncounted"
    )
    tables.worked_on_driver = place == "driver"
    decoded = decode_inputs(inputs, config, cache, read_back=True)
    replayed = replay_decoded(inputs, decoded, config, cache, keep_history=False)
    try:
        first = replayed.tables()
        # The two tables of a row per record, one after the other (each keeps the cores
        # busy; the history's pass hands the state over); the small ones side by side.
        for name in PER_RECORD_WRITTEN_FIRST:
            tables.write(name, first[name])
        tables.write_side_by_side(
            {name: df for name, df in first.items() if name not in PER_RECORD_WRITTEN_FIRST}
        )
        log.info("auditing the replayed state")
        audited = audit_written(replayed, config, tables, place)
        tables.write_side_by_side(audited.tables())
        log.info("counting the run summary")
        summary = summarize(
            tables.as_written(replayed), audited.counted_on_driver(tables.on_driver)
        )
        summary["mode"] = "full"
        if because is not None:
            summary["full_run_because"] = because
        summary["engine"] = engine_summary(engine)
        summary["worked_on"] = place
        summary["delivery_count_limit"] = config.delivery_count_limit
        summary["run_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        tables.write("run_summary", summary_table(summary))
        if config.as_of is None:  # a replay "as of" the past is not a point to go on from
            totals = running_totals(summary, audited.audits.quarantine_kinds, audited.group_records)
            checkpoint = Checkpoint(
                extents=full_run_extents(audited.audits),
                table_versions=tables.versions_written(),
                exports=listings,
                options=run_options(config),
                totals=totals,
                streams=streams,
            )
            tables.write_checkpoint(checkpoint_table(checkpoint))
    except BaseException:
        tables.put_back()
        raise
    return summary


def _start_streams(spark: SparkSession, config: JobConfig, output: str) -> Streams | None:
    """The inputs' streams, started for the incremental runs that go on from this one (a
    run of Delta tables that keeps a checkpoint); None for any other."""
    if config.as_of is not None or config.output_format != "delta":
        return None
    inputs = stream_inputs(config, spark)
    return streams_io.start(spark, output, inputs, together=run_side_by_side)


def _start_work(spark: SparkSession, config: JobConfig, engine: EngineInUse) -> EngineInUse:
    """What a run that will read and write says and checks first: which engine runs, the
    executors' Python, the brokers of kafka:// inputs (`preflight`)."""
    log.info("engine: %s", engine.detail)
    check_before_work(spark, config)
    return engine


# --- incremental runs --------------------------------------------------------------------------


def _incremental(
    spark: SparkSession, config: JobConfig, output: str, checkpoint: Checkpoint, show: int
) -> dict[str, Any]:
    store = TableStore(spark, output)
    written: list[str] = []
    engine = engine_in_use(spark)
    try:
        run = run_incremental(
            config,
            store,
            checkpoint,
            written,
            beside=lambda new, increment: _count_new_rows(new, increment, checkpoint),
            before_work=lambda: _start_work(spark, config, engine),
        )
        if run is None:
            return _nothing_new(config, checkpoint)
        if isinstance(run, NothingArrived):
            _keep_listings(spark, store, checkpoint, run, written)
            summary = None
        else:
            summary, totals, extents = _incremental_summary(run, checkpoint)
            summary["engine"] = engine_summary(engine)
            summary["worked_on"] = "driver"
            summary["delivery_count_limit"] = config.delivery_count_limit
            _finish_incremental(
                spark, config, store, checkpoint, run, summary, totals, extents, written
            )
    except BaseException:
        _put_back(store, checkpoint, written)
        raise
    streams_io.tidy(spark, run.streams)
    if summary is None:
        return _nothing_new(config, checkpoint)
    _report(config, output, summary, show, spark)
    return summary


def _nothing_new(config: JobConfig, checkpoint: Checkpoint) -> dict[str, Any]:
    when = str(checkpoint.written_at or "the last run")
    message = f"nothing new in the exports since {when}: no table written"
    log.info(message)
    print(f"sharestate: {message}")
    return {"mode": "incremental", "nothing_new": True, "checkpoint_written_at": when}


@dataclass(frozen=True)
class _CountedBeside:
    """What an incremental run counts beside its table steps: the summary's counts of the
    new rows and the state, the exported extents after the run, the latest group record."""

    summary: NewRowCounts
    extents: dict[str, dict[int, Extent]]
    latest_group_record: str | None


def _count_new_rows(new: NewInputs, increment: Increment, checkpoint: Checkpoint) -> _CountedBeside:
    """The counts that need only the new rows and the state after the replay (on the
    driver, where both are)."""
    rows = increment.rows
    decoded = {
        source: (records, _of_source(rows.quarantine, source))
        for source, records in (
            ("share_state", rows.records),
            ("consumer_offsets", rows.group_records),
        )
        if records is not None
    }
    summary = count_new_rows(
        arrivals=dict(new.arrivals()),
        decoded=decoded,
        state=increment.state,
        previous=dict(checkpoint.totals),
    )
    latest_group_record = _latest_group_record(
        checkpoint.totals.get("consumer_offsets_end"), rows.group_records
    )
    return _CountedBeside(summary, _extents_after(increment, checkpoint), latest_group_record)


def _of_source(quarantine: pa.Table, source: str) -> pa.Table:
    return quarantine.filter(pc.equal(quarantine.column("source"), source))


def _incremental_summary(
    run: IncrementalRun[_CountedBeside], checkpoint: Checkpoint
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[int, Extent]]]:
    """The run's summary, the new running totals and the new exported extents."""
    increment, audits, counted = run.increment, run.audits, run.beside
    summary, totals = incremental_summary(
        new_rows=counted.summary,
        quarantine_kinds=audits.quarantine_kinds,
        range_changes=increment.range_totals,
        findings=audits.findings,
        pruning_cutoff=audits.pruning_cutoff,
        share_groups=audits.share_groups,
        share_partition_lag=audits.share_partition_lag,
        previous=dict(checkpoint.totals),
    )
    totals["consumer_offsets_end"] = counted.latest_group_record
    summary["changes"] = [
        {
            "table": c.table,
            "operation": c.operation,
            "files_read": c.files_read,
            "bytes_read": c.bytes_read,
            "files_written": c.files_written,
            "bytes_written": c.bytes_written,
            "rows_inserted": c.rows_inserted,
            "rows_deleted": c.rows_deleted,
            "writer": c.writer,
        }
        # By table: steps run side by side commit in no fixed order.
        for c in sorted(increment.changes, key=lambda c: (c.table, c.version or 0))
    ]
    return summary, totals, counted.extents


def _extents_after(increment: Increment, checkpoint: Checkpoint) -> dict[str, dict[int, Extent]]:
    """The exported extents of each input: the checkpoint's widened by this run's rows."""
    extents = {source: dict(parts) for source, parts in checkpoint.extents.items()}
    found = {"share_state": arrow_extents(increment.share_state_positions)}
    rows = increment.rows
    if rows.group_records is not None:
        found["consumer_offsets"] = arrow_extents(
            exported_positions_arrow(rows.group_records, rows.quarantine, "consumer_offsets")
        )
    for source, parts in found.items():
        for partition, extent in parts.items():
            before = extents.setdefault(source, {}).get(partition)
            extents[source][partition] = extent if before is None else before.widened(extent)
    return extents


def _latest_group_record(stored: str | None, group_records: pa.Table | None) -> str | None:
    if group_records is None:
        return stored
    end = pc.max(group_records.column("source_timestamp")).as_py()
    # As Spark hands a timestamp to Python: the process's local time, without a zone.
    end = end.astimezone().replace(tzinfo=None) if end is not None else None
    new = end.isoformat() if end is not None else None
    if stored is None or new is None:
        return stored or new
    latest: str = max(stored, new, key=datetime.fromisoformat)
    return latest


def _finish_incremental(
    spark: SparkSession,
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    run: IncrementalRun[_CountedBeside],
    summary: dict[str, Any],
    totals: dict[str, Any],
    extents: dict[str, dict[int, Extent]],
    written: list[str],
) -> None:
    """The run summary and the new checkpoint, last."""
    summary["mode"] = "incremental"
    summary["run_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    written.append("run_summary")
    store.overwrite_arrow("run_summary", summary_table(summary))
    versions = dict(checkpoint.table_versions)
    for name in written:
        version = store.version(name)
        if version is not None:
            versions[name] = version
    written.append(CHECKPOINT_TABLE)
    new_checkpoint = Checkpoint(
        extents=extents,
        table_versions=versions,
        exports=run.listings,
        options=run_options(config),
        totals=totals,
        streams=run.streams,
    )
    store.overwrite_arrow(CHECKPOINT_TABLE, checkpoint_table(new_checkpoint))


def _keep_listings(
    spark: SparkSession,
    store: TableStore,
    checkpoint: Checkpoint,
    nothing: NothingArrived,
    written: list[str],
) -> None:
    """The checkpoint again with the exports' new listings and streams (nothing arrived):
    the next run can tell "nothing new" before it starts Spark."""
    versions = dict(checkpoint.table_versions)
    written.append(CHECKPOINT_TABLE)
    kept = replace(checkpoint, exports=nothing.listings, streams=nothing.streams, written_at=None)
    store.overwrite_arrow(
        CHECKPOINT_TABLE, checkpoint_table(replace(kept, table_versions=versions))
    )


def _put_back(store: TableStore, checkpoint: Checkpoint, written: list[str]) -> None:
    """After a failed incremental run: every table it changed, back at the checkpoint's
    version."""
    if not written:
        return
    log.warning("the run failed: putting back the %d table(s) it had written", len(written))
    for name in reversed(written):
        version = checkpoint.table_versions.get(name)
        try:
            if version is not None and store.version(name) != version:
                store.restore(name, version)
        except Exception:  # the run's own error is the one to report
            log.exception("could not put back %s", name)


# --- the end of a run --------------------------------------------------------------------------


def _report(
    config: JobConfig, output: str, summary: dict[str, Any], show: int, spark: SparkSession
) -> None:
    """The run summary as a file, printed; and `show` rows of the state."""
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
