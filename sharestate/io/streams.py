"""Which rows arrived in an export since the last run, as Spark's own streaming sources tell.

Every run that keeps a checkpoint follows each input with one of Spark's incremental
sources, on any file system Spark reaches and over any session (classic or Connect): the
file source for a Parquet folder, Delta's source for a Delta table (it skips the commits
that only rearrange files, `dataChange=false`, as a compaction or `OPTIMIZE` writes them),
the Kafka source for `kafka://` (`failOnDataLoss=false`: offsets Kafka pruned before a run
read them are the export's gaps, which the findings report). Each stream runs with
`Trigger.AvailableNow` (everything there now, then stop) and keeps its streaming checkpoint
under the output:

    <output>/_streams/<generation>/<source>/checkpoint   Spark's: what the source has read
    <output>/_streams/<generation>/<source>/arrived/batch=<id>   each micro-batch's rows

A micro-batch's rows are written as they are (Parquet) to a folder of their own, written
again whole when Spark runs the batch again after a failure; Spark commits the batch only
after. The run then reads the batches after the last one it applied (the job's checkpoint
keeps that number, `Streams.applied`), and a run that fails leaves them for the next.

A full run starts a new generation before it reads anything (`start`): each stream runs once
with a batch function that reads nothing, so its checkpoint marks everything there as
seen. A file that arrives between that and the full run's read is read by both: its rows
are then already processed, which an incremental run tells from the extents and does not
apply twice. The same holds for a stream started again on an export whose path changed
(`Streams.for_inputs`, not started: every row is read once more and found processed).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Final

from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from sharestate.io.exports import (
    KAFKA_OFFSET_FETCHING_CONF,
    REQUIRED_COLUMNS,
    check_schema,
    kafka_bootstrap,
    load_table,
    wait_for_topic,
)
from sharestate.io.files import file_system, first_line, session_settings

log = logging.getLogger("sharestate")

STREAMS_FOLDER: Final = "_streams"
#: The column of the batch folders (`arrived/batch=<id>`).
BATCH: Final = "batch"
#: Delta source errors that mean the export was changed, not only added to: the run then
#: runs as a full run over the export as it is now (and starts its streams again).
EXPORT_CHANGED_ERRORS: Final = (
    "DELTA_SOURCE_IGNORE_DELETE",
    "DELTA_SOURCE_TABLE_IGNORE_CHANGES",
    "DELTA_LOG_FILE_NOT_FOUND_FOR_STREAMING_SOURCE",
    "DELTA_SCHEMA_CHANGED",
    "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE",
)


class ExportChanged(Exception):
    """An export's stream found rows changed or removed, or its history gone (`reason`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class StreamInput:
    """One input to follow: `source` names it in the checkpoint, `what` in messages."""

    source: str
    path: str
    format: str
    what: str
    topic: str
    kafka_timeout_seconds: float = 60.0


@dataclass(frozen=True)
class Streams:
    """The streams of one output's inputs, as the job's checkpoint carries them (by their
    generation's name: an output moved elsewhere keeps its streams)."""

    #: The folder's name under <output>/_streams.
    generation: str
    #: source -> the export path its stream reads.
    paths: Mapping[str, str] = field(default_factory=dict)
    #: source -> the last micro-batch whose rows the tables hold (-1: none yet).
    applied: Mapping[str, int] = field(default_factory=dict)
    #: The output they are under (not carried: the output is where the checkpoint is read).
    output: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "paths": dict(self.paths),
            "applied": dict(self.applied),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any] | None) -> Streams | None:
        if not data or not data.get("generation"):
            return None
        return Streams(
            str(data["generation"]),
            {str(k): str(v) for k, v in (data.get("paths") or {}).items()},
            {str(k): int(v) for k, v in (data.get("applied") or {}).items()},
        )

    def at(self, output: str) -> Streams:
        """These streams under `output`."""
        return replace(self, output=output.rstrip("/"))

    @property
    def root(self) -> str:
        return f"{self.output}/{STREAMS_FOLDER}"

    @property
    def folder(self) -> str:
        return f"{self.root}/{self.generation}"

    def checkpoint_location(self, source: str) -> str:
        return f"{self.folder}/{source}/checkpoint"

    def arrived(self, source: str) -> str:
        return f"{self.folder}/{source}/arrived"

    def for_inputs(self, inputs: list[StreamInput]) -> Streams:
        """These streams, or a new generation (not started) where an input's path is not
        the one its stream reads: every stream then reads its export whole, once."""
        if all(self.paths.get(i.source) == i.path for i in inputs):
            return self
        moved = [i.what for i in inputs if self.paths.get(i.source) != i.path]
        log.info("%s moved: the inputs' streams start again and read them whole", ", ".join(moved))
        return Streams(new_generation(), {i.source: i.path for i in inputs}, output=self.output)

    def with_applied(self, applied: Mapping[str, int]) -> Streams:
        return replace(self, applied={**self.applied, **applied})


def new_generation() -> str:
    """A new generation's folder name: when, and a random part."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def _source_rows(spark: SparkSession, stream: StreamInput) -> DataFrame:
    """The export as a stream, in the Kafka-record schema."""
    if stream.format == "kafka":
        wait_for_topic(spark, stream.path, stream.topic, stream.kafka_timeout_seconds)
        rows = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap(stream.path))
            .option("subscribe", stream.topic)
            .option("startingOffsets", "earliest")
            # Kafka prunes __share_group_state: what went before a run read it is a gap.
            .option("failOnDataLoss", "false")
            .option("kafka.isolation.level", "read_committed")
            .load()
        )
    elif stream.format == "delta":
        rows = spark.readStream.format("delta").load(stream.path)
    else:
        # The file source needs the schema: the folder's, as a batch read gives it.
        schema = load_table(spark, stream.path, stream.format, stream.what).schema
        rows = spark.readStream.schema(schema).format(stream.format).load(stream.path)
    return check_schema(rows, stream.what, stream.path).select(*REQUIRED_COLUMNS)


def _read_nothing() -> Callable[[DataFrame, int], None]:
    # Built here, not at module level, so that a Connect server pickles it by value and
    # needs no sharestate to run it.
    def read_nothing(batch: DataFrame, batch_id: int) -> None:
        return None

    return read_nothing


def _write_batch(arrived: str) -> Callable[[DataFrame, int], None]:
    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(f"{arrived}/batch={batch_id}")

    return write_batch


def _run(
    spark: SparkSession,
    streams: Streams,
    stream: StreamInput,
    sink: Callable[[DataFrame, int], None],
) -> None:
    """One AvailableNow run of `stream` into `sink` (within `_stream_settings`)."""
    query = (
        _source_rows(spark, stream)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", streams.checkpoint_location(stream.source))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    except StreamingQueryException as err:
        message = str(err)
        changed = next((e for e in EXPORT_CHANGED_ERRORS if e in message), None)
        if changed is not None:
            raise ExportChanged(
                f"{stream.what} {stream.path} changed, not only grew ({changed}): "
                "its rows are read again whole"
            ) from None
        raise


@contextmanager
def _stream_settings(spark: SparkSession, inputs: Sequence[StreamInput]) -> Iterator[None]:
    """The settings the streams of `inputs` need, set once for all of them (they run side by
    side): Spark's Kafka source reads an internal topic only with the offset fetching of the
    admin client."""
    kafka = [stream.path for stream in inputs if stream.format == "kafka"]
    if not kafka:
        yield
        return
    needed = f"{kafka[0]}: Spark's Kafka source reads an internal topic only with"
    with session_settings(spark, {KAFKA_OFFSET_FETCHING_CONF: "true"}, required=needed):
        yield


#: How the streams of several inputs run: `together(steps)` runs each and returns their
#: results in order (the job runs them side by side: each is mostly Spark's fixed cost).
Together = Callable[[Sequence[Callable[[], Any]]], list[Any]]


def start(
    spark: SparkSession,
    output: str,
    inputs: list[StreamInput],
    together: Together,
) -> Streams:
    """A new generation of streams whose checkpoints hold everything the inputs hold now,
    without reading it: a full run calls this before it reads the inputs."""
    streams = Streams(new_generation(), {i.source: i.path for i in inputs}).at(output)
    started = time.monotonic()
    with _stream_settings(spark, inputs):
        together([partial(_run, spark, streams, stream, _read_nothing()) for stream in inputs])
    log.info("started the inputs' streams in %.1f s", time.monotonic() - started)
    return streams


@dataclass(frozen=True)
class Arrived:
    """The rows a stream delivered that the tables do not hold yet."""

    #: Kafka-record schema; None: no batch to apply.
    rows: DataFrame | None
    #: The last batch read (the `applied` of the next checkpoint).
    last_batch: int
    #: The folders of the batches `rows` reads.
    folders: tuple[str, ...] = ()


def arrive(
    spark: SparkSession,
    streams: Streams,
    inputs: Sequence[StreamInput],
    together: Together,
) -> dict[str, Arrived]:
    """Per input: run its stream (AvailableNow) and read what it delivered after
    `streams.applied`."""
    with _stream_settings(spark, inputs):
        arrivals = together([partial(_arrive_one, spark, streams, stream) for stream in inputs])
    return {stream.source: arrived for stream, arrived in zip(inputs, arrivals, strict=True)}


def _arrive_one(spark: SparkSession, streams: Streams, stream: StreamInput) -> Arrived:
    arrived = streams.arrived(stream.source)
    _run(spark, streams, stream, _write_batch(arrived))
    applied = streams.applied.get(stream.source, -1)
    batches = [b for b in _batch_ids(spark, arrived) if b > applied]
    if not batches:
        return Arrived(None, applied)
    folders = tuple(f"{arrived}/{BATCH}={b}" for b in batches)
    rows = spark.read.option("basePath", arrived).parquet(*folders).select(*REQUIRED_COLUMNS)
    return Arrived(rows, max(batches), folders)


def _batch_ids(spark: SparkSession, arrived: str) -> list[int]:
    """The batch folders under `arrived`."""
    files = file_system(spark, arrived)
    if files is not None:
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in files.folders(arrived)]
    else:  # Spark Connect, off the local file system: Spark lists the folder
        try:
            listed = spark.read.parquet(arrived).select(BATCH).distinct().collect()
        except AnalysisException as err:  # no batch written yet
            if "PATH_NOT_FOUND" in str(err):
                return []
            raise
        return sorted(int(row[BATCH]) for row in listed)
    prefix = f"{BATCH}="
    return sorted(int(n[len(prefix) :]) for n in names if n.startswith(prefix))


def discard(spark: SparkSession, streams: Streams) -> None:
    """Remove the folder of a generation no checkpoint names (its full run failed)."""
    files = file_system(spark, streams.root)
    if files is None:
        return
    try:
        files.delete(streams.folder)
        if not files.folders(streams.root) and not files.files(streams.root):
            files.delete(streams.root)
    except Exception as err:  # the next successful run removes it
        log.warning("could not remove %s: %s", streams.folder, first_line(err))


def tidy(spark: SparkSession, streams: Streams) -> None:
    """Remove the batches of `streams` the tables now hold and the folders of other
    generations. Where this process reaches no file system (Spark Connect, off the local
    file system) they stay: no run reads them again."""
    root = streams.root
    files = file_system(spark, root)
    if files is None:
        return
    try:
        for folder in files.folders(root):
            if folder.rstrip("/").rsplit("/", 1)[-1] != streams.generation:
                files.delete(folder)
        for source, applied in streams.applied.items():
            arrived = streams.arrived(source)
            for batch in _batch_ids(spark, arrived):
                if batch <= applied:
                    files.delete(f"{arrived}/{BATCH}={batch}")
    except Exception as err:  # the next run tries again; nothing reads them
        log.warning("could not remove applied batches under %s: %s", root, first_line(err))
