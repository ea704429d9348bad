"""An incremental run's audit tables that are not one row per replayed key: the pruning
cut-off, the share groups, the lag and the findings, each from state-sized inputs (the whole
state, the whole segments table, the groups) and what the checkpoint carries on (the
exported extents, the quarantine's counts, the latest group record's time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.arrow_keys import distinct_keys, rows_by_key, with_keys, without_keys
from sharestate.audits import findings as finding_rules
from sharestate.audits import (
    gaps_arrow,
    groups_arrow,
    pruning_arrow,
    segments_arrow,
)
from sharestate.audits.findings import FINDINGS_SCHEMA, PLACEMENT_RULES, STATE_SIZED_RULES
from sharestate.audits.findings import records as finding_records
from sharestate.audits.findings.records import replay_error, share_state_gap, share_state_gap_rows
from sharestate.audits.findings.registry import Source
from sharestate.audits.lag import share_partition_lag
from sharestate.decode.columns import KEY
from sharestate.io.checkpoint import Checkpoint
from sharestate.io.exports import read_end_offsets
from sharestate.job.config import JobConfig
from sharestate.job.increment import Increment
from sharestate.job.side_by_side import run_side_by_side
from sharestate.places import arrow_frame

_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")

SHARE_STATE = Source.SHARE_STATE.value
CONSUMER_OFFSETS = Source.CONSUMER_OFFSETS.value


def known_gaps(findings: pa.Table) -> pa.Table:
    """The gaps of `__share_group_state` the stored findings list: source_partition, _from,
    _to."""
    gaps = findings.filter(finding_rules.rows_of(findings, [share_state_gap]))
    start = gaps.column("source_offset")
    return pa.table(
        {
            "source_partition": gaps.column("source_partition"),
            "_from": start,
            "_to": pc.subtract(pc.add(start, gaps.column("affected")), 1),
        }
    )


def _gaps(increment: Increment, stored_findings: pa.Table, checkpoint: Checkpoint) -> pa.Table:
    """The `__share_group_state` gaps after this run (`gaps_arrow.gaps_after`), on the
    driver: from the stored gaps, the checkpoint's extents and the run's positions."""
    extents = checkpoint.extents.get(SHARE_STATE, {})
    return gaps_arrow.gaps_after(
        known_gaps(stored_findings),
        increment.share_state_positions,
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

    pruning_cutoff: pa.Table
    share_groups: pa.Table | None
    share_partition_lag: pa.Table | None
    findings: pa.Table
    #: The quarantine's counts per (source, reason_kind) after this run.
    quarantine_kinds: pa.Table


@dataclass(frozen=True)
class AuditInputs:
    """What pruning_cutoff and findings read besides the per-key steps' results: the
    `__share_group_state` gaps after the run, the per-record rules' findings after it, the
    quarantine's counts, the share groups and lag (written already), and the findings of
    the rules over state-sized inputs (`STATE_SIZED_RULES`), all on the driver."""

    gaps: pa.Table
    per_record_findings: pa.Table
    kinds: pa.Table
    groups: pa.Table | None
    lag: pa.Table | None
    state_sized_findings: pa.Table


def prepare_audits(
    increment: Increment, config: JobConfig, checkpoint: Checkpoint, stored_findings: pa.Table
) -> AuditInputs:
    """Bring share_groups and share_partition_lag up to date, and compute what the other
    audit tables read that no per-key step changes: it needs the replay's state, not the
    segments or ranges, so it runs beside their steps. The groups and lag, and the gaps and
    per-record findings, depend on nothing of each other's: side by side (the lag's is a
    Spark query). Then the rules over state-sized inputs, which read the groups, lag and
    quarantine counts (every finding rule but the per-record, per-share-partition and
    placement ones): found here, by the rules (`sharestate.audits.findings`), the findings' own
    step at the end of the run has only rows to gather. `stored_findings`: the findings
    table before the run."""
    rows = increment.rows

    def records_audits() -> tuple[pa.Table, pa.Table, pa.Table]:
        gaps = _gaps(increment, stored_findings, checkpoint)
        per_record = _per_record_rows(increment, stored_findings, gaps)
        return gaps, per_record, _quarantine_kinds(checkpoint, rows.quarantine)

    def groups_and_lag() -> tuple[pa.Table | None, pa.Table | None]:
        return _write_groups(increment), _write_lag(increment, config)

    (gaps, per_record, kinds), (groups, lag) = run_side_by_side([records_audits, groups_and_lag])
    group_positions = (
        _group_positions(rows.group_records, rows.quarantine)
        if rows.group_records is not None
        else None
    )
    inputs = {
        "state": increment.state,
        "quarantine_kinds": kinds,
        "stall_span_seconds": config.stall_span_seconds,
        "consumer_offsets_extents": _consumer_offsets_extents(checkpoint, group_positions),
        "group_records": _group_records_end(checkpoint, group_positions),
        "groups": groups,
        "lag": lag,
        "backfilled": rows.backfilled,
    }
    found = finding_rules.findings_of(STATE_SIZED_RULES, inputs)
    # Some rule always runs (decode_quarantine reads the counts every run has).
    assert found is not None
    return AuditInputs(gaps, per_record, kinds, groups, lag, found)


def _per_record_rows(increment: Increment, stored_findings: pa.Table, gaps: pa.Table) -> pa.Table:
    """The per-record rules' findings after this run: the stored replay errors (less those
    of the keys replayed again) with the new history's, and the gaps after this run."""
    stored = stored_findings.select(FINDINGS_SCHEMA.names).cast(FINDINGS_SCHEMA)
    errors = stored.filter(finding_rules.rows_of(stored, [replay_error]))
    kept = errors.take(rows_by_key(errors, increment.again_keys, list(KEY), "left anti"))
    new_errors = replay_error.run({"history": increment.history})
    assert new_errors is not None
    return finding_rules.concat([kept, new_errors, share_state_gap_rows(gaps)])


def per_share_partition_rows(
    increment: Increment, stored_findings: pa.Table, config: JobConfig
) -> pa.Table:
    """The per-share-partition and placement rules' findings after this run, on the driver
    (`sharestate.audits.findings`): the stored per-share-partition rows of the
    untouched keys with the touched keys' found again from their segments and delivery
    counts, and the placement rules' rows from every share-partition's placements. They
    read the touched keys' segments and the placements, which the segments' step computes
    on the driver before its commits, and nothing the other findings read: so they are
    found beside those commits (`write_segments`), off the findings' own path, which then
    only gathers rows."""
    found = finding_rules.per_share_partition_findings(
        stored_findings,
        increment.touched_keys,
        segment_starts=segments_arrow.segment_starts(increment.touched_segments),
        delivery_counts=increment.delivery_counts,
        delivery_count_limit=increment.delivery_count_limit,
    )
    placed = finding_rules.findings_of(
        PLACEMENT_RULES,
        {
            "placements": increment.placement_rows,
            "state_topic_partitions": config.state_topic_partition_count,
        },
    )
    return finding_rules.concat([found, placed] if placed is not None else [found])


def write_audits(
    increment: Increment, prepared: AuditInputs, per_share_partition: pa.Table
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


def _write_pruning(increment: Increment, gaps: pa.Table) -> pa.Table:
    """pruning_cutoff: a partition's cut-off comes from the placements of the
    share-partitions on it, and the records before it from its exported extent and gaps; so
    only the partitions with new positions or changed segments change, and only their rows
    are replaced. Computed on the driver (`pruning_arrow`: a row per partition, from the
    placements the segments' step left there). Returns the whole table after the change."""
    store = increment.store
    stored = store.read_arrow("pruning_cutoff")
    positions = increment.share_state_positions
    table = pruning_arrow.carried_pruning_cutoff(increment.placement_rows, stored, positions, gaps)
    changed_partitions = distinct_keys(
        pa.concat_tables(
            [
                positions.select(["source_partition"]),
                increment.history.select(["source_partition"]).cast(
                    positions.select(["source_partition"]).schema
                ),
            ]
        ),
        ["source_partition"],
    )
    rows = with_keys(table, changed_partitions, ["source_partition"]).cast(stored.schema)
    increment.record(
        store.replace_arrow("pruning_cutoff", rows, changed_partitions, ["source_partition"])
    )
    kept = without_keys(stored, changed_partitions, ["source_partition"])
    return pa.concat_tables([kept, rows])


def _write_groups(increment: Increment) -> pa.Table | None:
    """share_groups: a group with new records is computed again from its stored records and
    the new ones (the latest record of each record key decides), and its row replaced
    (`groups_arrow.share_groups`, from the new group records and the touched groups' stored
    records). Returns the whole table after the change."""
    group_records = increment.rows.group_records
    if group_records is None:
        return None
    store = increment.store
    stored = store.read_arrow("share_groups")
    share = group_records.filter(pc.fill_null(group_records.column("is_share_record"), False))
    touched = distinct_keys(share, ["group_id"])
    if touched.num_rows == 0:
        return stored
    stored_records = store.read_arrow_joined("share_group_records", touched, ["group_id"])
    records = pa.concat_tables(
        [
            stored_records.select(group_records.column_names).cast(group_records.schema),
            with_keys(group_records, touched, ["group_id"]),
        ]
    )
    rows = groups_arrow.share_groups(records).select(stored.column_names).cast(stored.schema)
    increment.record(store.replace_arrow("share_groups", rows, touched, ["group_id"]))
    return pa.concat_tables([without_keys(stored, touched, ["group_id"]), rows])


def _write_lag(increment: Increment, config: JobConfig) -> pa.Table | None:
    """share_partition_lag: from the whole state and the --end-offsets table, which its
    user replaces whole between runs, so written whole (a row per share-partition). Topic
    names come from every group record, stored and new. One Spark query (it joins the
    --end-offsets table), its rows brought to the driver."""
    if not config.end_offsets:
        return None
    store = increment.store
    spark = store.spark
    end_offsets = read_end_offsets(spark, config.end_offsets, config.input_format)
    names = None
    if config.consumer_offsets:
        names = _topic_names(increment)
    state = arrow_frame(spark, increment.state)
    lag: pa.Table = share_partition_lag(state, end_offsets, names).toArrow()
    increment.record(store.overwrite_arrow("share_partition_lag", lag))
    return lag


def _topic_names(increment: Increment) -> DataFrame:
    """(topic_id, topic_name) of every group record, stored and new (`groups_arrow`), as
    the lag reads them: only the stored share records' topic lists come to the driver."""
    store = increment.store
    columns = ["is_share_record", "tombstone", *groups_arrow.TOPIC_LIST_COLUMNS]
    stored = store.read("share_group_records", small=False).filter(F.col("is_share_record"))
    names = [groups_arrow.topic_names(stored.select(*columns).toArrow())]
    if increment.rows.group_records is not None:
        names.append(groups_arrow.topic_names(increment.rows.group_records))
    both = distinct_keys(pa.concat_tables(names), ["topic_id", "topic_name"])
    return arrow_frame(store.spark, both)


def _write_findings(
    increment: Increment, prepared: AuditInputs, per_share_partition: pa.Table
) -> pa.Table:
    """findings: the rows every rule found after this run, on the driver (`prepared`: the
    per-record and state-sized rules; `per_share_partition`: the per-share-partition and
    placement rules). Written whole from there (it is small), as one file."""
    rows = finding_rules.concat(
        [prepared.per_record_findings, prepared.state_sized_findings, per_share_partition]
    )
    increment.record(increment.store.overwrite_arrow("findings", rows))
    return rows


def _quarantine_kinds(checkpoint: Checkpoint, quarantine: pa.Table) -> pa.Table:
    """The quarantine's counts per (source, reason_kind): the checkpoint's plus the new
    rows' (`quarantine_kinds` in Arrow: the first row the lowest in log order)."""
    new = finding_records.quarantine_kinds(quarantine)
    combined: dict[tuple[Any, Any], list[Any]] = {}
    stored = [tuple(kind) for kind in checkpoint.totals.get("quarantine_kinds") or []]
    for source, kind, rows, partition, offset in [*stored, *_kind_tuples(new)]:
        at = combined.setdefault((source, kind), [0, None])
        at[0] += int(rows)
        first = (partition, offset)
        if at[1] is None or _null_first(first) < _null_first(at[1]):
            at[1] = first
    names = finding_records.QUARANTINE_KINDS_SCHEMA.names
    return pa.Table.from_pylist(
        [
            dict(zip(names, (source, kind, rows, *first), strict=True))
            for (source, kind), (rows, first) in combined.items()
        ],
        schema=finding_records.QUARANTINE_KINDS_SCHEMA,
    )


def _kind_tuples(kinds: pa.Table) -> list[tuple[Any, ...]]:
    return [tuple(row.values()) for row in kinds.to_pylist()]


def _null_first(values: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """A sort key that orders nulls first, field by field (as Spark's `min` of a struct)."""
    return tuple((value is not None, value) for value in values)


def _group_positions(group_records: pa.Table, quarantine: pa.Table) -> pa.Table:
    """The new `__consumer_offsets` rows' positions and times (decoded and quarantined):
    what the extents and the export's end read."""
    kept = pc.and_kleene(
        pc.equal(quarantine.column("source"), CONSUMER_OFFSETS),
        pc.not_equal(quarantine.column("reason_kind"), "wrong topic"),
    )
    quarantined = quarantine.filter(pc.fill_null(kept, False))
    columns = ["source_partition", "source_offset", "source_timestamp"]
    parts = [
        table.select(columns).append_column(
            "_decoded", pa.array([decoded] * table.num_rows, pa.bool_())
        )
        for table, decoded in ((group_records, True), (quarantined, False))
    ]
    return pa.concat_tables([parts[0], parts[1].cast(parts[0].schema)])


def _consumer_offsets_extents(
    checkpoint: Checkpoint, positions: pa.Table | None
) -> pa.Table | None:
    """The `__consumer_offsets` export's extents: the checkpoint's widened by the new."""
    if positions is None:
        return None
    stored = checkpoint.extents.get(CONSUMER_OFFSETS, {})
    extents = {p: (e.rows, e.first, e.last) for p, e in stored.items()}
    new = gaps_arrow.position_extents(positions.select(["source_partition", "source_offset"]))
    for row in new.to_pylist():
        partition = row["source_partition"]
        before = extents.get(partition)
        found = (row["rows"], row["first_offset"], row["last_offset"])
        extents[partition] = (
            found
            if before is None
            else (before[0] + found[0], min(before[1], found[1]), max(before[2], found[2]))
        )
    return pa.table(
        {
            "source_partition": list(extents),
            "rows": [e[0] for e in extents.values()],
            "first_offset": [e[1] for e in extents.values()],
            "last_offset": [e[2] for e in extents.values()],
        }
    ).cast(gaps_arrow.EXTENTS_SCHEMA)


def _group_records_end(checkpoint: Checkpoint, positions: pa.Table | None) -> pa.Table | None:
    """The group records as the findings read them: only their latest record time (the
    rules that read them take its maximum), the checkpoint's or a new decoded record's."""
    if positions is None:
        return None
    times = positions.filter(positions.column("_decoded")).column("source_timestamp")
    times = times.cast(_TIMESTAMP)
    stored_end: str | None = checkpoint.totals.get("consumer_offsets_end")
    if stored_end is not None:
        end = datetime.fromisoformat(stored_end)
        if end.tzinfo is None:  # written as Spark gives a timestamp: the process's local time
            end = end.astimezone()
        times = pa.chunked_array([*times.chunks, pa.array([end], _TIMESTAMP)], _TIMESTAMP)
    return pa.table({"source_timestamp": times})
