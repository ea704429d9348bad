"""Findings of the lag table (`share_partition_lag`, with --end-offsets): a row per live
share-partition, with a lag below zero or no end offset."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings.registry import (
    AT_LAST_STATE_RECORD,
    FindingCode,
    FoundRows,
    Severity,
    Source,
    finding_rule,
)
from sharestate.audits.findings.rows import message


@finding_rule(FindingCode.NEGATIVE_LAG, Severity.WARNING, source=Source.SHARE_STATE)
def negative_lag(lag: pa.Table) -> FoundRows:
    """A share-partition whose lag comes out below zero: its start offset is past the end
    offset given for it, so the end offsets were taken before the share-state export ends.
    Take the end offsets after the export."""
    found = lag.filter(pc.less(lag.column("lag"), 0), null_selection_behavior="drop")
    return FoundRows(
        found,
        message(
            found.num_rows,
            "lag is ",
            found.column("lag"),
            " (end offset ",
            found.column("end_offset"),
            ", start offset ",
            found.column("start_offset"),
            ", method ",
            found.column("lag_method"),
            "): the end offsets were taken before the share-state export ends; take them after it",
        ),
        AT_LAST_STATE_RECORD,
    )


@finding_rule(FindingCode.END_OFFSET_MISSING, Severity.INFO, source=Source.SHARE_STATE)
def end_offset_missing(lag: pa.Table) -> FoundRows:
    """A live share-partition with no row in --end-offsets (rows are matched by topic_id, or
    by topic name through the group metadata): its lag is unknown. Add its topic-partition
    to the end offsets, or give --consumer-offsets so that topic names can be matched."""
    found = lag.filter(pc.is_null(lag.column("end_offset")))
    return FoundRows(
        found,
        message(
            found.num_rows,
            "no end offset for this topic-partition in --end-offsets (rows are matched by"
            " topic_id, or by topic name through the group metadata): its lag is unknown",
        ),
        AT_LAST_STATE_RECORD,
    )
