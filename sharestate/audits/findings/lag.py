"""Findings of the lag table (`share_partition_lag`, with --end-offsets)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sharestate.audits.columns import message
from sharestate.audits.findings.registry import (
    FindingCode,
    Found,
    Severity,
    Source,
    at_last_state_record,
    finding_rule,
)


@finding_rule(FindingCode.NEGATIVE_LAG, Severity.WARNING, source=Source.SHARE_STATE)
def negative_lag(lag: DataFrame) -> Found:
    """A share-partition whose lag comes out below zero: its start offset is past the end
    offset given for it, so the end offsets were taken before the share-state export ends.
    Take the end offsets after the export."""
    return Found(
        lag.filter(F.col("lag") < 0),
        message(
            "lag is ",
            F.col("lag"),
            " (end offset ",
            F.col("end_offset"),
            ", start offset ",
            F.col("start_offset"),
            ", method ",
            F.col("lag_method"),
            "): the end offsets were taken before the share-state export ends; take them after it",
        ),
        at_last_state_record(),
    )


@finding_rule(FindingCode.END_OFFSET_MISSING, Severity.INFO, source=Source.SHARE_STATE)
def end_offset_missing(lag: DataFrame) -> Found:
    """A live share-partition with no row in --end-offsets (rows are matched by topic_id, or
    by topic name through the group metadata): its lag is unknown. Add its topic-partition
    to the end offsets, or give --consumer-offsets so that topic names can be matched."""
    return Found(
        lag.filter(F.col("end_offset").isNull()),
        F.lit(
            "no end offset for this topic-partition in --end-offsets (rows are matched by"
            " topic_id, or by topic name through the group metadata): its lag is unknown"
        ),
        at_last_state_record(),
    )
