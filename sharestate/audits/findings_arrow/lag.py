"""Arrow twins of `sharestate.audits.findings.lag`'s rules (`rows.twin_of`): the rows of
`share_partition_lag` (a row per live share-partition) with a lag below zero or no end
offset. Pure pyarrow: no Spark."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings import lag as rules
from sharestate.audits.findings_arrow.rows import (
    AT_LAST_STATE_RECORD,
    FoundRows,
    message,
    twin_of,
)


@twin_of(rules.negative_lag)
def negative_lag(lag: pa.Table) -> FoundRows:
    """A finding per share-partition whose lag is below zero."""
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


@twin_of(rules.end_offset_missing)
def end_offset_missing(lag: pa.Table) -> FoundRows:
    """A finding per live share-partition without an end offset."""
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
