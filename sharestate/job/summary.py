"""The run summary: counts of what a run read, decoded, replayed and found.

`summarize(results)` counts from the data, including the row reconciliation (rows read =
duplicates dropped + decoded + quarantined, for every input); `format_summary` turns the
counts into the lines printed at the end of a run. The job also writes them as the
`run_summary` table (`summary_table`, typed columns and the JSON) and, for a local output,
`run_summary.json`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits import REASON_DELIVERY_LIMIT
from sharestate.io.exports import count_rows
from sharestate.job import summary_arrow
from sharestate.job.pipeline import Results, audit_tables
from sharestate.job.side_by_side import run_side_by_side

# The `run_summary` table's row (typed columns beside the JSON) is its own module's.
from sharestate.job.summary_table import summary_table as summary_table
from sharestate.jvm import EngineInUse

#: How many of the run summary's counts run at once (`summarize`).
SUMMARY_COUNTERS: Final = 4
_Pair = summary_arrow.Pair


def summarize(results: Results, on_driver: Mapping[str, pa.Table] | None = None) -> dict[str, Any]:
    """Counts for the run summary; every number comes from the data. `on_driver`: output
    table name -> its rows as written, for the tables the job brought to the driver to
    write: those are counted there, with no Spark job; the others are counted in Spark's
    tasks (`summary_arrow`: the same functions), side by side."""
    rows = dict(on_driver or {})
    groups = results.share_group_records
    records = rows.get("share_state_records", results.share_state_records)
    quarantine_pairs, record_pairs, record_keys, state, group_counts, audits = run_side_by_side(
        [
            lambda: summary_arrow.pair_counts(
                rows.get("quarantine", results.quarantine), "source", "reason_kind"
            ),
            lambda: summary_arrow.pair_counts(records, "record_type", "layout"),
            lambda: summary_arrow.record_keys(records),
            lambda: summary_arrow.state_counts(
                rows.get("share_partition_state", results.share_partition_state)
            ),
            lambda: (
                summary_arrow.group_record_counts(rows.get("share_group_records", groups))
                if groups is not None
                else None
            ),
            lambda: _audit_summary(results, rows),
        ],
        at_most=SUMMARY_COUNTERS,
    )
    quarantine_by_source = pair_totals(quarantine_pairs, 0)
    summary: dict[str, Any] = {
        "inputs": _input_counts(results, record_pairs, quarantine_by_source, group_counts),
        "share_state_records": {
            "by_record_type": pair_totals(record_pairs, 0),
            "by_layout": pair_totals(record_pairs, 1),
            **record_keys,
        },
        "share_partition_state": state,
    }
    if group_counts is not None:
        summary["share_group_records"] = {
            key: value for key, value in group_counts.items() if key != "rows"
        }
    summary["quarantine"] = {
        "rows": sum(quarantine_by_source.values()),
        "by_reason_kind": pair_totals(quarantine_pairs, 1),
    }
    summary.update(audits)
    return summary


def pair_totals(pairs: list[_Pair], index: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for pair in pairs:
        if pair[index] is not None:
            out[str(pair[index])] = out.get(str(pair[index]), 0) + pair[2]
    return dict(sorted(out.items()))


def _input_counts(
    results: Results,
    record_pairs: list[_Pair],
    quarantine_by_source: dict[str, int],
    group_counts: dict[str, Any] | None,
) -> dict[str, Any]:
    """Per input: rows read, duplicates dropped, decoded and quarantined, and whether they
    add up."""
    out: dict[str, Any] = {}
    for source, export in results.inputs.items():
        counts = export.counts or count_rows(export.rows)
        read, duplicates = counts.read, counts.duplicates
        if source == "share_state":
            decoded = sum(count for _, _, count in record_pairs)
        else:
            decoded = int(group_counts["rows"]) if group_counts is not None else 0
        quarantined = quarantine_by_source.get(source, 0)
        out[source] = {
            "path": export.path,
            "format": export.format,
            "rows_read": read,
            "duplicates_dropped": duplicates,
            "decoded": decoded,
            "quarantined": quarantined,
            "reconciled": read == duplicates + decoded + quarantined,
        }
        if export.already_processed is not None:  # --mode incremental
            out[source]["already_processed"] = export.already_processed.count()
    if "consumer_offsets" not in results.inputs:
        out["consumer_offsets"] = {
            "skipped": "no --consumer-offsets given: group-metadata checks are skipped"
        }
    return out


def _audit_summary(results: Results, on_driver: Mapping[str, pa.Table]) -> dict[str, Any]:
    """Counts of the audit tables, from their rows on the driver (where every audit
    table is computed)."""
    rows = {**(audit_tables(results.audits) if results.audits is not None else {}), **on_driver}
    if "poison_messages" not in rows:
        return {}
    out: dict[str, Any] = _ranges_counts(
        summary_arrow.ranges_by_reason(rows["poison_messages"], rows["archived_messages"])
    )
    counters: list[tuple[str, str, Callable[[pa.Table], dict[str, Any] | None]]] = [
        ("findings", "findings", summary_arrow.finding_counts),
        ("pruning_cutoff", "pruning_cutoff", summary_arrow.pruning_counts),
        ("share_groups", "share_groups", summary_arrow.share_group_counts),
        ("lag", "share_partition_lag", summary_arrow.lag_counts),
    ]
    for key, table, count in counters:
        if table in rows and (counts := count(rows[table])) is not None:
            out[key] = counts
    return out


def _ranges_counts(by_reason: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """Ranges and offsets of the poison messages, and of the archived ones by reason."""
    archived = dict(by_reason)
    poison = archived.pop(REASON_DELIVERY_LIMIT, (0, 0))
    return {
        "poison_messages": {"ranges": poison[0], "offsets": poison[1]},
        "archived_messages": {
            "ranges": sum(r for r, _ in archived.values()),
            "offsets": sum(o for _, o in archived.values()),
            "by_reason": {
                reason: {"ranges": r, "offsets": o} for reason, (r, o) in archived.items()
            },
        },
    }


def engine_summary(engine: EngineInUse) -> dict[str, str]:
    """The summary's `engine`: `jvm` or `python`, and in words (why Python, if it is)."""
    return {"name": engine.name, "detail": engine.detail}


def format_summary(summary: dict[str, Any]) -> str:
    """The run summary as a few lines a person reads at the end of a run."""
    lines = ["sharestate run summary"]
    if "engine" in summary:
        lines.append(f"  engine: {summary['engine']['detail']}")
    for source, info in summary["inputs"].items():
        if "skipped" in info:
            lines.append(f"  {source}: {info['skipped']}")
            continue
        check = "ok" if info["reconciled"] else "MISMATCH"
        lines.append(
            f"  {source} ({info['format']}): {info['rows_read']:,} rows read = "
            f"{info['duplicates_dropped']:,} duplicates + {info['decoded']:,} decoded + "
            f"{info['quarantined']:,} quarantined [{check}]"
        )
    records = summary["share_state_records"]
    by_type = ", ".join(f"{k} {v:,}" for k, v in records["by_record_type"].items()) or "none"
    by_layout = ", ".join(f"{k} {v:,}" for k, v in records["by_layout"].items()) or "none"
    lines.append(f"  share-state records: {by_type}; layouts: {by_layout}")
    lines.append(
        f"  share-partitions: {records['share_partitions']:,}; groups: {records['groups']:,}"
    )
    state = summary["share_partition_state"]
    lines.append(
        f"  replayed share-partitions: {state['share_partitions']:,} ({state['deleted']:,} deleted)"
    )
    if "share_group_records" in summary:
        groups = summary["share_group_records"]
        lines.append(f"  share groups in __consumer_offsets: {groups['share_groups']:,}")
    quarantine = summary["quarantine"]
    kinds = ", ".join(f"{k} {v:,}" for k, v in quarantine["by_reason_kind"].items())
    lines.append(f"  quarantined: {quarantine['rows']:,}" + (f" ({kinds})" if kinds else ""))
    lines.extend(_audit_lines(summary))
    return "\n".join(lines)


def _audit_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    if "share_groups" in summary:
        groups = summary["share_groups"]
        lines.append(
            f"  share groups: {groups['groups']:,} ({groups['deleted']:,} deleted), "
            f"{groups['members']:,} members"
        )
    if "poison_messages" in summary:
        poison, archived = summary["poison_messages"], summary["archived_messages"]
        lines.append(
            f"  poison ranges: {poison['ranges']:,} ({poison['offsets']:,} offsets); archived "
            f"below the limit: {archived['ranges']:,} ranges ({archived['offsets']:,} offsets)"
        )
    if "pruning_cutoff" in summary:
        pruning = summary["pruning_cutoff"]
        lines.append(
            f"  pruning: {pruning['prunable']:,} of {pruning['partitions']:,} state-topic "
            f"partitions prunable, {pruning['records_before_cutoff']:,} records before the cut-off"
        )
    if "lag" in summary:
        lag = summary["lag"]
        lines.append(
            f"  lag: {lag['total_lag']:,} over {lag['with_lag']:,} of "
            f"{lag['share_partitions']:,} share-partitions"
        )
    if "findings" in summary:
        by_severity = summary["findings"]["by_severity"]
        lines.append("  findings: " + ", ".join(f"{k} {v:,}" for k, v in by_severity.items()))
    return lines


def write_summary_file(output: str, summary: dict[str, Any]) -> None:
    """`run_summary.json` in a local output folder (a remote one gets the table only)."""
    parsed = urlparse(output)
    if parsed.scheme not in ("", "file"):
        return  # remote outputs get the run_summary table only
    folder = parsed.path if parsed.scheme == "file" else output
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "run_summary.json"), "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, sort_keys=True)
        handle.write("\n")


# --- incremental runs: this run's counts, and the running totals the checkpoint carries -------


def added_counts(before: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    out = dict(before)
    for key, value in more.items():
        out[key] = out.get(key, 0) + value
    return dict(sorted(out.items()))


def running_totals(
    summary: dict[str, Any],
    quarantine_kinds: DataFrame | pa.Table,
    group_records: DataFrame | pa.Table | None,
) -> dict[str, Any]:
    """What a full run's checkpoint carries for the next incremental run's summary and
    findings: the counts that add up over runs, the quarantine's counts per (source,
    reason_kind), and the latest group record's time."""
    totals: dict[str, Any] = {
        "inputs": {
            source: {
                k: info[k] for k in ("rows_read", "duplicates_dropped", "decoded", "quarantined")
            }
            for source, info in summary["inputs"].items()
            if "skipped" not in info
        },
        "share_state_records": {
            "by_record_type": summary["share_state_records"]["by_record_type"],
            "by_layout": summary["share_state_records"]["by_layout"],
        },
        "quarantine": {"by_reason_kind": summary["quarantine"]["by_reason_kind"]},
        "ranges": _range_totals(summary),
        "quarantine_kinds": quarantine_kind_rows(quarantine_kinds),
        "consumer_offsets_end": _latest(group_records),
    }
    if "share_group_records" in summary:
        totals["share_group_records"] = {
            "by_record_type": summary["share_group_records"]["by_record_type"]
        }
    return totals


def _range_totals(summary: dict[str, Any]) -> dict[str, list[int]]:
    poison = summary["poison_messages"]
    out = {REASON_DELIVERY_LIMIT: [poison["ranges"], poison["offsets"]]}
    for reason, counts in summary["archived_messages"]["by_reason"].items():
        out[reason] = [counts["ranges"], counts["offsets"]]
    return out


def quarantine_kind_rows(quarantine_kinds: DataFrame | pa.Table) -> list[list[Any]]:
    kinds = (
        quarantine_kinds.to_pylist()
        if isinstance(quarantine_kinds, pa.Table)
        else [row.asDict() for row in quarantine_kinds.collect()]
    )
    return sorted(
        [
            [
                r["source"],
                r["reason_kind"],
                int(r["rows"]),
                r["first_source_partition"],
                r["first_source_offset"],
            ]
            for r in kinds
        ],
        key=lambda k: (str(k[0]), str(k[1])),
    )


def _latest(group_records: DataFrame | pa.Table | None) -> str | None:
    if group_records is None:
        return None
    if isinstance(group_records, pa.Table):
        latest = pc.max(group_records.column("source_timestamp")).as_py()
        # As Spark gives a timestamp to Python: naive, in the process's local time.
        end = latest.astimezone().replace(tzinfo=None) if latest is not None else None
    else:
        row = group_records.agg(F.max("source_timestamp").alias("end")).first()
        end = row["end"] if row is not None else None
    return end.isoformat() if end is not None else None


def ranges_summary(ranges: dict[str, list[int]]) -> dict[str, Any]:
    poison = ranges.get(REASON_DELIVERY_LIMIT, [0, 0])
    archived = {r: v for r, v in ranges.items() if r != REASON_DELIVERY_LIMIT and v[0]}
    return {
        "poison_messages": {"ranges": poison[0], "offsets": poison[1]},
        "archived_messages": {
            "ranges": sum(v[0] for v in archived.values()),
            "offsets": sum(v[1] for v in archived.values()),
            "by_reason": {
                r: {"ranges": v[0], "offsets": v[1]} for r, v in sorted(archived.items())
            },
        },
    }
