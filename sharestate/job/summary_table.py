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

import pyarrow as pa

from sharestate.arrow_rows import arrow_rows

_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
_COUNTS: Final = pa.map_(pa.string(), pa.int64())

#: An input's reconciliation, as the summary's `inputs` has it.
_INPUT_FIELDS: Final = (
    ("path", pa.string()),
    ("format", pa.string()),
    ("rows_read", pa.int64()),
    ("duplicates_dropped", pa.int64()),
    ("decoded", pa.int64()),
    ("quarantined", pa.int64()),
    ("reconciled", pa.bool_()),
    ("already_processed", pa.int64()),
    ("backfilled", pa.int64()),
    ("export_read_whole", pa.bool_()),
    ("skipped", pa.string()),
)
#: One commit of an incremental run, as the summary's `changes` has it.
_CHANGE_FIELDS: Final = (
    ("table", pa.string()),
    ("operation", pa.string()),
    ("files_read", pa.int64()),
    ("bytes_read", pa.int64()),
    ("files_written", pa.int64()),
    ("bytes_written", pa.int64()),
    ("rows_inserted", pa.int64()),
    ("rows_deleted", pa.int64()),
    ("writer", pa.string()),
)

#: Column -> (its type, where the summary has it: a key, or a section and a key).
_COLUMNS: Final[tuple[tuple[str, pa.DataType, tuple[str, ...]], ...]] = (
    ("mode", pa.string(), ("mode",)),
    ("engine", pa.string(), ("engine", "name")),
    ("worked_on", pa.string(), ("worked_on",)),
    ("delivery_count_limit", pa.int32(), ("delivery_count_limit",)),
    ("records_by_type", _COUNTS, ("share_state_records", "by_record_type")),
    ("records_by_layout", _COUNTS, ("share_state_records", "by_layout")),
    ("share_partitions", pa.int64(), ("share_state_records", "share_partitions")),
    ("groups", pa.int64(), ("share_state_records", "groups")),
    ("replayed_share_partitions", pa.int64(), ("share_partition_state", "share_partitions")),
    ("deleted_share_partitions", pa.int64(), ("share_partition_state", "deleted")),
    ("share_groups_in_consumer_offsets", pa.int64(), ("share_group_records", "share_groups")),
    ("quarantined", pa.int64(), ("quarantine", "rows")),
    ("quarantined_by_reason_kind", _COUNTS, ("quarantine", "by_reason_kind")),
    ("poison_ranges", pa.int64(), ("poison_messages", "ranges")),
    ("poison_offsets", pa.int64(), ("poison_messages", "offsets")),
    ("archived_ranges", pa.int64(), ("archived_messages", "ranges")),
    ("archived_offsets", pa.int64(), ("archived_messages", "offsets")),
    ("findings_by_severity", _COUNTS, ("findings", "by_severity")),
    ("findings_by_code", pa.map_(pa.string(), _COUNTS), ("findings", "by_code")),
    ("state_topic_partitions", pa.int64(), ("pruning_cutoff", "partitions")),
    ("prunable_partitions", pa.int64(), ("pruning_cutoff", "prunable")),
    ("records_before_cutoff", pa.int64(), ("pruning_cutoff", "records_before_cutoff")),
    ("share_groups", pa.int64(), ("share_groups", "groups")),
    ("deleted_share_groups", pa.int64(), ("share_groups", "deleted")),
    ("share_group_members", pa.int64(), ("share_groups", "members")),
    ("lag_share_partitions", pa.int64(), ("lag", "share_partitions")),
    ("share_partitions_with_lag", pa.int64(), ("lag", "with_lag")),
    ("total_lag", pa.int64(), ("lag", "total_lag")),
)

#: One row per run: when it ended, the inputs, the counts, an incremental run's commits,
#: and the whole summary as JSON.
RUN_SUMMARY_SCHEMA: Final = pa.schema(
    [
        ("run_at", _TIMESTAMP),
        ("inputs", pa.map_(pa.string(), pa.struct(list(_INPUT_FIELDS)))),
        *((name, kind) for name, kind, _ in _COLUMNS),
        ("changes", pa.list_(pa.struct(list(_CHANGE_FIELDS)))),
        ("summary_json", pa.string()),
    ]
)


#: Every column's name, and the fields of `inputs` and `changes` (for the docs' check).
COLUMN_NAMES: Final = (
    *RUN_SUMMARY_SCHEMA.names,
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


def summary_table(summary: dict[str, Any]) -> pa.Table:
    """The `run_summary` table's one row, on the driver (the run writes it from there)."""
    return arrow_rows([summary_row(summary)], RUN_SUMMARY_SCHEMA)
