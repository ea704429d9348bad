"""`--mode incremental`: a run that costs what is new.

A scheduled run over an export that only grows reads the checkpoint of the last complete
run (`sharestate.io.checkpoint`), lists the exports, and reads only the files it has not
seen (`sharestate.job.arrivals`). With nothing new it writes nothing and says so, and it can
tell before Spark starts (`nothing_new`, which the command line asks first). Otherwise it
decodes the new rows, replays the share-partitions they touch from their stored state, and
brings every table up to date from the new records and the stored rows of what they touch
(`sharestate.job.increment`, `sharestate.job.increment_audits`): the tables end as a full
run over everything would leave them.

Each table's rule, and why it equals the full computation: docs/incremental.md. A run that
finds the output's tables newer than the checkpoint (a killed run's commits) first puts
them back to the checkpoint's versions; a run that fails puts back what it wrote.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Generic

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.arrow_keys import with_keys, without_keys
from sharestate.audits.driver import RECORD_COLUMNS
from sharestate.audits.findings.registry import Source
from sharestate.audits.findings_arrow.records import (
    exported_positions as exported_positions_arrow,
)
from sharestate.backend import default_parallelism
from sharestate.decode import spark as spark_decode
from sharestate.decode.columns import KEY
from sharestate.io import streams as streams_io
from sharestate.io.changes import ExportFiles, list_export, new_files, rows_above
from sharestate.io.checkpoint import CHECKPOINT_TABLE, Checkpoint
from sharestate.io.files import detect_format, local_path, session_settings
from sharestate.io.store import SMALL_TABLE_ROWS, TableStore, arrow_frame, is_local
from sharestate.io.streams import StreamInput, Streams
from sharestate.job.arrivals import Arrivals, place_arrivals
from sharestate.job.cache import CacheScope
from sharestate.job.config import JobConfig
from sharestate.job.driver_increment import ReadOnDriver, delivered_tables, read_on_driver
from sharestate.job.increment import (
    Beside,
    DriverRows,
    Increment,
    compact_written,
    replay_increment,
    replay_on_driver,
    split_keys,
    split_keys_on_driver,
    write_history,
    write_ranges,
    write_segments,
    write_state,
)
from sharestate.job.increment_audits import (
    AuditTables,
    known_gaps,
    known_gaps_arrow,
    per_share_partition_rows,
    prepare_audits,
    write_audits,
)
from sharestate.job.side_by_side import run_side_by_side
from sharestate.kafka.records import parse_kafka_version
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC
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


def _input_format(path: str, input_format: str, spark: SparkSession | None) -> str:
    if path.startswith("kafka://"):
        return "kafka"
    if input_format != "auto":
        return input_format
    if spark is not None:
        return detect_format(spark, path)
    if not is_local(path):  # without a session: only a local export is listed
        return "untracked"
    return "delta" if os.path.isdir(os.path.join(local_path(path), "_delta_log")) else "parquet"


def export_listings(config: JobConfig, spark: SparkSession | None = None) -> dict[str, ExportFiles]:
    """What each export (and the --end-offsets table) holds now. Without `spark` only local
    ones can be listed; the others come out untracked (so: maybe changed)."""
    paths = {SHARE_STATE: config.share_state}
    if config.consumer_offsets:
        paths[CONSUMER_OFFSETS] = config.consumer_offsets
    if config.end_offsets:
        paths[END_OFFSETS] = config.end_offsets
    return {
        name: list_export(path, _input_format(path, config.input_format, spark), spark)
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


@dataclass(frozen=True)
class NewInputs:
    """What arrived in each export since the checkpoint, decoded."""

    share_state: Arrivals
    state_decoded: spark_decode.Decoded
    consumer_offsets: Arrivals | None = None
    groups_decoded: spark_decode.Decoded | None = None

    def arrivals(self) -> dict[str, Arrivals]:
        out = {SHARE_STATE: self.share_state}
        if self.consumer_offsets is not None:
            out[CONSUMER_OFFSETS] = self.consumer_offsets
        return out

    def quarantine(self) -> DataFrame:
        quarantine = self.state_decoded.quarantine
        if self.groups_decoded is not None:
            quarantine = quarantine.unionByName(self.groups_decoded.quarantine)
        return quarantine


def _stored_positions(store: TableStore, source: str) -> DataFrame:
    """(partition, offset) of the rows of `source` the tables hold."""
    records = store.read("share_group_records", small=False)
    quarantined = store.read("quarantine", small=False).filter(F.col("source") == source)
    positions = [
        df.select(
            F.col("source_partition").alias("partition"), F.col("source_offset").alias("offset")
        )
        for df in (records, quarantined)
    ]
    return positions[0].unionByName(positions[1])


@dataclass(frozen=True)
class Delivered:
    """What the inputs' streams delivered since the checkpoint (`arrive`)."""

    #: source -> the rows its stream delivered that the tables do not hold (None: none).
    rows: dict[str, DataFrame | None]
    #: The streams, with the batches delivered counted as applied (for the next
    #: checkpoint, written once they are).
    streams: Streams
    #: The sources whose stream started again (an export's path changed): read whole.
    read_whole: frozenset[str]
    #: source -> the export's format (parquet, delta, kafka).
    formats: dict[str, str]
    #: source -> the folders of the batches its rows are read from.
    folders: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def nothing(self) -> bool:
        return all(rows is None for rows in self.rows.values())


def stream_inputs(config: JobConfig, spark: SparkSession) -> list[StreamInput]:
    """The inputs a run follows with a stream each (`sharestate.io.streams`)."""
    inputs = [(SHARE_STATE, config.share_state, "--share-state", SHARE_STATE_TOPIC)]
    if config.consumer_offsets:
        inputs.append(
            (
                CONSUMER_OFFSETS,
                config.consumer_offsets,
                "--consumer-offsets",
                CONSUMER_OFFSETS_TOPIC,
            )
        )
    return [
        StreamInput(
            source=source,
            path=path,
            format=_input_format(path, config.input_format, spark),
            what=what,
            topic=topic,
            kafka_timeout_seconds=config.kafka_timeout_seconds,
        )
        for source, path, what, topic in inputs
    ]


def arrive(config: JobConfig, store: TableStore, checkpoint: Checkpoint) -> Delivered:
    """Run each input's stream (AvailableNow) and take what it delivered; an export that
    changed rather than grew raises `FullRunNeeded` (a full run reads it as it is)."""
    inputs = stream_inputs(config, store.spark)
    if checkpoint.streams is None:
        raise FullRunNeeded("the last run did not start the inputs' streams")
    streams = checkpoint.streams.at(store.output).for_inputs(inputs)
    # A new generation starts every input's stream again.
    again = streams.generation != checkpoint.streams.generation
    read_whole = frozenset(i.source for i in inputs) if again else frozenset()
    started = time.monotonic()
    try:
        arrived = streams_io.arrive(store.spark, streams, inputs, together=run_side_by_side)
    except streams_io.ExportChanged as changed:
        raise FullRunNeeded(changed.reason) from None
    log.info("ran the inputs' streams in %.1f s", time.monotonic() - started)
    applied = {source: a.last_batch for source, a in arrived.items()}
    return Delivered(
        {source: a.rows for source, a in arrived.items()},
        streams.with_applied(applied),
        read_whole,
        {i.source: i.format for i in inputs},
        {source: a.folders for source, a in arrived.items()},
    )


def read_new_inputs(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    stored_findings: DataFrame,
    cache: CacheScope,
    delivered: Delivered,
) -> NewInputs:
    """Place what each input's stream delivered against the checkpoint, and decode it."""
    spark = store.spark

    def place(
        source: str,
        path: str,
        gaps: DataFrame | None = None,
        stored_positions: Callable[[], DataFrame] | None = None,
    ) -> Arrivals:
        return place_arrivals(
            spark,
            source=source,
            rows=delivered.rows.get(source),
            fmt=delivered.formats[source],
            path=path,
            read_whole=source in delivered.read_whole,
            checkpoint=checkpoint,
            cache=cache,
            gaps=gaps,
            stored_positions=stored_positions,
        )

    state = place(
        SHARE_STATE,
        config.share_state,
        gaps=cache.keep(known_gaps(stored_findings), StorageLevel.MEMORY_AND_DISK),
    )
    state_decoded = spark_decode.decode_share_state(state.deduplicated(), config.kafka_version)
    _keep_decoded(state_decoded, cache)
    if not config.consumer_offsets:
        return NewInputs(state, state_decoded)
    offsets = place(
        CONSUMER_OFFSETS,
        config.consumer_offsets,
        stored_positions=lambda: _stored_positions(store, CONSUMER_OFFSETS),
    )
    groups = spark_decode.decode_consumer_offsets(offsets.deduplicated(), config.kafka_version)
    _keep_decoded(groups, cache)
    return NewInputs(state, state_decoded, offsets, groups)


def _keep_decoded(decoded: spark_decode.Decoded, cache: CacheScope) -> None:
    # An increment's rows are few and every table reads them: decode them once.
    cache.keep(decoded.all_rows, StorageLevel.MEMORY_AND_DISK)
    cache.hold(decoded.tee)


#: An increment with more rows to apply than this (new and backfilled, of every input) runs
#: as a full run: an increment's steps bring the touched share-partitions' new rows to the
#: driver (docs/incremental.md), which suits a scheduled run's few thousand rows, not a
#: history's worth (a first run over a big drop, a schedule paused for long).
LARGE_INCREMENT_ROWS: Final = 250_000
#: Below this many rows to apply an increment runs as one, however small the tables are: it
#: costs seconds, and a full run would cost no less.
SMALL_INCREMENT_ROWS: Final = 20_000


class FullRunNeeded(Exception):
    """What an incremental run found calls for a full run instead (`reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
    cache: CacheScope,
    written: list[str],
    beside: Callable[[NewInputs, Increment], Beside],
    before_work: Callable[[], object] | None = None,
) -> IncrementalRun[Beside] | NothingArrived | None:
    """Bring every table under the output up to date with what arrived since `checkpoint`;
    None when nothing arrived (then nothing is written). `written` gets the name of each
    table as the run changes it: the caller puts those back if the run fails.
    `beside` runs once the touched share-partitions are replayed, side by side with the
    steps that write the tables (the run summary's counts of the new rows: small Spark
    jobs that need nothing the steps write). `before_work` runs once it is known that
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
    with _small_data_settings(store.spark):
        return _apply(config, store, checkpoint, cache, written, listings, delivered, beside)


@contextmanager
def _small_data_settings(spark: SparkSession) -> Iterator[None]:
    """Spark settings for an increment's computations, put back after: its inputs are a
    few thousand rows and state-sized tables, so a plan runs as one job (adaptive execution
    would run each of its stages as a job of its own, and a shuffle would keep the job's
    many partitions) with a task per two cores: the run's steps submit their plans side by
    side, and each task of a plan this small costs more to start (its plan deserialized)
    than it computes. Its expressions are interpreted: an increment runs a hundred small
    plans once each, and compiling each plan's generated code cost more than it saved
    (bench/results, `where-time-goes`)."""
    settings = {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.shuffle.partitions": str(max(1, default_parallelism(spark) // 2)),
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    with session_settings(spark, settings):
        yield


def _apply(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    cache: CacheScope,
    written: list[str],
    listings: dict[str, ExportFiles],
    delivered: Delivered,
    beside: Callable[[NewInputs, Increment], Beside],
) -> IncrementalRun[Beside]:
    started = time.monotonic()
    tables = delivered_tables(store, delivered)
    if tables is not None:
        new, increment = _read_and_replay_on_driver(
            config, store, checkpoint, cache, written, delivered, tables
        )
        log.info(
            "read and replayed the new rows on the driver in %.1f s", time.monotonic() - started
        )
    else:
        new, increment = _read_and_replay(config, store, checkpoint, cache, written, delivered)
        log.info("replayed the touched share-partitions in %.1f s", time.monotonic() - started)
    quarantine = increment.quarantine = increment.keep(new.quarantine())

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
                lambda: prepare_audits(
                    increment,
                    config,
                    checkpoint,
                    quarantine=quarantine,
                    group_records=increment.group_records,
                    stored_findings=store.read_arrow("findings"),
                    backfilled=(
                        increment.on_driver.backfilled
                        if increment.on_driver is not None
                        else _backfilled(new)
                    ),
                ),
            ]
        )
        log.info("wrote the segments and groups in %.1f s", time.monotonic() - started)
        return write_audits(increment, prepared, per_share_partition)

    # Each step reads what the replay computed and changes tables of its own; `beside`
    # changes none.
    _, _, audits, counted = run_side_by_side(
        [
            lambda: _write_records_and_state(increment, quarantine),
            lambda: write_ranges(increment),
            audit_tables,
            lambda: beside(new, increment),
        ]
    )
    compact_written(increment)
    log.info("wrote the tables in %.1f s", time.monotonic() - started)
    return IncrementalRun(new, increment, audits, listings, delivered.streams, counted)


def _read_and_replay(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    cache: CacheScope,
    written: list[str],
    delivered: Delivered,
) -> tuple[NewInputs, Increment]:
    """The new rows placed, decoded and replayed by Spark's distributed steps."""
    started = time.monotonic()
    stored_findings = cache.keep(store.read("findings"), StorageLevel.MEMORY_AND_DISK)
    new = read_new_inputs(config, store, checkpoint, stored_findings, cache, delivered)
    log.info("read the new rows in %.1f s", time.monotonic() - started)
    _refuse_large(new, checkpoint)
    increment = Increment(
        store=store,
        cache=cache,
        kafka=parse_kafka_version(config.kafka_version) or LATEST,
        delivery_count_limit=config.delivery_count_limit,
        records=new.state_decoded.records,
        backfill_positions=new.share_state.backfill_positions,
        backfilled_rows=new.share_state.backfill,
        stored_state=cache.keep(store.read("share_partition_state"), StorageLevel.MEMORY_AND_DISK),
        group_records=new.groups_decoded.records if new.groups_decoded is not None else None,
        written=written,
    )
    split_keys(increment)
    replay_increment(increment)
    return new, increment


def _read_and_replay_on_driver(
    config: JobConfig,
    store: TableStore,
    checkpoint: Checkpoint,
    cache: CacheScope,
    written: list[str],
    delivered: Delivered,
    tables: dict[str, pa.Table | None],
) -> tuple[NewInputs, Increment]:
    """The new rows (`tables`, `delivered_tables`) placed, decoded and replayed on the
    driver (`sharestate.job.driver_increment`)."""
    spark = store.spark
    gaps = known_gaps_arrow(store.read_arrow("findings"))
    read = read_on_driver(config, store, checkpoint, tables, gaps, delivered.read_whole)
    paths = {SHARE_STATE: config.share_state, CONSUMER_OFFSETS: config.consumer_offsets or ""}
    arrivals = {
        source: each.placed.arrivals(
            spark, delivered.formats[source], paths[source], source not in delivered.read_whole
        )
        for source, each in read.items()
    }
    groups = read.get(CONSUMER_OFFSETS)
    new = NewInputs(
        arrivals[SHARE_STATE],
        read[SHARE_STATE].spark_decoded(spark),
        arrivals.get(CONSUMER_OFFSETS),
        groups.spark_decoded(spark) if groups is not None else None,
    )
    _refuse_large(new, checkpoint)
    records = read[SHARE_STATE].decoded.records
    quarantined = [each.decoded.quarantine for each in read.values()]
    quarantine = pa.concat_tables([q.cast(quarantined[0].schema) for q in quarantined])
    group_records = groups.decoded.records if groups is not None else None
    increment = Increment(
        store=store,
        cache=cache,
        kafka=parse_kafka_version(config.kafka_version) or LATEST,
        delivery_count_limit=config.delivery_count_limit,
        records=new.state_decoded.records,
        backfill_positions=new.share_state.backfill_positions,
        backfilled_rows=new.share_state.backfill,
        stored_state=store.read("share_partition_state"),
        group_records=new.groups_decoded.records if new.groups_decoded is not None else None,
        written=written,
        on_driver=DriverRows(records, group_records, quarantine, _backfilled_arrow(read)),
    )
    split_keys_on_driver(increment, records, read[SHARE_STATE].placed.backfill_positions)
    stored_state = store.read_arrow("share_partition_state") if store.local else None
    if stored_state is not None:
        touched_state = with_keys(stored_state, increment.touched_keys, KEY)
    else:
        touched_state = store.read_arrow_matching(
            "share_partition_state", increment.touched_keys, KEY
        )
    replay_on_driver(increment, touched_state)
    if stored_state is not None and stored_state.num_rows <= SMALL_TABLE_ROWS:
        # The whole state after the run, on the driver already: the audits read it there.
        state = pa.concat_tables(
            [without_keys(stored_state, increment.touched_keys, KEY), increment.new_state_rows()]
        )
        increment.computed("state", state)
        increment.state = arrow_frame(spark, state)
    increment.computed("records", records.select(list(RECORD_COLUMNS)))
    increment.computed(
        "share_state_positions", exported_positions_arrow(records, quarantine, SHARE_STATE)
    )
    return new, increment


def _write_records_and_state(increment: Increment, quarantine: DataFrame) -> None:
    """The per-record tables gain the new rows; share_partition_state and delivery_counts
    replace the touched keys' rows."""
    on_driver = increment.on_driver
    _append(
        increment,
        "share_state_records",
        increment.records,
        on_driver.records if on_driver is not None else None,
    )
    write_history(increment)
    if increment.group_records is not None:
        _append(
            increment,
            "share_group_records",
            increment.group_records,
            on_driver.group_records if on_driver is not None else None,
        )
    _append(
        increment, "quarantine", quarantine, on_driver.quarantine if on_driver is not None else None
    )
    write_state(increment)


def _backfilled(new: NewInputs) -> DataFrame:
    """source, source_partition, source_offset of the rows that arrived below the
    checkpoint."""
    frames = [
        arrived.backfill_positions.select(
            F.lit(source).alias("source"),
            F.col("partition").alias("source_partition"),
            F.col("offset").alias("source_offset"),
        )
        for source, arrived in new.arrivals().items()
    ]
    out = frames[0]
    for more in frames[1:]:
        out = out.unionByName(more)
    return out


def _backfilled_arrow(read: dict[str, ReadOnDriver]) -> pa.Table:
    """`_backfilled` of the rows read on the driver."""
    return pa.concat_tables(
        [
            pa.table(
                {
                    "source": pa.array(
                        [source] * each.placed.backfill_positions.num_rows, pa.string()
                    ),
                    "source_partition": each.placed.backfill_positions.column("partition"),
                    "source_offset": each.placed.backfill_positions.column("offset"),
                }
            )
            for source, each in read.items()
        ]
    )


def _append(
    increment: Increment, name: str, rows: DataFrame, on_driver: pa.Table | None = None
) -> None:
    """Append `rows`; `on_driver`: the same rows as Arrow, appended from there (as the
    table's columns and types)."""
    store = increment.store
    if on_driver is None:
        increment.record(store.append(name, rows))
        return
    schema = store.arrow_schema(name)
    increment.record(store.append_arrow(name, on_driver.select(schema.names).cast(schema)))
