"""An incremental run's summary, in the shape of a full run's (`sharestate.job.summary`):
its inputs are the run's new rows (counted on the driver, where the increment is), the
tables' counts the previous running totals plus the run's, or the state-sized tables' own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from sharestate.job import summary_arrow
from sharestate.job.summary import (
    added_counts,
    pair_totals,
    quarantine_kind_rows,
    ranges_summary,
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
    #: The state's share-partitions, groups and deleted share-partitions.
    state_keys: Mapping[str, Any] | None


def count_new_rows(
    *,
    arrivals: dict[str, Any],
    decoded: dict[str, tuple[pa.Table, pa.Table]],
    state: pa.Table,
    previous: dict[str, Any],
) -> NewRowCounts:
    """The counts of an incremental run's summary that need only its new rows and the whole
    state. `arrivals`: input -> `Arrivals`; `decoded`: input -> (records, quarantine)."""
    inputs, run_totals, record_types = _incremental_inputs(arrivals, decoded, previous)
    return NewRowCounts(inputs, run_totals, record_types, summary_arrow.state_keys(state))


def incremental_summary(
    *,
    new_rows: NewRowCounts,
    quarantine_kinds: pa.Table,
    range_changes: dict[str, tuple[int, int]],
    findings: pa.Table,
    pruning_cutoff: pa.Table,
    share_groups: pa.Table | None,
    share_partition_lag: pa.Table | None,
    previous: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """An incremental run's summary, in the shape of a full run's: its inputs are this
    run's rows (and how many were already processed or backfilled: `new_rows`); the
    tables' counts are the whole output's, from the `previous` running totals plus this
    run's, or from the state-sized tables themselves. Returns the summary and the new
    running totals."""
    kinds = quarantine_kind_rows(quarantine_kinds)
    finding_counts = summary_arrow.finding_counts(findings)
    pruning = summary_arrow.pruning_counts(pruning_cutoff)
    groups = summary_arrow.share_group_counts(share_groups) if share_groups is not None else None
    lag = summary_arrow.lag_counts(share_partition_lag) if share_partition_lag is not None else None
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
    decoded: dict[str, tuple[pa.Table, pa.Table]],
    previous: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, int]]]:
    """Per input: this run's counts, the running totals with them, and the new records'
    counts by record type (and layout)."""
    inputs: dict[str, Any] = {}
    run_totals: dict[str, Any] = {}
    record_types: dict[str, dict[str, int]] = {}
    for source, arrived in arrivals.items():
        records, quarantined = decoded[source]
        quarantine_count = quarantined.num_rows
        if source == "share_state":
            pairs = summary_arrow.pair_counts(records, "record_type", "layout")
            record_types["by_record_type"] = pair_totals(pairs, 0)
            record_types["by_layout"] = pair_totals(pairs, 1)
            decoded_count = sum(count for _, _, count in pairs)
        else:
            record_types["groups"] = summary_arrow.counts_by(records, "record_type")
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


def _replay_counts(
    keys: Mapping[str, Any] | None,
    record_types: dict[str, dict[str, int]],
    previous: dict[str, Any],
) -> dict[str, Any]:
    """share_state_records' counts (the running totals plus this run's) and the state's
    (`keys`: `summary_arrow.state_keys`)."""
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
