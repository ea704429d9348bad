"""The job's computation with nothing written: what a notebook calls.

`compute(spark, config)` reads the exports, decodes and replays them, audits the result
(`sharestate.audits`) and returns the DataFrames, in two halves the job calls apart
(`replay_exports`, then `audit_replayed` once the history is written);
`summarize(results)` counts what happened, including the row reconciliation
(rows read = duplicates dropped + decoded + quarantined, for every input).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate import jvm
from sharestate.audits import (
    REASON_DELIVERY_LIMIT,
    SEVERITIES,
    AuditOptions,
    CarriedAudits,
    audit,
)
from sharestate.decode import spark as spark_decode
from sharestate.decode.columns import KEY
from sharestate.io import (
    Export,
    count_rows,
    deduplicate,
    read_end_offsets,
    read_export,
    unreadable_files_named,
)
from sharestate.io.checkpoint import (
    CARRIED_TABLES,
    PreviousOutput,
    new_rows_predicate,
    processed,
)
from sharestate.job.config import JobConfig
from sharestate.kafka.records import parse_kafka_version
from sharestate.kafka.schemas import CONSUMER_OFFSETS_TOPIC, SHARE_STATE_TOPIC
from sharestate.replay import as_of, replay
from sharestate.replay.combiner import LATEST

#: What a run keeps until it is done: cached DataFrames, and the JVM passes' tees.
Held = DataFrame | jvm.Tee


@dataclass
class Results:
    """The run's tables as DataFrames, plus the inputs they came from (for counting)."""

    share_state_records: DataFrame
    share_partition_state: DataFrame
    share_partition_history: DataFrame
    share_group_records: DataFrame | None
    quarantine: DataFrame
    delivery_counts: DataFrame
    poison_messages: DataFrame
    archived_messages: DataFrame
    share_partition_segments: DataFrame
    pruning_cutoff: DataFrame
    findings: DataFrame
    #: Only with --consumer-offsets.
    share_groups: DataFrame | None = None
    #: Only with --end-offsets.
    share_partition_lag: DataFrame | None = None
    #: Both archived-range tables in one (with `reason`), for counting; not written.
    archived_ranges: DataFrame | None = None
    inputs: dict[str, Export] = field(default_factory=dict)
    _cached: list[Held] = field(default_factory=list, repr=False)

    def tables(self) -> dict[str, DataFrame]:
        """Output table name -> DataFrame, in the order they are written."""
        out = _replayed_tables(self)
        out["delivery_counts"] = self.delivery_counts
        out["poison_messages"] = self.poison_messages
        out["archived_messages"] = self.archived_messages
        out["share_partition_segments"] = self.share_partition_segments
        out["pruning_cutoff"] = self.pruning_cutoff
        if self.share_groups is not None:
            out["share_groups"] = self.share_groups
        if self.share_partition_lag is not None:
            out["share_partition_lag"] = self.share_partition_lag
        out["findings"] = self.findings
        return out

    def unpersist(self) -> None:
        for df in self._cached:
            df.unpersist()


def _replayed_tables(tables: Results | ReplayedExports) -> dict[str, DataFrame]:
    """The tables written first (decoded, replayed, quarantined), in the order written."""
    # The history before the state: on the JVM, the pass that folds the history leaves
    # the state's rows behind (`sharestate.replay.Replayed`), so the state is not folded
    # again.
    out = {
        "share_state_records": tables.share_state_records,
        "share_partition_history": tables.share_partition_history,
        "share_partition_state": tables.share_partition_state,
    }
    if tables.share_group_records is not None:
        out["share_group_records"] = tables.share_group_records
    out["quarantine"] = tables.quarantine
    return out


def _decoded_and_cached(
    decoded: spark_decode.Decoded, cache: list[Held], *, only_new_rows: bool, read_back: bool
) -> None:
    # Records and quarantine are two filters of one decode, and six tables read them; cache
    # the decode so it runs once (Spark's cache matches the shared sub-plan). An incremental
    # run's new rows are few: cache them whatever decoded them, else every table that
    # reads them scans the whole export again for the rows above the checkpoint. Rows the
    # JVM decoded are not cached when the audits read the tables as written (`read_back`):
    # decoding again to write them cost less than building Spark's cache (at 10M records,
    # 29.5 s from the export to the replay's shuffle with the cache, 10.5 s without, and
    # the records were written as fast from a second decode as from the cache); else they
    # go to disk only: in memory, 10M of them ran a 2 GiB local driver out of heap.
    if decoded.worth_caching or only_new_rows:
        cache.append(decoded.all_rows.persist(StorageLevel.MEMORY_AND_DISK))
    elif not read_back:
        cache.append(decoded.all_rows.persist(StorageLevel.DISK_ONLY))
    if decoded.tee is not None:
        cache.append(decoded.tee)


def _only_new(
    export: Export, source: str, previous: PreviousOutput | None, cache: list[Held]
) -> Export:
    if previous is None:
        return export
    done = processed(previous.prior, source, "partition", "offset")
    # The rows above the checkpoint are few; keep them rather than filter the whole export
    # again for each reader (decoding, the wrong-topic check, the summary, the checkpoint).
    new_rows = export.rows.filter(~done).persist(StorageLevel.MEMORY_AND_DISK)
    cache.append(new_rows)
    return replace(export, rows=new_rows, already_processed=export.rows.filter(done))


def _counted(export: Export) -> Export:
    # Counted once, for the summary and so that an export without duplicates (the usual
    # case) is not shuffled to drop them.
    return replace(export, counts=count_rows(export.rows))


def _with_stored(
    new: DataFrame, previous: PreviousOutput | None, table: str, source: str | None
) -> DataFrame:
    """`new` plus what earlier complete runs wrote to `table` (for the audits)."""
    if previous is None or table not in previous.tables:
        return new
    stored = previous.tables[table].filter(f"NOT ({new_rows_predicate(previous.prior, source)})")
    return stored.unionByName(new)


def _carried(
    previous: PreviousOutput | None,
    config: JobConfig,
    new_records: DataFrame,
    new_history: DataFrame,
    new_quarantine: DataFrame,
) -> CarriedAudits | None:
    """What the audits go on from in an incremental run: the earlier run's ranges, if it
    wrote them with the same --delivery-count-limit (else they are recomputed)."""
    if previous is None or any(name not in previous.tables for name in CARRIED_TABLES):
        return None
    if previous.prior.carried.get("delivery_count_limit") != config.delivery_count_limit:
        return None
    poison = previous.tables["poison_messages"].withColumn("reason", F.lit(REASON_DELIVERY_LIMIT))
    ranges = poison.unionByName(previous.tables["archived_messages"])
    return CarriedAudits(
        new_records=new_records,
        archived_ranges=ranges,
        new_history=new_history,
        new_quarantine=new_quarantine,
        findings=previous.tables["findings"],
        pruning_cutoff=previous.tables["pruning_cutoff"],
        segments=previous.tables["share_partition_segments"],
    )


@dataclass
class ReplayedExports:
    """The exports decoded and replayed, before the audits (`audit_replayed`): the tables
    the job writes first, and what the audits read besides them."""

    share_state_records: DataFrame
    share_partition_state: DataFrame
    share_partition_history: DataFrame
    share_group_records: DataFrame | None
    quarantine: DataFrame
    inputs: dict[str, Export]
    #: What the audits see: the records and quarantine within --as-of, and the group
    #: records (the stored ones too, in an incremental run).
    audited_records: DataFrame
    audited_quarantine: DataFrame
    audited_groups: DataFrame | None
    end_offsets: DataFrame | None
    cached: list[Held] = field(default_factory=list, repr=False)

    def tables(self) -> dict[str, DataFrame]:
        """The per-record tables and the state, in the order the job writes them."""
        return _replayed_tables(self)

    def unpersist(self) -> None:
        for df in self.cached:
            df.unpersist()


def compute(
    spark: SparkSession, config: JobConfig, previous: PreviousOutput | None = None
) -> Results:
    """Read, decode and replay the exports named in `config`, and audit them; nothing is
    written.

    With `previous` (`--mode incremental`), only rows above its checkpoint are read and
    replayed, on top of its stored state: the per-record tables hold this run's new rows,
    `share_partition_state` and the audit tables everything, as a full run would."""
    with unreadable_files_named(config.read_paths()):
        replayed = replay_exports(spark, config, previous, keep_history=True)
        return audit_replayed(replayed, config, previous)


def replay_exports(
    spark: SparkSession,
    config: JobConfig,
    previous: PreviousOutput | None = None,
    *,
    keep_history: bool = False,
    read_back: bool = False,
) -> ReplayedExports:
    """The first half of `compute`: decode and replay, no audits.

    The state is cached (one row per share-partition, read by most audit tables). The
    history is not, unless `keep_history`: caching the fold's 10M rows cost more than
    folding them again (at 10M records, decode + replay with both tables to Spark's noop
    sink took 44-50 s with the fold's output cached and 30-37 s without). The job writes
    the history straight from the fold and gives the audits what it wrote
    (`audit_replayed(written=...)`). `keep_history` is for callers that read the history
    DataFrame several times (`compute`, notebooks), and for incremental runs, whose new
    history is small.

    `read_back`: the caller writes the per-record tables first and gives the audits those
    tables as written, the records and quarantine too, so the share-state decode is not
    cached (the job's full runs)."""
    share_state = read_export(
        spark,
        config.share_state,
        what="--share-state",
        topic=SHARE_STATE_TOPIC,
        input_format=config.input_format,
    )
    cached: list[Held] = []
    share_state = _counted(_only_new(share_state, "share_state", previous, cached))
    inputs = {"share_state": share_state}
    end_offsets = (
        read_end_offsets(spark, config.end_offsets, config.input_format)
        if config.end_offsets
        else None
    )
    state = spark_decode.decode_share_state(
        deduplicate(share_state.rows, share_state.counts), config.kafka_version
    )
    _decoded_and_cached(state, cached, only_new_rows=previous is not None, read_back=read_back)
    quarantine = state.quarantine
    offset, moment = config.as_of_offset, config.as_of_timestamp
    # The audits see what the replay sees: --as-of limits the state-topic rows, and (a
    # timestamp) the group records too.
    audited_quarantine = as_of(state.quarantine, source_offset=offset, timestamp=moment)
    group_records = audited_groups = None
    if config.consumer_offsets:
        offsets = read_export(
            spark,
            config.consumer_offsets,
            what="--consumer-offsets",
            topic=CONSUMER_OFFSETS_TOPIC,
            input_format=config.input_format,
        )
        offsets = _counted(_only_new(offsets, "consumer_offsets", previous, cached))
        inputs["consumer_offsets"] = offsets
        groups = spark_decode.decode_consumer_offsets(
            deduplicate(offsets.rows, offsets.counts), config.kafka_version
        )
        _decoded_and_cached(groups, cached, only_new_rows=previous is not None, read_back=False)
        group_records = groups.records
        quarantine = quarantine.unionByName(groups.quarantine)
        audited_groups = as_of(group_records, timestamp=moment)
        audited_quarantine = audited_quarantine.unionByName(
            as_of(groups.quarantine, timestamp=moment)
        )
    replayed_records = as_of(state.records, source_offset=offset, timestamp=moment)
    prior_state = previous.tables.get("share_partition_state") if previous else None
    replayed = replay(
        replayed_records, parse_kafka_version(config.kafka_version) or LATEST, prior_state
    )
    if replayed.tee is not None:
        cached.append(replayed.tee)
    if keep_history:
        cached.append(replayed.folded.persist(StorageLevel.MEMORY_AND_DISK))
    # The fold also found when each start offset last moved (for the stall check), going
    # on from the stored state in an incremental run.
    final_state = replayed.state
    if prior_state is not None:  # share-partitions without new records keep their state
        untouched = prior_state.join(replayed.state.select(*KEY), list(KEY), "left_anti")
        final_state = untouched.unionByName(final_state)
    # One row per share-partition, read by most audit tables: keep it rather than fold
    # again each time.
    cached.append(final_state.persist(StorageLevel.MEMORY_AND_DISK))
    if audited_groups is not None:
        audited_groups = _with_stored(
            audited_groups, previous, "share_group_records", "consumer_offsets"
        )
    return ReplayedExports(
        share_state_records=state.records,
        share_partition_state=final_state,
        share_partition_history=replayed.history,
        share_group_records=group_records,
        quarantine=quarantine,
        inputs=inputs,
        audited_records=replayed_records,
        audited_quarantine=audited_quarantine,
        audited_groups=audited_groups,
        end_offsets=end_offsets,
        cached=cached,
    )


@dataclass(frozen=True)
class WrittenTables:
    """This run's rows of the per-record tables, read back as the job wrote them: a few
    columns of a written table cost less to read than folding or decoding again."""

    share_partition_history: DataFrame
    #: Only when the share-state decode was not cached (`replay_exports(read_back=True)`).
    share_state_records: DataFrame | None = None
    quarantine: DataFrame | None = None


def _audited_quarantine(quarantine: DataFrame, config: JobConfig) -> DataFrame:
    """The quarantine table's rows the audits see with --as-of, as `replay_exports` limits
    them: share-state rows by offset and time, group rows by time."""
    offset, moment = config.as_of_offset, config.as_of_timestamp
    if offset is None and moment is None:
        return quarantine
    share_state = F.col("source") == F.lit("share_state")
    return as_of(
        quarantine.filter(share_state), source_offset=offset, timestamp=moment
    ).unionByName(as_of(quarantine.filter(~share_state), timestamp=moment))


def audit_replayed(
    replayed: ReplayedExports,
    config: JobConfig,
    previous: PreviousOutput | None = None,
    written: WrittenTables | None = None,
) -> Results:
    """The second half of `compute`: the audit tables. `written`: this run's per-record
    tables as the job wrote them; by default the audits read the DataFrames of
    `replay_exports` (the history from the fold, the records and quarantine decoded)."""
    history = replayed.share_partition_history
    if written is not None:
        history = written.share_partition_history
        if written.share_state_records is not None:
            records = as_of(
                written.share_state_records,
                source_offset=config.as_of_offset,
                timestamp=config.as_of_timestamp,
            )
            replayed = replace(replayed, audited_records=records)
        if written.quarantine is not None:
            quarantine = _audited_quarantine(written.quarantine, config)
            replayed = replace(replayed, audited_quarantine=quarantine)
    audits = audit(
        _with_stored(replayed.audited_records, previous, "share_state_records", "share_state"),
        replayed.share_partition_state,
        _with_stored(history, previous, "share_partition_history", "share_state"),
        _with_stored(replayed.audited_quarantine, previous, "quarantine", None),
        AuditOptions(
            delivery_count_limit=config.delivery_count_limit,
            stall_span_seconds=config.stall_span_seconds,
            state_topic_partitions=config.state_topic_partition_count,
        ),
        group_records=replayed.audited_groups,
        end_offsets=replayed.end_offsets,
        carried=_carried(
            previous,
            config,
            replayed.audited_records,
            history,
            replayed.audited_quarantine,
        ),
    )
    cached = replayed.cached
    cached.extend(small.persist(StorageLevel.MEMORY_AND_DISK) for small in audits.worth_caching())
    return Results(
        share_state_records=replayed.share_state_records,
        share_partition_state=replayed.share_partition_state,
        share_partition_history=replayed.share_partition_history,
        share_group_records=replayed.share_group_records,
        quarantine=replayed.quarantine,
        delivery_counts=audits.delivery_counts,
        poison_messages=audits.poison_messages,
        archived_messages=audits.archived_messages,
        share_partition_segments=audits.segments,
        pruning_cutoff=audits.pruning_cutoff,
        findings=audits.findings,
        share_groups=audits.share_groups,
        share_partition_lag=audits.share_partition_lag,
        archived_ranges=audits.archived_ranges,
        inputs=replayed.inputs,
        _cached=cached,
    )


def _count_by(df: DataFrame, column: str) -> dict[str, int]:
    return {
        str(row[column]): int(row["count"])
        for row in df.groupBy(column).count().orderBy(column).collect()
    }


def _counts_by_pair(df: DataFrame, first: str, second: str) -> list[tuple[str, str, int]]:
    """Rows per (first, second) value pair: one Spark job for two breakdowns."""
    rows = df.groupBy(first, second).count().collect()
    return [(row[first], row[second], int(row["count"])) for row in rows]


def _totals(pairs: list[tuple[str, str, int]], index: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for pair in pairs:
        if pair[index] is not None:
            out[str(pair[index])] = out.get(str(pair[index]), 0) + pair[2]
    return dict(sorted(out.items()))


def summarize(results: Results) -> dict[str, Any]:
    """Counts for the run summary; every number comes from the data."""
    quarantine_pairs = _counts_by_pair(results.quarantine, "source", "reason_kind")
    quarantine_by_source = _totals(quarantine_pairs, 0)
    summary: dict[str, Any] = {"inputs": {}}
    record_pairs = _counts_by_pair(results.share_state_records, "record_type", "layout")
    decoded_tables = {
        "share_state": results.share_state_records,
        "consumer_offsets": results.share_group_records,
    }
    for source, export in results.inputs.items():
        counts = export.counts or count_rows(export.rows)
        read, duplicates = counts.read, counts.duplicates
        decoded_df = decoded_tables[source]
        if source == "share_state":
            decoded = sum(count for _, _, count in record_pairs)
        else:
            decoded = decoded_df.count() if decoded_df is not None else 0
        quarantined = quarantine_by_source.get(source, 0)
        summary["inputs"][source] = {
            "path": export.path,
            "format": export.format,
            "rows_read": read,
            "duplicates_dropped": duplicates,
            "decoded": decoded,
            "quarantined": quarantined,
            "reconciled": read == duplicates + decoded + quarantined,
        }
        if export.already_processed is not None:  # --mode incremental
            summary["inputs"][source]["already_processed"] = export.already_processed.count()
    if "consumer_offsets" not in results.inputs:
        summary["inputs"]["consumer_offsets"] = {
            "skipped": "no --consumer-offsets given: group-metadata checks are skipped"
        }
    records = results.share_state_records
    keys = (
        records.groupBy(*KEY)
        .count()
        .agg(F.count(F.lit(1)).alias("keys"), F.countDistinct("group_id").alias("groups"))
        .first()
    )
    summary["share_state_records"] = {
        "by_record_type": _totals(record_pairs, 0),
        "by_layout": _totals(record_pairs, 1),
        "share_partitions": int(keys["keys"]) if keys else 0,
        "groups": int(keys["groups"]) if keys else 0,
    }
    state = results.share_partition_state
    summary["share_partition_state"] = {
        "share_partitions": state.count(),
        "deleted": state.filter(F.col("deleted")).count(),
    }
    if results.share_group_records is not None:
        groups = results.share_group_records
        summary["share_group_records"] = {
            "by_record_type": _count_by(groups, "record_type"),
            "share_groups": groups.filter(F.col("is_share_record"))
            .select("group_id")
            .distinct()
            .count(),
        }
    summary["quarantine"] = {
        "rows": sum(quarantine_by_source.values()),
        "by_reason_kind": _totals(quarantine_pairs, 1),
    }
    summary.update(_audit_summary(results))
    return summary


def _audit_summary(results: Results) -> dict[str, Any]:
    """Counts of the audit tables, one small Spark job per table."""
    out: dict[str, Any] = {}
    ranges = results.archived_ranges
    if ranges is None:  # Results built by hand: count the two tables themselves
        ranges = results.poison_messages.withColumn(
            "reason", F.lit(REASON_DELIVERY_LIMIT)
        ).unionByName(results.archived_messages, allowMissingColumns=True)
    by_reason = {
        row["reason"]: (int(row["ranges"]), int(row["offsets"] or 0))
        for row in ranges.groupBy("reason")
        .agg(F.count(F.lit(1)).alias("ranges"), F.sum("offsets").alias("offsets"))
        .collect()
    }
    poison = by_reason.pop(REASON_DELIVERY_LIMIT, (0, 0))
    out["poison_messages"] = {"ranges": poison[0], "offsets": poison[1]}
    out["archived_messages"] = {
        "ranges": sum(r for r, _ in by_reason.values()),
        "offsets": sum(o for _, o in by_reason.values()),
        "by_reason": {reason: {"ranges": r, "offsets": o} for reason, (r, o) in by_reason.items()},
    }
    by_code: dict[str, dict[str, int]] = {}
    by_severity = dict.fromkeys(SEVERITIES, 0)
    for row in results.findings.groupBy("severity", "code").count().collect():
        by_severity[row["severity"]] = by_severity.get(row["severity"], 0) + int(row["count"])
        by_code.setdefault(row["severity"], {})[row["code"]] = int(row["count"])
    out["findings"] = {
        "by_severity": by_severity,
        "by_code": {severity: dict(sorted(codes.items())) for severity, codes in by_code.items()},
    }
    pruning = results.pruning_cutoff.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.count(F.when(F.col("prunable"), 1)).alias("prunable"),
        F.sum("records_before_cutoff").alias("records_before_cutoff"),
    ).first()
    if pruning is not None:
        out["pruning_cutoff"] = {
            "partitions": int(pruning["partitions"]),
            "prunable": int(pruning["prunable"]),
            "records_before_cutoff": int(pruning["records_before_cutoff"] or 0),
        }
    if results.share_groups is not None:
        groups = results.share_groups.agg(
            F.count(F.lit(1)).alias("groups"),
            F.count(F.when(F.col("deleted"), 1)).alias("deleted"),
            F.sum("member_count").alias("members"),
        ).first()
        if groups is not None:
            out["share_groups"] = {
                "groups": int(groups["groups"]),
                "deleted": int(groups["deleted"]),
                "members": int(groups["members"] or 0),
            }
    if results.share_partition_lag is not None:
        lag = results.share_partition_lag.agg(
            F.count(F.lit(1)).alias("share_partitions"),
            F.count("lag").alias("with_lag"),
            F.sum("lag").alias("total_lag"),
        ).first()
        if lag is not None:
            out["lag"] = {
                "share_partitions": int(lag["share_partitions"]),
                "with_lag": int(lag["with_lag"]),
                "total_lag": int(lag["total_lag"] or 0),
            }
    return out
