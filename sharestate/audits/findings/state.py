"""Findings about the final replayed state of each share-partition (`share_partition_state`,
its `delivery_counts`, and the lag): delivery counts above the limit, and start offsets that
stopped moving while records wait."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.audits.findings.registry import (
    FindingCode,
    FoundRows,
    Severity,
    Source,
    finding_rule,
)
from sharestate.audits.findings.rows import age_at_least, hours_between, message, text_of
from sharestate.decode.columns import KEY
from sharestate.kafka.constants import as_java_long
from sharestate.replay.fold import LATEST_TIMESTAMP, SINCE


@finding_rule(FindingCode.DELIVERY_COUNT_ABOVE_LIMIT, Severity.WARNING, per_share_partition=True)
def delivery_count_above_limit(delivery_counts: pa.Table, delivery_count_limit: int) -> FoundRows:
    """A share-partition whose final state holds delivery counts above
    --delivery-count-limit. Kafka archives a record when a release finds its count at the
    group's limit, so the group runs with a higher limit (group.share.delivery.count.limit,
    or the group's share.delivery.count.limit) and the poison ranges are counted against
    the wrong one. Run with the limit the group uses."""
    above = delivery_counts.filter(
        pc.greater(delivery_counts.column("delivery_count"), pa.scalar(delivery_count_limit))
    )
    # Few rows (counts above the limit): summed exactly, in Python.
    sums: dict[tuple[Any, ...], int | None] = {}
    highest: dict[tuple[Any, ...], Any] = {}
    keys = zip(*[above.column(c).to_pylist() for c in KEY], strict=True)
    offsets = above.column("offsets").to_pylist()
    counts = above.column("delivery_count").to_pylist()
    for key, offset, count in zip(keys, offsets, counts, strict=True):
        total = sums.setdefault(key, None)
        if offset is not None:
            sums[key] = offset if total is None else total + offset
        best = highest.setdefault(key, None)
        if count is not None and (best is None or count > best):
            highest[key] = count
    groups = list(sums)
    key_columns = {
        name: pa.array([key[i] for key in groups], above.schema.field(name).type)
        for i, name in enumerate(KEY)
    }
    found = pa.table(
        {
            **key_columns,
            "_offsets": pa.array(
                [None if (s := sums[k]) is None else as_java_long(s) for k in groups],
                pa.int64(),
            ),
            "_max": pa.array(
                [highest[k] for k in groups], above.schema.field("delivery_count").type
            ),
        }
    )
    return FoundRows(
        found,
        message(
            found.num_rows,
            found.column("_offsets"),
            " offset(s) in the final state have a delivery count above --delivery-count-limit ",
            str(delivery_count_limit),
            " (up to ",
            found.column("_max"),
            "). Kafka archives a record once its count reaches the group's limit, so the"
            " limit is higher (group.share.delivery.count.limit, or the group's"
            " share.delivery.count.limit): run with the limit the group uses",
        ),
        {
            "group_id": "group_id",
            "topic_id": "topic_id",
            "partition": "partition",
            "affected": "_offsets",
        },
    )


def _joined_lag(candidates: pa.Table, lag: pa.Table | None) -> pa.Table:
    """`candidates` left-joined on the key with the lag (`_lag`; null without a lag or a
    match; a row per match, as an SQL left join)."""
    n = candidates.num_rows
    if lag is None:
        return candidates.append_column("_lag", pa.nulls(n, pa.int64()))
    # Joined on the key and a row number only: Arrow's join does not carry every nested
    # type along.
    numbered = candidates.select(list(KEY)).append_column(
        "_row", pa.array(np.arange(n, dtype=np.int64))
    )
    lags = (
        lag.select([*KEY, "lag"])
        .rename_columns([*KEY, "_lag"])
        .cast(pa.schema([*[candidates.schema.field(c) for c in KEY], pa.field("_lag", pa.int64())]))
    )
    joined = numbered.join(lags, list(KEY), join_type="left outer")
    joined = joined.take(pc.sort_indices(joined, sort_keys=[("_row", "ascending")]))
    return candidates.take(joined.column("_row")).append_column("_lag", joined.column("_lag"))


def _waiting_share_partitions(state: pa.Table, lag: pa.Table | None) -> pa.Table:
    """Live share-partitions with records waiting: Available or Acquired offsets in the
    final state (`_waiting`, wrapped as a Java long), or lag > 0 (`_lag`); with when the
    start offset last moved (`_since`)."""
    live = state.filter(pc.invert(pc.fill_null(state.column("deleted"), False)))
    # Arrow's unchecked `add` wraps as Java's longs do (the exact sum, wrapped).
    waiting = pc.add(
        live.column("available_offsets").cast(pa.int64()),
        live.column("acquired_offsets").cast(pa.int64()),
    )
    candidates = pa.table(
        {
            **{name: live.column(name) for name in KEY},
            "effective_start_offset": live.column("effective_start_offset"),
            "_waiting": waiting,
            "_since": live.column(SINCE),
        }
    )
    candidates = _joined_lag(candidates, lag)
    lagging = pc.fill_null(pc.greater(candidates.column("_lag"), 0), False)
    return candidates.filter(pc.or_kleene(pc.greater(candidates.column("_waiting"), 0), lagging))


def _lag_text(lags: Sequence[Any]) -> pa.Array:
    return pa.array(
        ["" if v is None else " and the lag is " + text_of(v) for v in lags], pa.string()
    )


@finding_rule(FindingCode.SPSO_STALLED, Severity.WARNING, source=Source.SHARE_STATE)
def spso_stalled(
    state: pa.Table, stall_span_seconds: float, lag: pa.Table | None = None
) -> FoundRows:
    """A live share-partition with records waiting (Available or Acquired offsets, or lag > 0)
    whose effective start offset has not moved for --stall-span before the export's last
    record (not the wall clock: the result does not depend on when the job runs). An idle
    partition with no new records does not move its start offset either, so only those with
    work waiting count. Check the group's consumers, and poison records at the start
    offset."""
    end = pc.max(state.column(LATEST_TIMESTAMP).cast(pa.timestamp("us", tz="UTC")))
    waiting = _waiting_share_partitions(state, lag)
    since = pc.struct_field(waiting.column("_since"), "source_timestamp")
    ends = pa.repeat(end, waiting.num_rows)
    stalled = waiting.filter(age_at_least(ends, since, stall_span_seconds))
    since = pc.struct_field(stalled.column("_since"), "source_timestamp")
    ends = ends.slice(0, stalled.num_rows)
    n = stalled.num_rows
    return FoundRows(
        stalled,
        message(
            n,
            "the start offset has stayed at ",
            stalled.column("effective_start_offset"),
            " since ",
            since,
            " (",
            hours_between(ends, since),
            " h before the export's last record, --stall-span ",
            str(round(stall_span_seconds / 3600, 3)),
            " h) while ",
            stalled.column("_waiting"),
            " offset(s) are Available or Acquired",
            _lag_text(stalled.column("_lag").to_pylist()),
            ": check the group's consumers, and poison records at the start offset",
        ),
        {
            "group_id": "group_id",
            "topic_id": "topic_id",
            "partition": "partition",
            "source_partition": pc.struct_field(stalled.column("_since"), "source_partition"),
            "source_offset": pc.struct_field(stalled.column("_since"), "source_offset"),
            "affected": "_waiting",
        },
    )
