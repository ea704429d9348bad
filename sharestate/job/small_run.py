"""A small full run's audits, on the driver: the tables the run wrote, read back as Arrow,
audited by `sharestate.audits.driver` (no Spark job but the reads), the audit tables
written from there.

A full run that read at most `run.SMALL_RUN_ROWS` rows is small: its per-record tables fit
in the driver's memory, and over them each audit table's Spark queries cost more to plan
and start than to run. A run with --as-of (whose audits see only part of what it wrote)
audits in Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame

from sharestate.audits import AuditOptions
from sharestate.audits.driver import (
    HISTORY_COLUMNS,
    QUARANTINE_COLUMNS,
    RECORD_COLUMNS,
    DriverAudits,
    audit_on_driver,
)
from sharestate.audits.groups import topic_names
from sharestate.audits.lag import share_partition_lag
from sharestate.io.checkpoint import PLACEMENTS_TABLE
from sharestate.job.config import JobConfig
from sharestate.job.output_tables import OutputTables
from sharestate.job.pipeline import Results

#: What the run summary counts of `share_state_records` besides what the audits read.
SUMMARY_RECORD_COLUMNS = ("layout",)


@dataclass(frozen=True)
class SmallRunAudits:
    """The audit tables of a small run in Arrow, and the records and group records as read
    for them (the run summary and the checkpoint's totals count them there)."""

    audits: DriverAudits
    records: pa.Table
    group_records: pa.Table | None

    def tables(self) -> dict[str, pa.Table]:
        """Output table name -> rows, in the order `Results.tables` writes them."""
        audits = self.audits
        out = {
            "delivery_counts": audits.delivery_counts,
            "poison_messages": audits.poison_messages,
            "archived_messages": audits.archived_messages,
            "share_partition_segments": audits.segments,
            PLACEMENTS_TABLE: audits.placements,
            "pruning_cutoff": audits.pruning_cutoff,
        }
        if audits.share_groups is not None:
            out["share_groups"] = audits.share_groups
        if audits.share_partition_lag is not None:
            out["share_partition_lag"] = audits.share_partition_lag
        out["findings"] = audits.findings
        return out

    def counted_on_driver(self, written: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
        """The tables the run summary counts on the driver: those written from there, and
        the records as read."""
        return {**written, "share_state_records": self.records}


def audits_on_driver(config: JobConfig) -> bool:
    """Whether a small run of `config` audits on the driver (not with --as-of)."""
    return config.as_of is None


def audit_small_run(replayed: Results, config: JobConfig, tables: OutputTables) -> SmallRunAudits:
    """The audit tables of a small run, from the tables it wrote."""
    records = tables.arrow_of("share_state_records", [*RECORD_COLUMNS, *SUMMARY_RECORD_COLUMNS])
    history = tables.arrow_of("share_partition_history", HISTORY_COLUMNS)
    state = tables.arrow_of("share_partition_state")
    quarantine = tables.arrow_of("quarantine", QUARANTINE_COLUMNS)
    group_records = None
    if replayed.share_group_records is not None:
        group_records = tables.arrow_of("share_group_records")
    lag = _lag(replayed, tables)
    audits = audit_on_driver(
        records,
        state,
        history,
        quarantine,
        AuditOptions(
            delivery_count_limit=config.delivery_count_limit,
            stall_span_seconds=config.stall_span_seconds,
            state_topic_partitions=config.state_topic_partition_count,
        ),
        group_records=group_records,
        lag=lag,
    )
    return SmallRunAudits(audits, records, group_records)


def _lag(replayed: Results, tables: OutputTables) -> pa.Table | None:
    """`share_partition_lag` with --end-offsets: it joins the end offsets table, so Spark
    computes it (over the state and group records as written, from the driver)."""
    end_offsets: DataFrame | None = replayed.audit_inputs.end_offsets
    if end_offsets is None:
        return None
    state = tables.read_back("share_partition_state")
    names = None
    if replayed.share_group_records is not None:
        names = topic_names(tables.read_back("share_group_records"))
    lag: pa.Table = share_partition_lag(state, end_offsets, names).toArrow()
    return lag
