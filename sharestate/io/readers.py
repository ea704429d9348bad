"""Reading a job's output as one run: each Delta table at the version the last complete run
left it at, as its checkpoint names them (`_checkpoint.table_versions`).

A run changes its tables one commit at a time and writes `_checkpoint` last. A run killed
part-way (SIGKILL, a lost driver) leaves some tables at its own versions and the others at
the earlier run's; read at the checkpoint's versions (Delta time travel), every table is
the earlier, complete run's. Parquet outputs keep no versions: they are read as they are.

    from sharestate.io.readers import read_output
    tables = read_output(spark, "/lake/sharestate")
    tables["findings"].filter("severity = 'error'").show()
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

from pyspark.sql import DataFrame, SparkSession

from sharestate.io.checkpoint import CHECKPOINT_TABLE, read_checkpoint
from sharestate.io.tables import read_table

log = logging.getLogger("sharestate")

#: Every table a run may write, in the order a full run writes them.
OUTPUT_TABLES: Final = (
    "share_state_records",
    "share_partition_history",
    "share_partition_state",
    "share_group_records",
    "quarantine",
    "delivery_counts",
    "poison_messages",
    "archived_messages",
    "share_partition_segments",
    "pruning_cutoff",
    "share_groups",
    "share_partition_lag",
    "findings",
    "run_summary",
)


def checkpointed_versions(spark: SparkSession, output: str) -> dict[str, int] | None:
    """Table -> the Delta version the last complete run left it at, from `output`'s
    checkpoint; None when there is none (or one of an earlier format, which names no
    versions)."""
    checkpoint = read_checkpoint(spark, output)
    return dict(checkpoint.table_versions) if checkpoint is not None else None


def _output_format(spark: SparkSession, output: str) -> str:
    """`delta` when the output's tables are Delta tables (its checkpoint or state is one)."""
    for name in (CHECKPOINT_TABLE, "share_partition_state"):
        if read_table(spark, f"{output.rstrip('/')}/{name}", "delta") is not None:
            return "delta"
    return "parquet"


def read_output(
    spark: SparkSession,
    output: str,
    output_format: str = "auto",
    *,
    tables: Iterable[str] = OUTPUT_TABLES,
    at_checkpoint: bool = True,
) -> dict[str, DataFrame]:
    """The job's tables under `output` (those present), name -> DataFrame.

    `at_checkpoint` (default, Delta): each table at the version the checkpoint names, so
    the tables are one run's even after a killed run; a table the last complete run did not
    leave (`share_groups` of an earlier run with --consumer-offsets) is left out. Without a
    checkpoint naming versions, the latest versions are read (and that is logged)."""
    fmt = _output_format(spark, output) if output_format == "auto" else output_format
    versions = checkpointed_versions(spark, output) if fmt == "delta" and at_checkpoint else None
    if fmt == "delta" and at_checkpoint and versions is None:
        log.info("%s has no checkpoint naming table versions: reading the latest ones", output)
    found: dict[str, DataFrame] = {}
    for name in tables:
        if versions is not None and name not in versions:
            continue  # not a table of the last complete run
        version = versions.get(name) if versions is not None else None
        table = read_table(spark, f"{output.rstrip('/')}/{name}", fmt, version)
        if table is not None:
            found[name] = table
    return found
