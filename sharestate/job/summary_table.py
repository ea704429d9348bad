"""The `run_summary` table: the run summary (the dict `sharestate.job.main` returns and writes
as `run_summary.json`) as one row of typed columns, so SQL reads
`findings_by_severity['error']` or `inputs['share_state'].reconciled` without parsing JSON.
`summary_json` keeps the whole summary as text.

Full and incremental runs write the same columns; what one of them does not have (an
incremental run's `changes`, `backfilled`; no --consumer-offsets, no --end-offsets) is null.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final

from pyspark.sql import DataFrame, SparkSession

#: An input's reconciliation, as the summary's `inputs` has it.
_INPUT_FIELDS: Final = (
    ("path", "string"),
    ("format", "string"),
    ("rows_read", "bigint"),
    ("duplicates_dropped", "bigint"),
    ("decoded", "bigint"),
    ("quarantined", "bigint"),
    ("reconciled", "boolean"),
    ("already_processed", "bigint"),
    ("backfilled", "bigint"),
    ("export_read_whole", "boolean"),
    ("skipped", "string"),
)
#: One commit of an incremental run, as the summary's `changes` has it.
_CHANGE_FIELDS: Final = (
    ("table", "string"),
    ("operation", "string"),
    ("files_read", "bigint"),
    ("bytes_read", "bigint"),
    ("files_written", "bigint"),
    ("bytes_written", "bigint"),
    ("rows_inserted", "bigint"),
    ("rows_deleted", "bigint"),
    ("writer", "string"),
)


def _struct(fields: tuple[tuple[str, str], ...]) -> str:
    return "struct<" + ", ".join(f"`{name}`: {kind}" for name, kind in fields) + ">"


#: Column -> (its type, where the summary has it: a key, or a section and a key).
_COLUMNS: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    ("mode", "string", ("mode",)),
    ("engine", "string", ("engine", "name")),
    ("delivery_count_limit", "int", ("delivery_count_limit",)),
    ("records_by_type", "map<string, bigint>", ("share_state_records", "by_record_type")),
    ("records_by_layout", "map<string, bigint>", ("share_state_records", "by_layout")),
    ("share_partitions", "bigint", ("share_state_records", "share_partitions")),
    ("groups", "bigint", ("share_state_records", "groups")),
    ("replayed_share_partitions", "bigint", ("share_partition_state", "share_partitions")),
    ("deleted_share_partitions", "bigint", ("share_partition_state", "deleted")),
    ("share_groups_in_consumer_offsets", "bigint", ("share_group_records", "share_groups")),
    ("quarantined", "bigint", ("quarantine", "rows")),
    ("quarantined_by_reason_kind", "map<string, bigint>", ("quarantine", "by_reason_kind")),
    ("poison_ranges", "bigint", ("poison_messages", "ranges")),
    ("poison_offsets", "bigint", ("poison_messages", "offsets")),
    ("archived_ranges", "bigint", ("archived_messages", "ranges")),
    ("archived_offsets", "bigint", ("archived_messages", "offsets")),
    ("findings_by_severity", "map<string, bigint>", ("findings", "by_severity")),
    ("findings_by_code", "map<string, map<string, bigint>>", ("findings", "by_code")),
    ("state_topic_partitions", "bigint", ("pruning_cutoff", "partitions")),
    ("prunable_partitions", "bigint", ("pruning_cutoff", "prunable")),
    ("records_before_cutoff", "bigint", ("pruning_cutoff", "records_before_cutoff")),
    ("share_groups", "bigint", ("share_groups", "groups")),
    ("deleted_share_groups", "bigint", ("share_groups", "deleted")),
    ("share_group_members", "bigint", ("share_groups", "members")),
    ("lag_share_partitions", "bigint", ("lag", "share_partitions")),
    ("share_partitions_with_lag", "bigint", ("lag", "with_lag")),
    ("total_lag", "bigint", ("lag", "total_lag")),
)

#: One row per run: when it ended, the inputs, the counts, an incremental run's commits,
#: and the whole summary as JSON.
RUN_SUMMARY_SCHEMA: Final = ", ".join(
    (
        "run_at timestamp",
        f"inputs map<string, {_struct(_INPUT_FIELDS)}>",
        *(f"{name} {kind}" for name, kind, _ in _COLUMNS),
        f"changes array<{_struct(_CHANGE_FIELDS)}>",
        "summary_json string",
    )
)


#: Every column's name, and the fields of `inputs` and `changes` (for the docs' check).
COLUMN_NAMES: Final = (
    "run_at",
    "inputs",
    *(name for name, _, _ in _COLUMNS),
    "changes",
    "summary_json",
    *(name for name, _ in (*_INPUT_FIELDS, *_CHANGE_FIELDS)),
)


def _at(summary: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = summary
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def summary_row(summary: dict[str, Any]) -> tuple[Any, ...]:
    """The summary as a row of RUN_SUMMARY_SCHEMA (`run_at` from its ISO-8601 text)."""
    inputs = {
        source: tuple(info.get(name) for name, _ in _INPUT_FIELDS)
        for source, info in summary["inputs"].items()
    }
    changes = summary.get("changes")
    return (
        datetime.fromisoformat(summary["run_at"]),
        inputs,
        *(_at(summary, path) for _, _, path in _COLUMNS),
        [tuple(change.get(name) for name, _ in _CHANGE_FIELDS) for change in changes]
        if changes is not None
        else None,
        json.dumps(summary, sort_keys=True),
    )


def summary_table(spark: SparkSession, summary: dict[str, Any]) -> DataFrame:
    """The `run_summary` table's one row."""
    return spark.createDataFrame([summary_row(summary)], RUN_SUMMARY_SCHEMA)
