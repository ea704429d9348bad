"""`--mode incremental`: a run that costs what is new.

A scheduled run over an export that only grows reads the checkpoint of the last complete
run (`sharestate.io.checkpoint`), lists the exports, and reads only the files it has not
seen (`sharestate.job.arrivals`). With nothing new it writes nothing and says so, and it can
tell before Spark starts (`nothing_new`, which the command line asks first). Otherwise it
brings the new rows to the driver (`sharestate.job.driver_increment`; more than
LARGE_INCREMENT_ROWS of them make it a full run), decodes them, replays the share-partitions
they touch from their stored state, and brings every table up to date from the new records
and the stored rows of what they touch, all in Arrow (`sharestate.job.increment`,
`sharestate.job.increment_audits`): the tables end as a full run over everything would
leave them.

Each table's rule, and why it equals the full computation: docs/incremental.md. A run that
finds the output's tables newer than the checkpoint (a killed run's commits) first puts
them back to the checkpoint's versions; a run that fails puts back what it wrote.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic

import pyarrow as pa
from pyspark.sql import SparkSession

from sharestate.audits.findings.registry import Source
from sharestate.io.changes import ExportFiles, list_export, new_files, rows_above
from sharestate.io.checkpoint import CHECKPOINT_TABLE, Checkpoint
from sharestate.io.store import TableStore, is_local
from sharestate.io.streams import Streams
from sharestate.job.config import JobConfig
from sharestate.job.driver_increment import delivered_tables, read_on_driver, replay_new_rows
from sharestate.job.increment import (
    Beside,
    Increment,
    compact_written,
    write_history,
    write_ranges,
    write_segments,
    write_state,
)
from sharestate.job.increment_audits import (
    AuditTables,
    per_share_partition_rows,
    prepare_audits,
    write_audits,
)
from sharestate.job.new_rows import Delivered, FullRunNeeded, NewInputs, arrive, input_format
from sharestate.job.side_by_side import run_side_by_side
from sharestate.kafka.records import parse_kafka_version
from sharestate.replay.combiner import LATEST

log = logging.getLogger("sharestate")

SHARE_STATE: Final = Source.SHARE_STATE.value
CONSUMER_OFFSETS: Final = Source.CONSUMER_OFFSETS.value
END_OFFSETS: Final = "end_offsets"


def run_options(config: JobConfig) -> dict[str, Any]:
    """The options the stored tables depend on: an incremental run goes on from a
    checkpoint only when they are the same (else it runs as a full run, and says why).
    The others change nothing stored: --stall-span and --state-topic-partitions change
    findings only, which every incremental run computes again, and an export's path may
    change (rows the checkpoint covers are recognised wherever they are read from)."""
    return {
        "kafka_version": config.kafka_version,
        "delivery_count_limit": config.delivery_count_limit,
        "consumer_offsets": config.consumer_offsets is not None,
        "end_offsets": config.end_offsets is not None,
    }


def why_not_incremental(config: JobConfig, checkpoint: Checkpoint | None) -> str | None:
    """Why this run cannot go on from `checkpoint` (None: it can)."""
    if checkpoint is None:
        return "there is no complete earlier run to go on from"
    changed = sorted(
        name for name, value in run_options(config).items() if checkpoint.options.get(name) != value
    )
    if changed:
        return "these options differ from the last complete run's: " + ", ".join(changed)
    return None


def export_listings(config: JobConfig, spark: SparkSession | None = None) -> dict[str, ExportFiles]:
    """What each export (and the --end-offsets table) holds now. Without `spark` only local
    ones can be listed; the others come out untracked (so: maybe changed)."""
    paths = {SHARE_STATE: config.share_state}
    if config.consumer_offsets:
        paths[CONSUMER_OFFSETS] = config.consumer_offsets
    if config.end_offsets:
        paths[END_OFFSETS] = config.end_offsets
    return {
        name: list_export(path, input_format(path, config.input_format, spark), spark)
        for name, path in paths.items()
    }


def nothing_new(
    config: JobConfig, checkpoint: Checkpoint | None, spark: SparkSession | None = None
) -> bool:
    """Whether an incremental run would find nothing new: it can go on from `checkpoint`
    and no export changed since. Without `spark` it costs a listing of local folders."""
    if why_not_incremental(config, checkpoint) is not None:
        return False
    assert checkpoint is not None
    listings = export_listings(config, spark)
    return all(now.unchanged_since(checkpoint.exports.get(name)) for name, now in listings.items())


def restore_unfinished(store: TableStore, checkpoint: Checkpoint) -> None:
    """Put back the tables that a run killed after the checkpoint committed to."""
    for name, version in sorted(checkpoint.table_versions.items()):
        if name == CHECKPOINT_TABLE:
            continue
        current = store.version(name)
        if current is not None and current > version:
            log.warning("%s: putting back version %d (a later run did not finish)", name, version)
            store.restore(name, version)


#: An increment with more rows than this (delivered by the inputs' streams, or to apply: new
#: and backfilled, of every input) runs as a full run: an increment is read, decoded,
#: replayed and audited on the driver (docs/incremental.md), which suits a scheduled run's
#: few thousand rows, not a history's worth (a first run over a big drop, a schedule
#: paused for long).
LARGE_INCREMENT_ROWS: Final = 250_000
#: Below this many rows to apply an increment runs as one, however small the tables are: it
#: costs seconds, and a full run would cost no less.
SMALL_INCREMENT_ROWS: Final = 20_000


class IncrementTooLarge(FullRunNeeded):
    """The rows an incremental run would apply call for a full run instead."""


def _refuse_large(new: NewInputs, checkpoint: Checkpoint) -> None:
    """Raise `IncrementTooLarge` when the rows to apply are more than LARGE_INCREMENT_ROWS or
    (above SMALL_INCREMENT_ROWS) than the rows the tables hold: a full run over everything
    then costs no more than the increment, and needs no more memory than any full run."""
    rows = sum(arrived.counts.read for arrived in new.arrivals().values())
    _refuse_rows(rows, checkpoint, "arrived to apply")


def _refuse_large_before_reading(
    config: JobConfig,
    checkpoint: Checkpoint,
    listings: dict[str, ExportFiles],
    spark: SparkSession,
) -> None:
    """`_refuse_large` before Spark reads any row, from the new files of the local Parquet
    and Delta exports: their rows above the offsets processed (`rows_above`: footers, and
    two columns where those do not tell). A history's worth of new rows then costs a full
    run, not a read of them first; an export moved (every file new, every row processed)
    is still an increment."""
    paths = {SHARE_STATE: config.share_state, CONSUMER_OFFSETS: config.consumer_offsets}
    rows = 0
    for source, listing in listings.items():
        path, earlier = paths.get(source), checkpoint.exports.get(source)
        if not path or earlier is None or not is_local(path, spark):
            continue
        files = new_files(path, earlier, listing)
        if files:
            last = {p: extent.last for p, extent in checkpoint.extents.get(source, {}).items()}
            rows += rows_above(files, last)
    _refuse_rows(rows, checkpoint, "in new files above the offsets processed")


def _refuse_rows(rows: int, checkpoint: Checkpoint, which: str) -> None:
    stored = sum(
        int(totals.get("decoded", 0)) + int(totals.get("quarantined", 0))
        for totals in (checkpoint.totals.get("inputs") or {}).values()
    )
    if rows > LARGE_INCREMENT_ROWS:
        raise IncrementTooLarge(
            f"{rows:,} rows {which}, more than an increment takes ({LARGE_INCREMENT_ROWS:,})"
        )
    if rows > max(stored, SMALL_INCREMENT_ROWS):
        raise IncrementTooLarge(f"{rows:,} rows {which}, more than the {stored:,} the tables hold")


@dataclass(frozen=True)
class IncrementalRun(Generic[Beside]):
    """What an incremental run did, for its summary and checkpoint."""

    new: NewInputs
    increment: Increment
    audits: AuditTables
    listings: dict[str, ExportFiles]
    #: The inputs' streams, with the batches this run applied.
    streams: Streams
    #: What the caller's `beside` returned.
    beside: Beside


@dataclass(frozen=True)
class NothingArrived:
    """The inputs' streams delivered nothing new, though a local export's listing changed
    (a compaction, a file the last run's stream had already read) or a stream started
    again: the checkpoint takes the new listing and streams, and no table changes."""

    listings: dict[str, ExportFiles]
    streams: Streams


def run_incremental(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    written: list[str],
    beside: Callable[[NewInputs, Increment], Beside],
    before_work: Callable[[], object] | None = None,
) -> IncrementalRun[Beside] | NothingArrived | None:
    """Bring every table under the output up to date with what arrived since `checkpoint`;
    None when nothing arrived (then nothing is written). `written` gets the name of each
    table as the run changes it: the caller puts those back if the run fails.
    `beside` runs once the touched share-partitions are replayed, side by side with the
    steps that write the tables (the run summary's counts of the new rows, which need
    nothing the steps write). `before_work` runs once it is known that
    something may have arrived, before anything is read. `NothingArrived`: the streams
    delivered nothing, and only the checkpoint is to be written again."""
    listings = export_listings(config, store.spark)
    if all(now.unchanged_since(checkpoint.exports.get(name)) for name, now in listings.items()):
        return None
    _refuse_large_before_reading(config, checkpoint, listings, store.spark)
    restore_unfinished(store, checkpoint)
    if before_work is not None:
        before_work()
    delivered = arrive(config, store, checkpoint)
    end_offsets = listings.get(END_OFFSETS)
    if delivered.nothing() and (
        end_offsets is None or end_offsets.unchanged_since(checkpoint.exports.get(END_OFFSETS))
    ):
        return NothingArrived(listings, delivered.streams)
    return _apply(config, store, checkpoint, written, listings, delivered, beside)


def _apply(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    written: list[str],
    listings: dict[str, ExportFiles],
    delivered: Delivered,
    beside: Callable[[NewInputs, Increment], Beside],
) -> IncrementalRun[Beside]:
    started = time.monotonic()
    tables = delivered_tables(store, delivered, LARGE_INCREMENT_ROWS)
    if tables is None:
        raise IncrementTooLarge(
            "the inputs' streams delivered more rows than an increment takes"
            f" ({LARGE_INCREMENT_ROWS:,})"
        )
    new, rows = read_on_driver(config, store, checkpoint, delivered, tables)
    _refuse_large(new, checkpoint)
    increment = Increment(
        store=store,
        kafka=parse_kafka_version(config.kafka_version) or LATEST,
        delivery_count_limit=config.delivery_count_limit,
        rows=rows,
        written=written,
    )
    replay_new_rows(increment)
    log.info("read and replayed the new rows on the driver in %.1f s", time.monotonic() - started)

    def audit_tables() -> AuditTables:
        # pruning_cutoff and findings read the placements (from the segments' step) and
        # what prepare_audits computes, not the ranges: they start once those two end. The
        # per-share-partition and placement rules need only the touched keys' segments and
        # the placements: they are found beside the segments' commits.
        per_share_partition, prepared = run_side_by_side(
            [
                lambda: write_segments(
                    increment,
                    lambda: per_share_partition_rows(
                        increment, store.read_arrow("findings"), config
                    ),
                ),
                lambda: prepare_audits(increment, config, checkpoint, store.read_arrow("findings")),
            ]
        )
        log.info("wrote the segments and groups in %.1f s", time.monotonic() - started)
        return write_audits(increment, prepared, per_share_partition)

    # Each step reads what the replay computed and changes tables of its own; `beside`
    # changes none.
    _, _, audits, counted = run_side_by_side(
        [
            lambda: _write_records_and_state(increment),
            lambda: write_ranges(increment),
            audit_tables,
            lambda: beside(new, increment),
        ]
    )
    compact_written(increment)
    log.info("wrote the tables in %.1f s", time.monotonic() - started)
    return IncrementalRun(new, increment, audits, listings, delivered.streams, counted)


def _write_records_and_state(increment: Increment) -> None:
    """The per-record tables gain the new rows; share_partition_state and delivery_counts
    replace the touched keys' rows."""
    rows = increment.rows
    _append(increment, "share_state_records", rows.records)
    write_history(increment)
    if rows.group_records is not None:
        _append(increment, "share_group_records", rows.group_records)
    _append(increment, "quarantine", rows.quarantine)
    write_state(increment)


def _append(increment: Increment, name: str, rows: pa.Table) -> None:
    """Append `rows` (as the table's columns and types)."""
    store = increment.store
    schema = store.arrow_schema(name)
    increment.record(store.append_arrow(name, rows.select(schema.names).cast(schema)))
