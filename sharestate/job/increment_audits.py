"""An incremental run's audit tables that are not one row per replayed key: the pruning
cut-off, the share groups, the lag and the findings, each from state-sized inputs (the whole
state, the whole segments table, the groups) and what the checkpoint carries on (the
exported extents, the quarantine's counts, the latest group record's time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.arrow_keys import distinct_keys, with_keys, without_keys
from sharestate.audits import (
    exported_positions,
    gaps_arrow,
    position_extents,
    pruning_arrow,
    quarantine_kinds,
    segments_arrow,
    share_groups,
    share_partition_lag,
    topic_names,
)
from sharestate.audits.findings import (
    FINDINGS_SCHEMA,
    PLACEMENT_RULES,
    STATE_SIZED_RULES,
    findings_of,
    per_share_partition_findings,
)
from sharestate.audits.findings.records import replay_error, share_state_gap, share_state_gap_rows
from sharestate.audits.findings.registry import Source
from sharestate.decode.columns import KEY
from sharestate.io.checkpoint import Checkpoint
from sharestate.io.exports import read_end_offsets
from sharestate.io.store import arrow_frame
from sharestate.job.config import JobConfig
from sharestate.job.increment import Increment
from sharestate.job.side_by_side import run_side_by_side

SHARE_STATE = Source.SHARE_STATE.value
CONSUMER_OFFSETS = Source.CONSUMER_OFFSETS.value


def known_gaps(findings: DataFrame) -> DataFrame:
    """The gaps of `__share_group_state` the stored findings list: partition, _from, _to."""
    return findings.filter(share_state_gap.matches()).select(
        F.col("source_partition").alias("partition"),
        F.col("source_offset").alias("_from"),
        (F.col("source_offset") + F.col("affected") - 1).alias("_to"),
    )


def _gaps(increment: Increment, stored_findings: DataFrame, checkpoint: Checkpoint) -> pa.Table:
    """The `__share_group_state` gaps after this run (`gaps_arrow.gaps_after`), on the
    driver: from the stored gaps, the checkpoint's extents and the run's positions."""
    stored = known_gaps(stored_findings).withColumnRenamed("partition", "source_partition")
    extents = checkpoint.extents.get(SHARE_STATE, {})
    return gaps_arrow.gaps_after(
        stored.toArrow(),
        increment.share_state_positions(),
        pa.table(
            {
                "source_partition": list(extents),
                "rows": [e.rows for e in extents.values()],
                "first_offset": [e.first for e in extents.values()],
                "last_offset": [e.last for e in extents.values()],
            }
        ).cast(gaps_arrow.EXTENTS_SCHEMA),
    )


@dataclass
class AuditTables:
    """The audit tables an incremental run keeps whole for its findings and summary."""

    pruning_cutoff: DataFrame
    share_groups: DataFrame | None
    share_partition_lag: DataFrame | None
    findings: DataFrame
    #: The quarantine's counts per (source, reason_kind) after this run.
    quarantine_kinds: DataFrame


@dataclass(frozen=True)
class AuditInputs:
    """What pruning_cutoff and findings read besides the per-key steps' results: the
    `__share_group_state` gaps after the run (on the driver), the per-record rules'
    findings after it, the quarantine's counts, the share groups and lag (written already),
    and the findings of the rules over state-sized inputs (`STATE_SIZED_RULES`)."""

    gaps: pa.Table
    per_record_findings: DataFrame
    kinds: DataFrame
    groups: DataFrame | None
    lag: DataFrame | None
    state_sized_findings: DataFrame


def prepare_audits(
    increment: Increment,
    config: JobConfig,
    checkpoint: Checkpoint,
    *,
    quarantine: DataFrame,
    group_records: DataFrame | None,
    stored_findings: DataFrame,
    backfilled: DataFrame,
) -> AuditInputs:
    """Bring share_groups and share_partition_lag up to date, and compute what the other
    audit tables read that no per-key step changes: it needs the replay's state, not the
    segments or ranges, so it runs beside their steps. The groups and lag, and the
    positions, gaps and per-record findings, depend on nothing of each other's: side by
    side. Then the rules over state-sized inputs, which read the groups, lag and quarantine
    counts (every finding rule but the per-record, per-share-partition and placement ones):
    found here, the findings' own step at the end of the run has only the placement rules
    left to run. `backfilled`: source, source_partition, source_offset of the rows that
    arrived below the checkpoint."""

    def records_audits() -> tuple[pa.Table, DataFrame, DataFrame]:
        spark = increment.store.spark
        gaps = _gaps(increment, stored_findings, checkpoint)
        gap_rows = share_state_gap_rows(arrow_frame(spark, gaps))
        per_record = increment.keep(_per_record_rows(increment, stored_findings, gap_rows))
        kinds = increment.keep(_quarantine_kinds(spark, checkpoint, quarantine))
        return gaps, per_record, kinds

    def groups_and_lag() -> tuple[DataFrame | None, DataFrame | None]:
        return _write_groups(increment, group_records), _write_lag(increment, config)

    (gaps, per_record, kinds), (groups, lag) = run_side_by_side([records_audits, groups_and_lag])
    spark = increment.store.spark
    inputs = {
        "state": increment.state,
        "quarantine_kinds": kinds,
        "stall_span_seconds": config.stall_span_seconds,
        "consumer_offsets_extents": _consumer_offsets_extents(
            spark, checkpoint, group_records, quarantine
        ),
        "group_records": _group_records_end(spark, checkpoint, group_records),
        "groups": groups,
        "lag": lag,
        "backfilled": backfilled,
    }
    found = findings_of(STATE_SIZED_RULES, inputs)
    # Some rule always runs (decode_quarantine reads the counts every run has).
    assert found is not None
    state_sized = increment.keep(found)
    return AuditInputs(gaps, per_record, kinds, groups, lag, state_sized)


def _per_record_rows(
    increment: Increment, stored_findings: DataFrame, gaps: DataFrame
) -> DataFrame:
    """The per-record rules' findings after this run: the stored replay errors (less those
    of the keys replayed again) with the new history's, and the gaps after this run."""
    stored_errors = (
        stored_findings.filter(replay_error.matches())
        .join(increment.again, list(KEY), "left_anti")
        .select(*stored_findings.columns)
    )
    return stored_errors.unionByName(replay_error(increment.history)).unionByName(gaps)


def per_share_partition_rows(
    increment: Increment, stored_findings: DataFrame, config: JobConfig
) -> DataFrame:
    """The per-share-partition and placement rules' findings after this run, kept: the
    stored per-share-partition rows of the untouched keys with the touched keys' found
    again from their segments, state and delivery counts, and the placement rules' rows
    from every share-partition's placements. They read the touched keys' segments and the
    placements, which the segments' step computes on the driver before its commits, and
    nothing the other findings read: so they are found beside those commits
    (`write_segments`), off the findings' own path, which then only gathers rows."""
    spark = increment.store.spark
    found = per_share_partition_findings(
        stored_findings,
        increment.touched(),
        segment_starts=arrow_frame(
            spark, segments_arrow.segment_starts(increment.touched_segments)
        ),
        delivery_counts=arrow_frame(spark, increment.new_delivery_counts()),
        state=increment.state,
        delivery_count_limit=increment.delivery_count_limit,
    )
    placed = findings_of(
        PLACEMENT_RULES,
        {
            "placements": increment.placements,
            "state_topic_partitions": config.state_topic_partition_count,
        },
    )
    if placed is not None:
        found = found.unionByName(placed)
    return increment.keep(found)


def write_audits(
    increment: Increment, prepared: AuditInputs, per_share_partition: DataFrame
) -> AuditTables:
    """Bring pruning_cutoff and findings up to date, side by side (each changes only its
    own table). `per_share_partition`: `per_share_partition_rows`."""
    pruning, findings = run_side_by_side(
        [
            lambda: _write_pruning(increment, prepared.gaps),
            lambda: _write_findings(increment, prepared, per_share_partition),
        ]
    )
    return AuditTables(pruning, prepared.groups, prepared.lag, findings, prepared.kinds)


def _write_pruning(increment: Increment, gaps: pa.Table) -> DataFrame:
    """pruning_cutoff: a partition's cut-off comes from the placements of the
    share-partitions on it, and the records before it from its exported extent and gaps; so
    only the partitions with new positions or changed segments change, and only their rows
    are replaced. Computed on the driver (`pruning_arrow`: a row per partition, from the
    placements the segments' step left there). Returns the whole table after the change."""
    store = increment.store
    stored = store.read_arrow("pruning_cutoff")
    positions = increment.share_state_positions()
    table = pruning_arrow.carried_pruning_cutoff(increment.placement_rows, stored, positions, gaps)
    changed_partitions = distinct_keys(
        pa.concat_tables(
            [
                positions.select(["source_partition"]),
                increment.history_rows()
                .select(["source_partition"])
                .cast(positions.select(["source_partition"]).schema),
            ]
        ),
        ["source_partition"],
    )
    rows = with_keys(table, changed_partitions, ["source_partition"]).cast(stored.schema)
    increment.record(
        store.replace_arrow("pruning_cutoff", rows, changed_partitions, ["source_partition"])
    )
    kept = without_keys(stored, changed_partitions, ["source_partition"])
    return arrow_frame(store.spark, pa.concat_tables([kept, rows]))


def _write_groups(increment: Increment, group_records: DataFrame | None) -> DataFrame | None:
    """share_groups: a group with new records is computed again from its stored records and
    the new ones (the latest record of each record key decides), and its row replaced.
    Returns the whole table after the change."""
    if group_records is None:
        return None
    store = increment.store
    stored = increment.keep(store.read("share_groups"))
    # Few groups: collected once, they cost no further job wherever they are read.
    touched_ids = [
        (row["group_id"],)
        for row in group_records.filter(F.col("is_share_record"))
        .select("group_id")
        .distinct()
        .collect()
    ]
    if not touched_ids:
        return stored
    touched = store.spark.createDataFrame(touched_ids, "group_id string")
    records = (
        store.read("share_group_records", small=False)
        .join(touched, "group_id", "left_semi")
        .unionByName(group_records.join(touched, "group_id", "left_semi"))
    )
    rows = increment.keep(share_groups(records))
    increment.record(store.replace("share_groups", rows, touched, ["group_id"]))
    return increment.keep(stored.join(touched, "group_id", "left_anti").unionByName(rows))


def _write_lag(increment: Increment, config: JobConfig) -> DataFrame | None:
    """share_partition_lag: from the whole state and the --end-offsets table, which its
    user replaces whole between runs, so written whole (a row per share-partition). Topic
    names come from every group record, stored and new."""
    if not config.end_offsets:
        return None
    store = increment.store
    end_offsets = read_end_offsets(store.spark, config.end_offsets, config.input_format)
    names = None
    if config.consumer_offsets:
        names = topic_names(store.read("share_group_records", small=False))
        if increment.group_records is not None:
            names = names.unionByName(topic_names(increment.group_records)).distinct()
    lag = increment.keep(share_partition_lag(increment.state, end_offsets, names))
    increment.record(store.overwrite("share_partition_lag", lag))
    return lag


def _write_findings(
    increment: Increment, prepared: AuditInputs, per_share_partition: DataFrame
) -> DataFrame:
    """findings: the rows every rule found after this run, kept by the steps that found
    them (`prepared`: the per-record and state-sized rules; `per_share_partition`: the
    per-share-partition and placement rules). Written whole (it is small)."""
    parts = [prepared.per_record_findings, prepared.state_sized_findings, per_share_partition]
    findings = parts[0]
    for more in parts[1:]:
        findings = findings.unionByName(more)
    # Findings are few: collected once (one Spark job), written from the driver as one file.
    rows = findings.select(*FINDINGS_SCHEMA.fieldNames()).toArrow()
    increment.record(increment.store.overwrite_arrow("findings", rows))
    return arrow_frame(increment.store.spark, rows)


def _quarantine_kinds(
    spark: SparkSession, checkpoint: Checkpoint, quarantine: DataFrame
) -> DataFrame:
    """The quarantine's counts per (source, reason_kind): the checkpoint's plus the new."""
    kinds = quarantine_kinds(quarantine)
    stored = checkpoint.totals.get("quarantine_kinds") or []
    if stored:
        kinds = kinds.unionByName(
            spark.createDataFrame(
                [tuple(k) for k in stored],
                "source string, reason_kind string, rows bigint,"
                " first_source_partition int, first_source_offset bigint",
            )
        )
    first = F.struct("first_source_partition", "first_source_offset")
    combined = kinds.groupBy("source", "reason_kind").agg(
        F.sum("rows").cast("long").alias("rows"), F.min(first).alias("_first")
    )
    return combined.select(
        "source",
        "reason_kind",
        "rows",
        F.col("_first.first_source_partition").alias("first_source_partition"),
        F.col("_first.first_source_offset").alias("first_source_offset"),
    )


def _consumer_offsets_extents(
    spark: SparkSession,
    checkpoint: Checkpoint,
    group_records: DataFrame | None,
    quarantine: DataFrame,
) -> DataFrame | None:
    """The `__consumer_offsets` export's extents: the checkpoint's widened by the new."""
    if group_records is None:
        return None
    new = position_extents(exported_positions(group_records, quarantine, CONSUMER_OFFSETS))
    stored = spark.createDataFrame(
        [
            (p, e.rows, e.first, e.last)
            for p, e in checkpoint.extents.get(CONSUMER_OFFSETS, {}).items()
        ],
        "source_partition int, rows bigint, first_offset bigint, last_offset bigint",
    )
    return (
        new.unionByName(stored)
        .groupBy("source_partition")
        .agg(
            F.sum("rows").cast("long").alias("rows"),
            F.min("first_offset").alias("first_offset"),
            F.max("last_offset").alias("last_offset"),
        )
    )


def _group_records_end(
    spark: SparkSession, checkpoint: Checkpoint, group_records: DataFrame | None
) -> DataFrame | None:
    """The group records as the findings read them: only their latest record time (the
    rules that read them take its maximum), the checkpoint's or a new record's."""
    if group_records is None:
        return None
    new = group_records.select("source_timestamp")
    stored_end: str | None = checkpoint.totals.get("consumer_offsets_end")
    if stored_end is None:
        return new
    end = spark.createDataFrame(
        [(datetime.fromisoformat(stored_end),)], "source_timestamp timestamp"
    )
    return new.unionByName(end)
