"""What arrived in the exports since the checkpoint: each input's stream run
(`Trigger.AvailableNow`, `sharestate.io.streams`) and what it delivered, placed against the
checkpoint and decoded by Spark (`read_new_inputs`) or, for a small increment, on the
driver (`sharestate.job.driver_increment`), as `NewInputs`."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.audits.findings.registry import Source
from sharestate.decode import spark as spark_decode
from sharestate.io import streams as streams_io
from sharestate.io.checkpoint import Checkpoint
from sharestate.io.files import detect_format, local_path
from sharestate.io.store import TableStore, is_local
from sharestate.io.streams import StreamInput, Streams
from sharestate.job.arrivals import Arrivals, place_arrivals
from sharestate.job.cache import CacheScope
from sharestate.job.config import JobConfig
from sharestate.job.increment_audits import known_gaps
from sharestate.job.side_by_side import run_side_by_side
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC

log = logging.getLogger("sharestate")

SHARE_STATE: Final = Source.SHARE_STATE.value
CONSUMER_OFFSETS: Final = Source.CONSUMER_OFFSETS.value


def input_format(path: str, chosen: str, spark: SparkSession | None) -> str:
    if path.startswith("kafka://"):
        return "kafka"
    if chosen != "auto":
        return chosen
    if spark is not None:
        return detect_format(spark, path)
    if not is_local(path):  # without a session: only a local export is listed
        return "untracked"
    return "delta" if os.path.isdir(os.path.join(local_path(path), "_delta_log")) else "parquet"


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
            format=input_format(path, config.input_format, spark),
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


class FullRunNeeded(Exception):
    """What an incremental run found calls for a full run instead (`reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def backfilled_positions(new: NewInputs) -> DataFrame:
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
