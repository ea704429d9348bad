"""A full run's audits, from the tables it wrote: a few columns of a written table cost less
to read than folding or decoding again. Where the run works on the driver they are read as
Arrow (by delta-rs from a local Delta output, else through Spark); in Spark they are read
as DataFrames and the audits read them per key in Spark's tasks (`sharestate.places`).
The same functions compute the tables either way (`sharestate.audits.audit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from sharestate.audits import (
    HISTORY_COLUMNS,
    QUARANTINE_COLUMNS,
    RECORD_COLUMNS,
    AuditTables,
    audit,
)
from sharestate.job.config import JobConfig
from sharestate.job.output_tables import OutputTables
from sharestate.job.pipeline import Results, audit_options, audit_tables, quarantine_within_as_of
from sharestate.places import Frame, Place, arrow_of
from sharestate.replay import as_of

#: What the run summary counts of `share_state_records` besides what the audits read.
SUMMARY_RECORD_COLUMNS = ("layout",)


@dataclass(frozen=True)
class WrittenAudits:
    """The audit tables of a full run in Arrow, and the records and group records as read
    for them (the run summary and the checkpoint's totals count them there; the records
    only where the run works on the driver)."""

    audits: AuditTables
    records: pa.Table | None
    group_records: pa.Table | None

    def tables(self) -> dict[str, pa.Table]:
        """Output table name -> rows, in the order they are written."""
        return audit_tables(self.audits)

    def counted_on_driver(self, written: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
        """The tables the run summary counts on the driver: those written from there, the
        audit tables, and the records as read."""
        out = {**written, **self.tables()}
        if self.records is not None:
            out["share_state_records"] = self.records
        return out


def audit_written(
    replayed: Results, config: JobConfig, tables: OutputTables, place: Place
) -> WrittenAudits:
    """The audit tables of a full run, from the tables it wrote (within --as-of: the
    records and quarantine cut as the replay's were)."""

    def read(name: str, columns: tuple[str, ...] | None = None) -> Frame:
        if place == "driver":
            return tables.arrow_of(name, columns)
        frame = tables.read_back(name)
        return frame.select(*columns) if columns is not None else frame

    seen = replayed.audit_inputs
    group_rows = None
    if config.as_of is None:
        records = read("share_state_records", (*RECORD_COLUMNS, *SUMMARY_RECORD_COLUMNS))
        quarantine = read("quarantine", QUARANTINE_COLUMNS)
        if replayed.share_group_records is not None:
            group_rows = arrow_of(read("share_group_records"))
    else:
        records = as_of(
            tables.read_back("share_state_records"),
            source_offset=config.as_of_offset,
            timestamp=config.as_of_timestamp,
        )
        quarantine = quarantine_within_as_of(tables.read_back("quarantine"), config)
        if seen.group_records is not None:
            group_rows = arrow_of(seen.group_records)
    audits = audit(
        records,
        tables.arrow_of("share_partition_state"),
        read("share_partition_history", HISTORY_COLUMNS),
        quarantine,
        audit_options(config),
        group_records=group_rows,
        end_offsets=seen.end_offsets,
        place=place,
    )
    kept = records if isinstance(records, pa.Table) and config.as_of is None else None
    return WrittenAudits(audits, kept, group_rows)
