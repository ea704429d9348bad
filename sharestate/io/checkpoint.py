"""`--mode incremental`: what earlier runs processed, and how a run goes on from there.

Every run writes `_checkpoint` last: per input and partition the highest offset it has
processed, and the Delta version of `share_partition_state` it wrote. An incremental run
reads only rows above those offsets, replays them on top of that version of the state
(a later, unfinished run may have written a newer one), appends its rows to the
per-record tables with a `replaceWhere` of exactly the rows above the checkpoint (so a
rerun after a killed run replaces what that run appended instead of duplicating it), and
rewrites the state and the audit tables. The audit tables go on from the versions of
CARRIED_TABLES the checkpoint names (merging ranges and segment summaries is associative),
so only new records are read. The result equals a full run over everything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

CHECKPOINT_TABLE: Final = "_checkpoint"
CHECKPOINT_SCHEMA: Final = (
    "source string, partition int, max_offset bigint, state_version bigint, written_at string,"
    " carried string"
)
#: Audit tables an incremental run goes on from (at the versions the checkpoint names),
#: rather than recomputing them from every stored record.
CARRIED_TABLES: Final = (
    "poison_messages",
    "archived_messages",
    "findings",
    "pruning_cutoff",
    "share_partition_segments",
)
#: Tables an incremental run appends to, and the input their rows come from (None: the
#: table has a `source` column naming it).
APPENDED_TABLES: Final[Mapping[str, str | None]] = {
    "share_state_records": "share_state",
    "share_partition_history": "share_state",
    "share_group_records": "consumer_offsets",
    "quarantine": None,
}
#: The columns Delta keeps statistics on in the tables of one row per record (set when the
#: job creates them): the ones an incremental run filters on, and the record's time. By
#: default Delta keeps them on the first 32 columns, which made writing
#: `share_state_records` measurably slower (the group id, topic id and layout are strings).
PER_RECORD_STATS_COLUMNS: Final = ("source_partition", "source_offset", "source_timestamp")


def stats_columns(table: str) -> tuple[str, ...] | None:
    """The columns Delta collects statistics on for `table`; None: Delta's default."""
    if table not in APPENDED_TABLES:
        return None
    source = ("source",) if APPENDED_TABLES[table] is None else ()
    return (*source, *PER_RECORD_STATS_COLUMNS)


@dataclass(frozen=True)
class PriorRun:
    """What the previous complete run processed."""

    max_offsets: Mapping[str, Mapping[int, int]]  # input -> partition -> highest offset
    state_version: int | None
    #: Delta versions of CARRIED_TABLES and the options they were computed with, e.g.
    #: {"versions": {"poison_messages": 3}, "delivery_count_limit": 5}; empty if unknown.
    carried: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PreviousOutput:
    """A previous run's checkpoint and the tables it wrote (the state at its version)."""

    prior: PriorRun
    tables: Mapping[str, DataFrame]


def read_prior_run(checkpoint: DataFrame | None) -> PriorRun | None:
    """The `_checkpoint` table as a PriorRun (it has a row per input partition: small)."""
    if checkpoint is None:
        return None
    offsets: dict[str, dict[int, int]] = {}
    version = None
    carried: dict[str, Any] = {}
    for row in checkpoint.collect():
        offsets.setdefault(row["source"], {})[int(row["partition"])] = int(row["max_offset"])
        version = row["state_version"]
        text = row.asDict().get("carried")  # absent in checkpoints of earlier releases
        if text:
            carried = json.loads(text)
    return PriorRun(offsets, None if version is None else int(version), carried)


def _processed_sql(prior: PriorRun, source: str, partition: str, offset: str) -> str:
    parts = [
        f"({partition} = {p} AND {offset} <= {m})"
        for p, m in sorted(prior.max_offsets.get(source, {}).items())
    ]
    return "(" + (" OR ".join(parts) if parts else "false") + ")"


def processed(prior: PriorRun, source: str, partition: str, offset: str) -> Column:
    """True on rows of input `source` that an earlier run already processed."""
    return F.expr(_processed_sql(prior, source, partition, offset))


def new_rows_predicate(prior: PriorRun, source: str | None) -> str:
    """SQL condition on an appended table: the rows above the checkpoint (the ones this run
    writes, or an unfinished run wrote)."""
    if source is not None:
        return "NOT " + _processed_sql(prior, source, "source_partition", "source_offset")
    either = " OR ".join(
        f"(source = '{name}' AND "
        + _processed_sql(prior, name, "source_partition", "source_offset")
        + ")"
        for name in sorted(prior.max_offsets)
    )
    return f"NOT ({either or 'false'})"


def checkpoint_table(
    spark: SparkSession,
    prior: PriorRun | None,
    read: Mapping[str, DataFrame],
    state_version: int | None,
    carried: Mapping[str, Any] | None = None,
) -> DataFrame:
    """The new `_checkpoint`: the prior offsets raised by the rows this run read."""
    offsets = {
        source: dict(parts) for source, parts in (prior.max_offsets if prior else {}).items()
    }
    for source, rows in read.items():
        seen = offsets.setdefault(source, {})
        for row in rows.groupBy("partition").agg(F.max("offset").alias("m")).collect():
            if row["m"] is not None:
                seen[int(row["partition"])] = max(seen.get(int(row["partition"]), -1), row["m"])
    written = datetime.now(UTC).isoformat(timespec="seconds")
    carried_json = json.dumps(dict(carried), sort_keys=True) if carried else None
    rows_out = [
        (source, partition, offset, state_version, written, carried_json)
        for source, parts in sorted(offsets.items())
        for partition, offset in sorted(parts.items())
    ]
    return spark.createDataFrame(rows_out, CHECKPOINT_SCHEMA)
