"""The only part that touches storage; the job is its one user.

* `exports`: reading the exports (Parquet, Delta, `kafka://`), their schema check, the
  --end-offsets table, counting and dropping repeated rows.
* `brokers`: asking a `kafka://` input's cluster for its topic before any work (the
  optional confluent-kafka).
* `files`: file-system checks (a path inside a Delta table, the tables in a folder's
  sub-folders) and Spark's errors about unreadable files as one-line `InputError`s.
* `tables`: writing the job's tables, putting them back after a failed run, reading them.
* `checkpoint`: what earlier runs processed (`--mode incremental`).
* `readers`: an output read as one run, each table at the version its checkpoint names.

The names the job, the tests and the benchmarks use are importable from here.
"""

from __future__ import annotations

from sharestate.io.exports import (
    KAFKA_OFFSET_FETCHING_CONF,
    ROW_IDENTITY,
    Export,
    RowCounts,
    count_rows,
    deduplicate,
    read_end_offsets,
    read_export,
)
from sharestate.io.files import unreadable_files_named
from sharestate.io.readers import OUTPUT_TABLES, checkpointed_versions, read_output
from sharestate.io.tables import (
    Written,
    delta_version,
    keep_writes,
    read_table,
    undo_writes,
    write_table,
)

__all__ = [
    "KAFKA_OFFSET_FETCHING_CONF",
    "OUTPUT_TABLES",
    "ROW_IDENTITY",
    "Export",
    "RowCounts",
    "Written",
    "checkpointed_versions",
    "count_rows",
    "deduplicate",
    "delta_version",
    "keep_writes",
    "read_end_offsets",
    "read_export",
    "read_output",
    "read_table",
    "undo_writes",
    "unreadable_files_named",
    "write_table",
]
