"""The run summary: counts of what a run read, decoded, replayed and found.

`summarize(results)` counts from the data, including the row reconciliation (rows read =
duplicates dropped + decoded + quarantined, for every input); `format_summary` turns the
counts into the lines printed at the end of a run. The job also writes them as the
`run_summary` table and, for a local output, `run_summary.json`.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sharestate.audits import REASON_DELIVERY_LIMIT, SEVERITIES
from sharestate.decode.columns import KEY
from sharestate.io.exports import count_rows
from sharestate.job.pipeline import Results

#: One pair count: (first value, second value, rows).
_Pair = tuple[str, str, int]


def summarize(results: Results) -> dict[str, Any]:
    """Counts for the run summary; every number comes from the data."""
    quarantine_pairs = _counts_by_pair(results.quarantine, "source", "reason_kind")
    quarantine_by_source = _totals(quarantine_pairs, 0)
    record_pairs = _counts_by_pair(results.share_state_records, "record_type", "layout")
    summary: dict[str, Any] = {
        "inputs": _input_counts(results, record_pairs, quarantine_by_source),
        "share_state_records": _record_counts(results.share_state_records, record_pairs),
        "share_partition_state": _state_counts(results.share_partition_state),
    }
    if results.share_group_records is not None:
        summary["share_group_records"] = _group_record_counts(results.share_group_records)
    summary["quarantine"] = {
        "rows": sum(quarantine_by_source.values()),
        "by_reason_kind": _totals(quarantine_pairs, 1),
    }
    summary.update(_audit_summary(results))
    return summary


def _count_by(df: DataFrame, column: str) -> dict[str, int]:
    return {
        str(row[column]): int(row["count"])
        for row in df.groupBy(column).count().orderBy(column).collect()
    }


def _counts_by_pair(df: DataFrame, first: str, second: str) -> list[_Pair]:
    """Rows per (first, second) value pair: one Spark job for two breakdowns."""
    rows = df.groupBy(first, second).count().collect()
    return [(row[first], row[second], int(row["count"])) for row in rows]


def _totals(pairs: list[_Pair], index: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for pair in pairs:
        if pair[index] is not None:
            out[str(pair[index])] = out.get(str(pair[index]), 0) + pair[2]
    return dict(sorted(out.items()))


def _input_counts(
    results: Results, record_pairs: list[_Pair], quarantine_by_source: dict[str, int]
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
            groups = results.share_group_records
            decoded = groups.count() if groups is not None else 0
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


def _record_counts(records: DataFrame, record_pairs: list[_Pair]) -> dict[str, Any]:
    keys = (
        records.groupBy(*KEY)
        .count()
        .agg(F.count(F.lit(1)).alias("keys"), F.countDistinct("group_id").alias("groups"))
        .first()
    )
    return {
        "by_record_type": _totals(record_pairs, 0),
        "by_layout": _totals(record_pairs, 1),
        "share_partitions": int(keys["keys"]) if keys else 0,
        "groups": int(keys["groups"]) if keys else 0,
    }


def _state_counts(state: DataFrame) -> dict[str, int]:
    return {"share_partitions": state.count(), "deleted": state.filter(F.col("deleted")).count()}


def _group_record_counts(groups: DataFrame) -> dict[str, Any]:
    return {
        "by_record_type": _count_by(groups, "record_type"),
        "share_groups": groups.filter(F.col("is_share_record"))
        .select("group_id")
        .distinct()
        .count(),
    }


def _audit_summary(results: Results) -> dict[str, Any]:
    """Counts of the audit tables, one small Spark job per table."""
    out: dict[str, Any] = _archived_counts(results.archived_ranges)
    out["findings"] = _finding_counts(results.findings)
    pruning = _pruning_counts(results.pruning_cutoff)
    if pruning is not None:
        out["pruning_cutoff"] = pruning
    if results.share_groups is not None:
        groups = _share_group_counts(results.share_groups)
        if groups is not None:
            out["share_groups"] = groups
    if results.share_partition_lag is not None:
        lag = _lag_counts(results.share_partition_lag)
        if lag is not None:
            out["lag"] = lag
    return out


def _archived_counts(ranges: DataFrame) -> dict[str, Any]:
    """Ranges and offsets of the poison messages, and of the archived ones by reason."""
    by_reason = {
        row["reason"]: (int(row["ranges"]), int(row["offsets"] or 0))
        for row in ranges.groupBy("reason")
        .agg(F.count(F.lit(1)).alias("ranges"), F.sum("offsets").alias("offsets"))
        .collect()
    }
    poison = by_reason.pop(REASON_DELIVERY_LIMIT, (0, 0))
    return {
        "poison_messages": {"ranges": poison[0], "offsets": poison[1]},
        "archived_messages": {
            "ranges": sum(r for r, _ in by_reason.values()),
            "offsets": sum(o for _, o in by_reason.values()),
            "by_reason": {
                reason: {"ranges": r, "offsets": o} for reason, (r, o) in by_reason.items()
            },
        },
    }


def _finding_counts(findings: DataFrame) -> dict[str, Any]:
    by_code: dict[str, dict[str, int]] = {}
    by_severity = dict.fromkeys(SEVERITIES, 0)
    for row in findings.groupBy("severity", "code").count().collect():
        by_severity[row["severity"]] = by_severity.get(row["severity"], 0) + int(row["count"])
        by_code.setdefault(row["severity"], {})[row["code"]] = int(row["count"])
    return {
        "by_severity": by_severity,
        "by_code": {severity: dict(sorted(codes.items())) for severity, codes in by_code.items()},
    }


def _pruning_counts(pruning_cutoff: DataFrame) -> dict[str, int] | None:
    pruning = pruning_cutoff.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.count(F.when(F.col("prunable"), 1)).alias("prunable"),
        F.sum("records_before_cutoff").alias("records_before_cutoff"),
    ).first()
    if pruning is None:
        return None
    return {
        "partitions": int(pruning["partitions"]),
        "prunable": int(pruning["prunable"]),
        "records_before_cutoff": int(pruning["records_before_cutoff"] or 0),
    }


def _share_group_counts(share_groups: DataFrame) -> dict[str, int] | None:
    groups = share_groups.agg(
        F.count(F.lit(1)).alias("groups"),
        F.count(F.when(F.col("deleted"), 1)).alias("deleted"),
        F.sum("member_count").alias("members"),
    ).first()
    if groups is None:
        return None
    return {
        "groups": int(groups["groups"]),
        "deleted": int(groups["deleted"]),
        "members": int(groups["members"] or 0),
    }


def _lag_counts(lag_table: DataFrame) -> dict[str, int] | None:
    lag = lag_table.agg(
        F.count(F.lit(1)).alias("share_partitions"),
        F.count("lag").alias("with_lag"),
        F.sum("lag").alias("total_lag"),
    ).first()
    if lag is None:
        return None
    return {
        "share_partitions": int(lag["share_partitions"]),
        "with_lag": int(lag["with_lag"]),
        "total_lag": int(lag["total_lag"] or 0),
    }


def format_summary(summary: dict[str, Any]) -> str:
    """The run summary as a few lines a person reads at the end of a run."""
    lines = ["sharestate run summary"]
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


def summary_table(spark: SparkSession, summary: dict[str, Any]) -> DataFrame:
    """The `run_summary` table: one row, the summary as JSON."""
    return spark.createDataFrame(
        [(summary["run_at"], json.dumps(summary, sort_keys=True))],
        "run_at string, summary_json string",
    )


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
