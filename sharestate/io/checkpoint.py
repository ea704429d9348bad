"""The checkpoint: what the last complete run processed, written last by every run.

`_checkpoint` has a row per input and partition: the exported positions the run had
processed there (first and last offset, and how many: the offsets between them that are
not counted are the export's gaps), with the Delta version of every table the run wrote
(`table_versions`: a reader that wants one run's tables, and an incremental run that finds
a later, unfinished run's commits, go by these). One row also carries, as JSON (`carried`),
what the next incremental run needs besides: what each export held (`ExportFiles`: a local
export's files or version, to tell "nothing new" without Spark), the inputs' streams
(`sharestate.io.streams`: which of their batches the tables hold), the options the tables
were computed with, and the run summary's running totals.

The checkpoint is written last: a run killed before it leaves the previous one in force.
It can be read without Spark (delta-rs) where the output is local, so that a scheduled run
can tell "nothing new" before it starts Spark (`nothing_new`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import pyarrow as pa
from pyspark.sql import SparkSession

from sharestate.arrow_rows import arrow_rows
from sharestate.io.changes import ExportFiles
from sharestate.io.files import local_path
from sharestate.io.streams import Streams

CHECKPOINT_TABLE: Final = "_checkpoint"
#: Every share-partition's placements (`audits.share_partition_placements`: a row per
#: share-partition and `__share_group_state` partition), kept for the next incremental run:
#: it reads them instead of rolling up every stored segment again, and replaces the rows of
#: the share-partitions it touches.
PLACEMENTS_TABLE: Final = "_placements"
#: Bumped when what the checkpoint holds, or the layout of the tables an incremental run
#: changes, changes meaning; an older one means a full run. 3: `PLACEMENTS_TABLE`, and the
#: range tables partitioned by `settled`. 4: the inputs' streams (`Streams`).
CHECKPOINT_FORMAT: Final = 4
CHECKPOINT_SCHEMA: Final = pa.schema(
    [
        ("source", pa.string()),
        ("partition", pa.int32()),
        ("first_offset", pa.int64()),
        ("max_offset", pa.int64()),
        ("rows", pa.int64()),
        ("state_version", pa.int64()),
        ("written_at", pa.timestamp("us", tz="UTC")),
        ("carried", pa.string()),
        ("table_versions", pa.map_(pa.string(), pa.int64())),
    ]
)
#: Tables of one row per record: an incremental run appends to them.
PER_RECORD_TABLES: Final = (
    "share_state_records",
    "share_partition_history",
    "share_group_records",
    "quarantine",
)
#: The columns Delta keeps statistics on in the tables of one row per record (set when the
#: job creates them): the ones a reader filters a run's rows by, and the record's time. By
#: default Delta keeps them on the first 32 columns, which made writing
#: `share_state_records` measurably slower (the group id, topic id and layout are strings).
PER_RECORD_STATS_COLUMNS: Final = ("source_partition", "source_offset", "source_timestamp")


#: Tables partitioned by a column (set when a full run writes them): an incremental run
#: reads and rewrites only the ranges that are not settled.
PARTITION_COLUMNS: Final = {"poison_messages": ("settled",), "archived_messages": ("settled",)}


def stats_columns(table: str) -> tuple[str, ...] | None:
    """The columns Delta collects statistics on for `table`; None: Delta's default."""
    if table not in PER_RECORD_TABLES:
        return None
    source = ("source",) if table == "quarantine" else ()
    return (*source, *PER_RECORD_STATS_COLUMNS)


@dataclass(frozen=True)
class Extent:
    """The exported positions of one partition of an input that a run had processed."""

    first: int
    last: int
    rows: int

    def widened(self, other: Extent) -> Extent:
        return Extent(
            min(self.first, other.first), max(self.last, other.last), self.rows + other.rows
        )


@dataclass(frozen=True)
class Checkpoint:
    """What the last complete run processed and wrote."""

    #: input -> partition -> extent of its processed positions.
    extents: Mapping[str, Mapping[int, Extent]]
    #: table -> the Delta version the run left it at.
    table_versions: Mapping[str, int]
    #: input (and "end_offsets") -> what the export held.
    exports: Mapping[str, ExportFiles] = field(default_factory=dict)
    #: The options the tables were computed with (`run_options`).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: The run summary's running totals.
    totals: Mapping[str, Any] = field(default_factory=dict)
    #: The inputs' streams, and the last of their batches the tables hold.
    streams: Streams | None = None
    written_at: datetime | None = None
    format: int = CHECKPOINT_FORMAT


def _carried(checkpoint: Checkpoint) -> str:
    return json.dumps(
        {
            "format": checkpoint.format,
            "exports": {name: e.to_json() for name, e in checkpoint.exports.items()},
            "options": dict(checkpoint.options),
            "totals": dict(checkpoint.totals),
            "streams": checkpoint.streams.to_json() if checkpoint.streams else None,
        },
        sort_keys=True,
    )


def checkpoint_rows(checkpoint: Checkpoint) -> list[tuple[Any, ...]]:
    """The `_checkpoint` table's rows (CHECKPOINT_SCHEMA order): one per input partition,
    the JSON on the first only (it lists the exports' files: once is enough). An output
    with no input partition yet gets one row of nulls to carry it."""
    written = checkpoint.written_at or datetime.now(UTC).replace(microsecond=0)
    versions = dict(checkpoint.table_versions)
    state_version = versions.get("share_partition_state")
    rows: list[tuple[Any, ...]] = []
    for source, parts in sorted(checkpoint.extents.items()):
        for partition, extent in sorted(parts.items()):
            rows.append(
                (
                    source,
                    partition,
                    extent.first,
                    extent.last,
                    extent.rows,
                    state_version,
                    written,
                    None,
                    versions,
                )
            )
    if not rows:
        rows.append((None, None, None, None, None, state_version, written, None, versions))
    first = rows[0]
    rows[0] = (*first[:7], _carried(checkpoint), first[8])
    return rows


def checkpoint_table(checkpoint: Checkpoint) -> pa.Table:
    """The `_checkpoint` table's rows, on the driver (the run writes them from there)."""
    return arrow_rows(checkpoint_rows(checkpoint), CHECKPOINT_SCHEMA)


def parse_checkpoint(rows: list[dict[str, Any]]) -> Checkpoint | None:
    """The checkpoint in `_checkpoint`'s rows (as dicts); None when there is none, or it is
    of an earlier format (the next run is then a full one)."""
    carried: dict[str, Any] = {}
    extents: dict[str, dict[int, Extent]] = {}
    versions: dict[str, int] = {}
    written = None
    for row in rows:
        if row.get("carried"):
            carried = json.loads(row["carried"])
        if row.get("table_versions"):
            versions = {str(k): int(v) for k, v in dict(row["table_versions"]).items()}
        written = row.get("written_at") or written
        if row.get("source") is not None and row.get("first_offset") is not None:
            extents.setdefault(row["source"], {})[int(row["partition"])] = Extent(
                int(row["first_offset"]), int(row["max_offset"]), int(row["rows"])
            )
    if carried.get("format") != CHECKPOINT_FORMAT or not versions:
        return None
    exports = {
        name: e
        for name, data in (carried.get("exports") or {}).items()
        if (e := ExportFiles.from_json(data)) is not None
    }
    return Checkpoint(
        extents=extents,
        table_versions=versions,
        exports=exports,
        options=carried.get("options") or {},
        totals=carried.get("totals") or {},
        streams=Streams.from_json(carried.get("streams")),
        written_at=written,
    )


def read_checkpoint(spark: SparkSession | None, output: str) -> Checkpoint | None:
    """The checkpoint under `output`; None when there is none (or of an earlier format).
    Without `spark`, only a local output can be read (through delta-rs)."""
    path = f"{output.rstrip('/')}/{CHECKPOINT_TABLE}"
    from sharestate.io.store import is_local

    if is_local(output, spark):
        folder = os.path.abspath(local_path(path))
        if not os.path.isdir(os.path.join(folder, "_delta_log")):
            return None
        from deltalake import DeltaTable

        table = pa.table(DeltaTable(folder).to_pyarrow_table())
        if "carried" not in table.column_names or "first_offset" not in table.column_names:
            return None
        return parse_checkpoint(table.to_pylist())
    if spark is None:
        return None
    from sharestate.io.tables import read_table

    df = read_table(spark, path, "delta")
    if df is None or "first_offset" not in df.columns:
        return None
    return parse_checkpoint([row.asDict() for row in df.collect()])
