"""What arrived in the exports since the checkpoint: each input's stream run
(`Trigger.AvailableNow`, `sharestate.io.streams`) and what it delivered (`Delivered`),
which the driver reads, places against the checkpoint and decodes
(`sharestate.job.driver_increment`); `NewInputs` counts what each input brought."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Final

from pyspark.sql import DataFrame, SparkSession

from sharestate.audits.findings.registry import Source
from sharestate.io import streams as streams_io
from sharestate.io.checkpoint import Checkpoint
from sharestate.io.files import detect_format, local_path
from sharestate.io.store import TableStore, is_local
from sharestate.io.streams import StreamInput, Streams
from sharestate.job.arrivals import Arrivals
from sharestate.job.config import JobConfig
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
    """What arrived in each export since the checkpoint, counted (the rows themselves, on
    the driver: `increment.DriverRows`)."""

    share_state: Arrivals
    consumer_offsets: Arrivals | None = None

    def arrivals(self) -> dict[str, Arrivals]:
        out = {SHARE_STATE: self.share_state}
        if self.consumer_offsets is not None:
            out[CONSUMER_OFFSETS] = self.consumer_offsets
        return out


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


class FullRunNeeded(Exception):
    """What an incremental run found calls for a full run instead (`reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
