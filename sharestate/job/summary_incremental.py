"""An incremental run's summary, in the shape of a full run's (`sharestate.job.summary`):
its inputs are the run's new rows (counted by Spark, or on the driver when the increment
was read there), the tables' counts the previous running totals plus the run's, or the
state-sized tables' own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.job import summary_arrow
from sharestate.job.side_by_side import run_side_by_side
from sharestate.job.summary import (
    added_counts,
    count_by_pair,
    count_by_value,
    pair_totals,
    quarantine_kind_rows,
    ranges_summary,
    spark_finding_counts,
    spark_lag_counts,
    spark_pruning_counts,
    spark_share_group_counts,
)


@dataclass(frozen=True)
class NewRowCounts:
    """An incremental run's counts that need only its new rows and the state after the
    replay (`count_new_rows`): the run can count them beside its table steps."""

    #: Per input: this run's counts; the running totals with them.
    inputs: dict[str, Any]
    run_totals: dict[str, Any]
    #: The new records by record type (and layout).
    record_types: dict[str, dict[str, int]]
    #: The state's share-partitions, groups and deleted share-partitions (`_state_keys`).
    state_keys: Mapping[str, Any] | None


def count_new_rows(
    *,
    arrivals: dict[str, Any],
    decoded: dict[str, tuple[DataFrame | pa.Table, DataFrame | pa.Table]],
    state: DataFrame | pa.Table,
    previous: dict[str, Any],
) -> NewRowCounts:
    """The counts of an incremental run's summary that need only its new rows and the whole
    state. `arrivals`: input -> `Arrivals`; `decoded`: input -> (records, quarantine),
    each a DataFrame (counted by Spark) or on the driver (Arrow)."""
    (inputs, run_totals, record_types), keys = run_side_by_side(
        [lambda: _incremental_inputs(arrivals, decoded, previous), lambda: _state_keys(state)]
    )
    return NewRowCounts(inputs, run_totals, record_types, keys)


def incremental_summary(
    *,
    new_rows: NewRowCounts,
    quarantine_kinds: DataFrame | pa.Table,
    range_changes: dict[str, tuple[int, int]],
    findings: DataFrame | pa.Table,
    pruning_cutoff: DataFrame | pa.Table,
    share_groups: DataFrame | pa.Table | None,
    share_partition_lag: DataFrame | None,
    previous: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """An incremental run's summary, in the shape of a full run's: its inputs are this
    run's rows (and how many were already processed or backfilled: `new_rows`); the
    tables' counts are the whole output's, from the `previous` running totals plus this
    run's, or from the state-sized tables themselves. Returns the summary and the new
    running totals."""
    # Each count is a small Spark job: they run side by side.
    kinds, finding_counts, pruning, groups, lag = run_side_by_side(
        [
            lambda: quarantine_kind_rows(quarantine_kinds),
            lambda: (
                summary_arrow.finding_counts(findings)
                if isinstance(findings, pa.Table)
                else spark_finding_counts(findings)
            ),
            lambda: (
                summary_arrow.pruning_counts(pruning_cutoff)
                if isinstance(pruning_cutoff, pa.Table)
                else spark_pruning_counts(pruning_cutoff)
            ),
            lambda: (
                summary_arrow.share_group_counts(share_groups)
                if isinstance(share_groups, pa.Table)
                else spark_share_group_counts(share_groups)
                if share_groups is not None
                else None
            ),
            lambda: (
                spark_lag_counts(share_partition_lag) if share_partition_lag is not None else None
            ),
        ]
    )
    inputs, run_totals, record_types = new_rows.inputs, new_rows.run_totals, new_rows.record_types
    keys = new_rows.state_keys
    by_kind: dict[str, int] = {}
    for kind in kinds:
        by_kind[str(kind[1])] = by_kind.get(str(kind[1]), 0) + int(kind[2])
    summary = _replay_counts(keys, record_types, previous)
    summary = {"inputs": inputs, **summary}
    if "groups" in record_types and groups is not None:
        before = previous.get("share_group_records", {}).get("by_record_type", {})
        summary["share_group_records"] = {
            "by_record_type": added_counts(before, record_types["groups"]),
            "share_groups": groups["groups"],
        }
    summary["quarantine"] = {
        "rows": sum(by_kind.values()),
        "by_reason_kind": dict(sorted(by_kind.items())),
    }
    ranges = {r: list(v) for r, v in (previous.get("ranges") or {}).items()}
    for reason, (count, offsets) in range_changes.items():
        before_range = ranges.get(reason, [0, 0])
        ranges[reason] = [before_range[0] + count, before_range[1] + offsets]
    summary.update(ranges_summary(ranges))
    summary["findings"] = finding_counts
    if pruning is not None:
        summary["pruning_cutoff"] = pruning
    if groups is not None:
        summary["share_groups"] = groups
    if lag is not None:
        summary["lag"] = lag
    totals: dict[str, Any] = {
        "inputs": run_totals,
        "share_state_records": {
            "by_record_type": summary["share_state_records"]["by_record_type"],
            "by_layout": summary["share_state_records"]["by_layout"],
        },
        "quarantine": {"by_reason_kind": summary["quarantine"]["by_reason_kind"]},
        "ranges": ranges,
        "quarantine_kinds": kinds,
    }
    if "share_group_records" in summary:
        totals["share_group_records"] = {
            "by_record_type": summary["share_group_records"]["by_record_type"]
        }
    return summary, totals


def _incremental_inputs(
    arrivals: dict[str, Any],
    decoded: dict[str, tuple[DataFrame | pa.Table, DataFrame | pa.Table]],
    previous: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, int]]]:
    """Per input: this run's counts, the running totals with them, and the new records'
    counts by record type (and layout)."""
    inputs: dict[str, Any] = {}
    run_totals: dict[str, Any] = {}
    record_types: dict[str, dict[str, int]] = {}
    for source, arrived in arrivals.items():
        records, quarantined = decoded[source]
        quarantine_count = (
            quarantined.num_rows if isinstance(quarantined, pa.Table) else quarantined.count()
        )
        if source == "share_state":
            pairs = (
                summary_arrow.pair_counts(records, "record_type", "layout")
                if isinstance(records, pa.Table)
                else count_by_pair(records, "record_type", "layout")
            )
            record_types["by_record_type"] = pair_totals(pairs, 0)
            record_types["by_layout"] = pair_totals(pairs, 1)
            decoded_count = sum(count for _, _, count in pairs)
        else:
            record_types["groups"] = (
                summary_arrow.counts_by(records, "record_type")
                if isinstance(records, pa.Table)
                else count_by_value(records, "record_type")
            )
            decoded_count = sum(record_types["groups"].values())
        counts = arrived.counts
        inputs[source] = {
            "path": arrived.path,
            "format": arrived.format,
            "rows_read": counts.read,
            "duplicates_dropped": counts.duplicates,
            "decoded": decoded_count,
            "quarantined": quarantine_count,
            "reconciled": counts.read == counts.duplicates + decoded_count + quarantine_count,
            "already_processed": arrived.processed,
            "backfilled": arrived.backfill,
            "export_read_whole": not arrived.tracked,
        }
        before = previous.get("inputs", {}).get(source, {})
        run_totals[source] = {
            key: int(before.get(key, 0)) + int(inputs[source][key])
            for key in ("rows_read", "duplicates_dropped", "decoded", "quarantined")
        }
    if "consumer_offsets" not in arrivals:
        inputs["consumer_offsets"] = {
            "skipped": "no --consumer-offsets given: group-metadata checks are skipped"
        }
    return inputs, run_totals, record_types


def _state_keys(state: DataFrame | pa.Table) -> Mapping[str, Any] | None:
    """The state's share-partitions, groups and deleted share-partitions."""
    if isinstance(state, pa.Table):
        return summary_arrow.state_keys(state)
    row = state.agg(
        F.count(F.lit(1)).alias("keys"),
        F.countDistinct("group_id").alias("groups"),
        F.count(F.when(F.col("deleted"), 1)).alias("deleted"),
    ).first()
    return row.asDict() if row is not None else None


def _replay_counts(
    keys: Mapping[str, Any] | None,
    record_types: dict[str, dict[str, int]],
    previous: dict[str, Any],
) -> dict[str, Any]:
    """share_state_records' counts (the running totals plus this run's) and the state's
    (`keys`: `_state_keys`)."""
    previous_records = previous.get("share_state_records", {})
    return {
        "share_state_records": {
            "by_record_type": added_counts(
                previous_records.get("by_record_type", {}), record_types["by_record_type"]
            ),
            "by_layout": added_counts(
                previous_records.get("by_layout", {}), record_types["by_layout"]
            ),
            "share_partitions": int(keys["keys"]) if keys else 0,
            "groups": int(keys["groups"]) if keys else 0,
        },
        "share_partition_state": {
            "share_partitions": int(keys["keys"]) if keys else 0,
            "deleted": int(keys["deleted"]) if keys else 0,
        },
    }
