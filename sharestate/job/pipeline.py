"""The job's computation with nothing written: what a notebook calls.

`compute(spark, config)` runs the steps in order: read the exports (`read_inputs`), decode
them (`decode_inputs`), replay the state (`replay_decoded`), audit (`audit_replayed`), and
returns every table as DataFrames in one `Results`. The job (`sharestate.job.run`) runs the
same steps and writes the per-record tables before the audit. What the steps persist is
kept by one `CacheScope`, which the results carry and `Results.unpersist()` releases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.audits import AuditOptions, AuditTables, audit
from sharestate.decode import spark as spark_decode
from sharestate.io.checkpoint import PLACEMENTS_TABLE
from sharestate.io.exports import (
    Export,
    count_rows,
    deduplicate,
    read_end_offsets,
    read_export,
)
from sharestate.io.files import unreadable_files_named
from sharestate.job.cache import CacheScope
from sharestate.job.config import JobConfig
from sharestate.job.session import job_settings
from sharestate.kafka.records import parse_kafka_version
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC
from sharestate.places import Place, arrow_frame, place_for
from sharestate.replay import as_of, replay
from sharestate.replay.combiner import LATEST


@dataclass(frozen=True)
class AuditInputs:
    """What the audits read besides the state and the history: the records and quarantine
    within --as-of, the group records (the stored ones too, in an incremental run) and the
    --end-offsets table."""

    records: DataFrame
    quarantine: DataFrame
    group_records: DataFrame | None
    end_offsets: DataFrame | None


@dataclass
class Results:
    """The run's tables, plus the inputs they came from (for counting).

    `replay_decoded` fills in the tables the job writes first (decoded, replayed,
    quarantined), as DataFrames; `audit_replayed` adds the audit tables (`audits`, in
    Arrow on the driver; the properties give them as DataFrames). What the steps persisted
    stays in `cache` until `unpersist()`."""

    share_state_records: DataFrame
    share_partition_state: DataFrame
    share_partition_history: DataFrame
    share_group_records: DataFrame | None
    quarantine: DataFrame
    inputs: dict[str, Export]
    audit_inputs: AuditInputs = field(repr=False)
    cache: CacheScope = field(default_factory=CacheScope, repr=False)
    #: The audit tables, once audited (`audit_replayed`).
    audits: AuditTables | None = None
    #: Where the audits ran.
    place: Place | None = None

    def tables(self) -> dict[str, DataFrame | pa.Table]:
        """Output table name -> its rows (DataFrames; the audit tables, once audited, in
        Arrow), in the order they are written."""
        # The history before the state: on the JVM, the pass that folds the history leaves
        # the state's rows behind (`sharestate.replay.Replayed`), so the state is not folded
        # again.
        out: dict[str, DataFrame | pa.Table] = {
            "share_state_records": self.share_state_records,
            "share_partition_history": self.share_partition_history,
            "share_partition_state": self.share_partition_state,
        }
        if self.share_group_records is not None:
            out["share_group_records"] = self.share_group_records
        out["quarantine"] = self.quarantine
        if self.audits is not None:
            out.update(audit_tables(self.audits))
        return out

    def unpersist(self) -> None:
        """Release what computing these tables persisted."""
        self.cache.release()

    def _audit_frame(self, name: str) -> DataFrame:
        if self.audits is None:
            raise ValueError("no audit tables yet: these results come before audit_replayed")
        rows = audit_tables(self.audits)[name]
        return arrow_frame(self.share_state_records.sparkSession, rows)

    @property
    def delivery_counts(self) -> DataFrame:
        return self._audit_frame("delivery_counts")

    @property
    def poison_messages(self) -> DataFrame:
        return self._audit_frame("poison_messages")

    @property
    def archived_messages(self) -> DataFrame:
        return self._audit_frame("archived_messages")

    @property
    def share_partition_segments(self) -> DataFrame:
        return self._audit_frame("share_partition_segments")

    @property
    def pruning_cutoff(self) -> DataFrame:
        return self._audit_frame("pruning_cutoff")

    @property
    def findings(self) -> DataFrame:
        return self._audit_frame("findings")

    @property
    def share_groups(self) -> DataFrame | None:
        """Only with --consumer-offsets."""
        if self.audits is not None and self.audits.share_groups is None:
            return None
        return self._audit_frame("share_groups")

    @property
    def share_partition_lag(self) -> DataFrame | None:
        """Only with --end-offsets."""
        if self.audits is not None and self.audits.share_partition_lag is None:
            return None
        return self._audit_frame("share_partition_lag")


def audit_tables(audits: AuditTables) -> dict[str, pa.Table]:
    """Output table name -> rows of the audit tables, in the order they are written."""
    out = {
        "delivery_counts": audits.delivery_counts,
        "poison_messages": audits.poison_messages,
        "archived_messages": audits.archived_messages,
        "share_partition_segments": audits.segments,
        PLACEMENTS_TABLE: audits.placements,
        "pruning_cutoff": audits.pruning_cutoff,
    }
    if audits.share_groups is not None:
        out["share_groups"] = audits.share_groups
    if audits.share_partition_lag is not None:
        out["share_partition_lag"] = audits.share_partition_lag
    out["findings"] = audits.findings
    return out


@dataclass(frozen=True)
class Inputs:
    """The exports read and counted (in an incremental run, their rows above the
    checkpoint), and the --end-offsets table."""

    share_state: Export
    consumer_offsets: Export | None
    end_offsets: DataFrame | None

    def exports(self) -> dict[str, Export]:
        """Input name -> export, the share-state export first."""
        out = {"share_state": self.share_state}
        if self.consumer_offsets is not None:
            out["consumer_offsets"] = self.consumer_offsets
        return out


@dataclass(frozen=True)
class DecodedInputs:
    """Each export decoded: its records and quarantined rows (`spark_decode.Decoded`)."""

    share_state: spark_decode.Decoded
    consumer_offsets: spark_decode.Decoded | None


def compute(spark: SparkSession, config: JobConfig) -> Results:
    """Read, decode and replay the exports named in `config`, and audit them; nothing is
    written."""
    cache = CacheScope()
    with job_settings(spark), unreadable_files_named(config.read_paths()):
        inputs = read_inputs(spark, config)
        decoded = decode_inputs(inputs, config, cache, read_back=False)
        replayed = replay_decoded(inputs, decoded, config, cache, keep_history=True)
        return audit_replayed(replayed, config)


def read_inputs(spark: SparkSession, config: JobConfig) -> Inputs:
    """Read step: the exports, each counted, and the --end-offsets table."""
    share_state = _read_counted(spark, config, "share_state", config.share_state)
    end_offsets = (
        read_end_offsets(spark, config.end_offsets, config.input_format)
        if config.end_offsets
        else None
    )
    offsets = None
    if config.consumer_offsets:
        offsets = _read_counted(spark, config, "consumer_offsets", config.consumer_offsets)
    return Inputs(share_state, offsets, end_offsets)


#: Input name -> the option that names its export, and the topic it must hold.
_EXPORTS = {
    "share_state": ("--share-state", SHARE_STATE_TOPIC),
    "consumer_offsets": ("--consumer-offsets", CONSUMER_OFFSETS_TOPIC),
}


def _read_counted(spark: SparkSession, config: JobConfig, source: str, path: str) -> Export:
    """The export of input `source` at `path`, counted: once, for the summary and so that
    an export without duplicates (the usual case) is not shuffled to drop them."""
    what, topic = _EXPORTS[source]
    export = read_export(
        spark,
        path,
        what=what,
        topic=topic,
        input_format=config.input_format,
        kafka_timeout_seconds=config.kafka_timeout_seconds,
    )
    return replace(export, counts=count_rows(export.rows))


def decode_inputs(
    inputs: Inputs, config: JobConfig, cache: CacheScope, *, read_back: bool
) -> DecodedInputs:
    """Decode step: each export's rows, duplicates dropped, decoded and quarantined; the
    decoded rows cached as `_keep_decoded` says.

    `read_back`: the caller writes the per-record tables first and gives the audits those
    tables as written, the records and quarantine too (`audit_replayed(written=...)`), so
    the share-state decode need not be cached (the job's full runs)."""
    state = spark_decode.decode_share_state(
        deduplicate(inputs.share_state.rows, inputs.share_state.counts), config.kafka_version
    )
    _keep_decoded(state, cache, read_back=read_back)
    groups = None
    if inputs.consumer_offsets is not None:
        offsets = inputs.consumer_offsets
        groups = spark_decode.decode_consumer_offsets(
            deduplicate(offsets.rows, offsets.counts), config.kafka_version
        )
        _keep_decoded(groups, cache, read_back=False)
    return DecodedInputs(state, groups)


def _keep_decoded(decoded: spark_decode.Decoded, cache: CacheScope, *, read_back: bool) -> None:
    # Records and quarantine are two filters of one decode, and six tables read them; cache
    # the decode so it runs once (Spark's cache matches the shared sub-plan). Rows the
    # JVM decoded are not cached when the audits read the tables as written (`read_back`):
    # decoding again to write them cost less than building Spark's cache, and the records
    # were written as fast from a second decode as from the cache; else they go to disk
    # only: in memory, 10M of them ran a 2 GiB local driver out of heap.
    if decoded.worth_caching:
        cache.keep(decoded.all_rows, StorageLevel.MEMORY_AND_DISK)
    elif not read_back:
        cache.keep(decoded.all_rows, StorageLevel.DISK_ONLY)
    cache.hold(decoded.tee)


def replay_decoded(
    inputs: Inputs,
    decoded: DecodedInputs,
    config: JobConfig,
    cache: CacheScope,
    *,
    keep_history: bool,
) -> Results:
    """Replay step: the share-state records within --as-of folded into the history and the
    state; the results so far.

    The state is cached (one row per share-partition, read by most audit tables). The
    history is not, unless `keep_history` or the fold runs in Python: caching the JVM fold's
    output (a row per record) cost more than folding it again, and its pass over the
    history hands the state over (`Replayed.tee`); the Python fold's output is kept, so
    that the history and the state cost one fold. The job writes the history straight
    from the fold and gives the audits what it wrote (`audit_replayed(written=...)`).
    `keep_history` is for callers that read the history DataFrame several times
    (`compute`, notebooks)."""
    audit_inputs = _within_as_of(inputs, decoded, config)
    replayed = replay(audit_inputs.records, parse_kafka_version(config.kafka_version) or LATEST)
    cache.hold(replayed.tee)
    if keep_history or replayed.tee is None:
        cache.keep(replayed.folded, StorageLevel.MEMORY_AND_DISK)
    # One row per share-partition, read by most audit tables: keep it rather than fold
    # again each time. (The fold also found when each start offset last moved.)
    final_state = cache.keep(replayed.state, StorageLevel.MEMORY_AND_DISK)
    state, groups = decoded.share_state, decoded.consumer_offsets
    return Results(
        share_state_records=state.records,
        share_partition_state=final_state,
        share_partition_history=replayed.history,
        share_group_records=groups.records if groups is not None else None,
        quarantine=(
            state.quarantine.unionByName(groups.quarantine)
            if groups is not None
            else state.quarantine
        ),
        inputs=inputs.exports(),
        audit_inputs=audit_inputs,
        cache=cache,
    )


def _within_as_of(inputs: Inputs, decoded: DecodedInputs, config: JobConfig) -> AuditInputs:
    """What the replay and the audits see: --as-of limits the state-topic rows, and (a
    timestamp) the group records too."""
    offset, moment = config.as_of_offset, config.as_of_timestamp
    state, groups = decoded.share_state, decoded.consumer_offsets
    quarantine = as_of(state.quarantine, source_offset=offset, timestamp=moment)
    group_records = None
    if groups is not None:
        group_records = as_of(groups.records, timestamp=moment)
        quarantine = quarantine.unionByName(as_of(groups.quarantine, timestamp=moment))
    return AuditInputs(
        records=as_of(state.records, source_offset=offset, timestamp=moment),
        quarantine=quarantine,
        group_records=group_records,
        end_offsets=inputs.end_offsets,
    )


def rows_read(exports: Mapping[str, Export]) -> int | None:
    """The rows read from `exports` (as counted when read; None when one was not)."""
    counts = [export.counts for export in exports.values()]
    return None if any(c is None for c in counts) else sum(c.read for c in counts if c)


def audit_options(config: JobConfig) -> AuditOptions:
    return AuditOptions(
        delivery_count_limit=config.delivery_count_limit,
        stall_span_seconds=config.stall_span_seconds,
        state_topic_partitions=config.state_topic_partition_count,
    )


def audit_replayed(replayed: Results, config: JobConfig, place: Place | None = None) -> Results:
    """Audit step: `replayed` with the audit tables, from the DataFrames of
    `replay_decoded` (the records and quarantine within --as-of), worked on where `place`
    says (by default, where the rows read call for)."""
    seen = replayed.audit_inputs
    if place is None:
        place = place_for(rows_read(replayed.inputs))
    audits = audit(
        seen.records,
        replayed.share_partition_state,
        replayed.share_partition_history,
        seen.quarantine,
        audit_options(config),
        group_records=seen.group_records,
        end_offsets=seen.end_offsets,
        place=place,
    )
    return replace(replayed, audits=audits, place=place)


def quarantine_within_as_of(quarantine: DataFrame, config: JobConfig) -> DataFrame:
    """The quarantine table's rows the audits see with --as-of, as `_within_as_of` limits
    them: share-state rows by offset and time, group rows by time."""
    offset, moment = config.as_of_offset, config.as_of_timestamp
    if offset is None and moment is None:
        return quarantine
    share_state = F.col("source") == F.lit("share_state")
    return as_of(
        quarantine.filter(share_state), source_offset=offset, timestamp=moment
    ).unionByName(as_of(quarantine.filter(~share_state), timestamp=moment))
