"""The archived ranges (`poison_messages`, `archived_messages`): offset ranges that any
decoded record showed as Archived, merged per share-partition and reason into maximal
ranges, with what the final state says of each. A full run merges every record's intervals
(`merged_intervals`, per share-partition: in Spark's tasks or on the driver) and adds the
final state (`with_final_state`); an incremental run merges its new intervals into the
stored ranges they touch (`archived_ranges`, `refresh_scope`). The columns and their types
are `archived_messages`'s (`RANGES_SCHEMA`; `poison_messages` is it without `reason`).
Pure pyarrow and numpy: no Spark.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import KeyGroups
from sharestate.audits.counts_arrow import exploded
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.kafka.constants import ARCHIVED, SNAPSHOT, UPDATE, as_java_long

_TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
#: The `reason` values of the archived ranges.
REASON_DELIVERY_LIMIT: Final = "delivery_count_limit"
REASON_BELOW_LIMIT: Final = "below_delivery_limit"
REASON_NEVER_DELIVERED: Final = "never_delivered"
_BY: Final = (*KEY, "reason")
#: The first and last record that showed a part of a range.
_SEEN: Final = ("source_partition", "source_offset", "timestamp")

#: The columns of `archived_messages`.
RANGES_SCHEMA: Final = pa.schema(
    [
        ("group_id", pa.string()),
        ("topic_id", pa.string()),
        ("partition", pa.int32()),
        ("reason", pa.string()),
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("offsets", pa.int64()),
        ("delivery_count", pa.int32()),
        ("min_delivery_count", pa.int32()),
        ("first_seen_source_partition", pa.int32()),
        ("first_seen_source_offset", pa.int64()),
        ("first_seen_timestamp", _TIMESTAMP),
        ("last_seen_source_partition", pa.int32()),
        ("last_seen_source_offset", pa.int64()),
        ("last_seen_timestamp", _TIMESTAMP),
        ("sightings", pa.int64()),
        ("share_partition_deleted", pa.bool_()),
        ("offsets_still_in_state", pa.int64()),
        ("still_in_state", pa.bool_()),
        ("below_start_offset", pa.bool_()),
        ("settled", pa.bool_()),
    ]
)
#: The merged form (`_merge`'s columns): a range without what the final state
#: says of it.
_MERGED: Final = [field.name for field in RANGES_SCHEMA][
    : RANGES_SCHEMA.get_field_index("sightings") + 1
]
#: The aggregated form `_merge` takes: merged ranges less `offsets`, or one interval each.
_AGGREGATED: Final = [name for name in _MERGED if name != "offsets"]


def _column(table: pa.Table, name: str) -> np.ndarray[Any, Any]:
    values: np.ndarray[Any, Any] = table.column(name).to_numpy(zero_copy_only=False)
    return values


def _as_aggregated(intervals: pa.Table) -> pa.Table:
    """Intervals (`reasoned_intervals` rows) in the aggregated form: each its own first
    and last sighting, seen once."""
    n = intervals.num_rows
    seen = {
        f"{which}_seen_{name}": intervals.column(
            "source_timestamp" if name == "timestamp" else name
        )
        for which in ("first", "last")
        for name in _SEEN
    }
    columns = {
        **{name: intervals.column(name) for name in _BY},
        "first_offset": intervals.column("first_offset"),
        "last_offset": intervals.column("last_offset"),
        "delivery_count": intervals.column("delivery_count"),
        "min_delivery_count": intervals.column("delivery_count"),
        **seen,
        "sightings": pa.array(np.ones(n, np.int64)),
    }
    return _typed(pa.table(columns), _AGGREGATED)


def _typed(table: pa.Table, names: list[str]) -> pa.Table:
    return table.select(names).cast(pa.schema([RANGES_SCHEMA.field(name) for name in names]))


def _running_max(values: np.ndarray[Any, Any], groups: KeyGroups) -> np.ndarray[Any, Any]:
    """Per sorted row of `groups`, the largest of `values` (in that order) up to it in its
    group. Each value is replaced by its rank among all, offset by its group's number times
    the count of distinct values, so one running maximum over every row never carries a
    value into the next group (the products stay within int64 for any table a driver holds)."""
    distinct, rank = np.unique(values, return_inverse=True)
    base = groups.group.astype(np.int64) * len(distinct)
    return distinct[np.maximum.accumulate(base + rank) - base]


def _merge(aggregated: pa.Table) -> pa.Table:
    """Rows in the aggregated form merged: per `_BY`, overlapping or
    touching intervals joined into maximal ranges, each with the max and min delivery count,
    the earliest and latest sighting (log order) and the sum of sightings of its rows."""
    if aggregated.num_rows == 0:
        return _typed(aggregated.append_column("offsets", pa.array([], pa.int64())), _MERGED)
    groups = KeyGroups(aggregated, _BY, within=("first_offset", "last_offset"))
    ordered = aggregated.take(groups.order)
    n = ordered.num_rows
    first, last = _column(ordered, "first_offset"), _column(ordered, "last_offset")
    # An interval starts a range when it starts beyond the furthest last offset of the
    # intervals before it in its group, + 1 (first - 1 > reach: no overflow at the top).
    reach = _running_max(last, groups)
    starts = np.zeros(n, dtype=bool)
    starts[groups.starts] = True
    starts[1:] |= first[1:] - 1 > reach[:-1]
    begins = np.flatnonzero(starts)
    range_of = np.cumsum(starts) - 1
    ends = np.append(begins[1:], n) - 1

    def seen(which: str, pick: np.ndarray[Any, Any]) -> dict[str, pa.Array]:
        return {
            f"{which}_seen_{name}": ordered.column(f"{which}_seen_{name}").take(pick)
            for name in _SEEN
        }

    # Ranges are contiguous in `ordered`, so sorted by range first each keeps its positions.
    earliest = np.lexsort(
        (
            _column(ordered, "first_seen_source_offset"),
            _column(ordered, "first_seen_source_partition"),
            range_of,
        )
    )[begins]
    latest = np.lexsort(
        (
            _column(ordered, "last_seen_source_offset"),
            _column(ordered, "last_seen_source_partition"),
            range_of,
        )
    )[ends]
    high = np.maximum.reduceat(last, begins)
    merged = {
        **{name: ordered.column(name).take(begins) for name in _BY},
        "first_offset": first[begins],
        "last_offset": high,
        "offsets": high - first[begins] + 1,
        "delivery_count": np.maximum.reduceat(_column(ordered, "delivery_count"), begins),
        "min_delivery_count": np.minimum.reduceat(_column(ordered, "min_delivery_count"), begins),
        **seen("first", earliest),
        **seen("last", latest),
        "sightings": np.add.reduceat(_column(ordered, "sightings"), begins),
    }
    return _typed(pa.table(merged), _MERGED)


def _with_final_state(merged: pa.Table, final: pa.Table) -> pa.Table:
    """What the final state (`final`, rows of `final_state_columns`) says of each
    range."""
    by_key = {
        (row["group_id"], row["topic_id"], row["partition"]): row for row in final.to_pylist()
    }
    keys = zip(*(merged.column(name).to_pylist() for name in KEY), strict=True)
    columns: dict[str, list[Any]] = {
        name: []
        for name in (
            "share_partition_deleted",
            "offsets_still_in_state",
            "still_in_state",
            "below_start_offset",
            "settled",
        )
    }
    for key, first, last in zip(
        keys,
        merged.column("first_offset").to_pylist(),
        merged.column("last_offset").to_pylist(),
        strict=True,
    ):
        state = by_key.get(key)
        flag = state["share_partition_deleted"] if state else None
        deleted = bool(flag)
        in_state = sum(
            min(batch["last_offset"], last) - max(batch["first_offset"], first) + 1
            for batch in (state["_archived"] or [] if state else [])
            if batch["first_offset"] <= last and batch["last_offset"] >= first
        )
        # Kafka's offsets are Java longs: the count of an impossible batch wraps as there.
        offsets = 0 if deleted else as_java_long(in_state)
        start = state["_eso"] if state else None
        bound = state["_bound"] if state else None
        columns["share_partition_deleted"].append(flag)
        columns["offsets_still_in_state"].append(offsets)
        columns["still_in_state"].append(offsets > 0)
        columns["below_start_offset"].append(None if deleted or start is None else last < start)
        columns["settled"].append(bound is not None and last < bound - 1)
    table = merged
    for name, values in columns.items():
        table = table.append_column(
            RANGES_SCHEMA.field(name), pa.array(values, RANGES_SCHEMA.field(name).type)
        )
    return table.select(RANGES_SCHEMA.names)


def merged_intervals(records: pa.Table, delivery_count_limit: int) -> pa.Table:
    """The archived intervals of `records` (`share_state_records` rows holding every record
    of each share-partition they hold) merged per share-partition and reason into maximal
    ranges, without what the final state says of them (`with_final_state`)."""
    return _merge(_as_aggregated(reasoned_intervals(records, delivery_count_limit)))


def with_final_state(merged: pa.Table, state: pa.Table) -> pa.Table:
    """`archived_messages`' rows (with `reason`) of the `merged_intervals` ranges: what the
    final state (`share_partition_state` rows of their share-partitions) says of each."""
    return _with_final_state(merged, final_state_columns(state))


def archived_ranges(
    intervals: pa.Table, final: pa.Table, stored: pa.Table | None = None
) -> pa.Table:
    """The archived ranges: `intervals` are `reasoned_intervals` of the records, `final`
    the rows of `final_state_columns` of the state, `stored` the ranges an
    earlier run wrote (`archived_messages`' columns, poison_messages with `reason` added).
    Stored ranges that neither overlap nor touch their share-partition's span of new
    intervals are kept as they are; the others are merged again with the new intervals."""
    new = _as_aggregated(intervals)
    if stored is None or stored.num_rows == 0:
        return _with_final_state(_merge(new), final)
    spans = intervals.group_by(list(_BY)).aggregate(
        [("first_offset", "min"), ("last_offset", "max")]
    )
    placed = stored.select(_MERGED).join(spans, keys=list(_BY), join_type="left outer")
    low, high = placed.column("first_offset_min"), placed.column("last_offset_max")
    first, last = placed.column("first_offset"), placed.column("last_offset")
    # first - 1 > high, low - 1 > last: offsets are at least -1, so no overflow here.
    apart = pc.or_(pc.greater(pc.subtract(first, 1), high), pc.greater(pc.subtract(low, 1), last))
    unchanged = pc.or_(pc.is_null(low), pc.fill_null(apart, False))
    kept = _typed(placed.filter(unchanged), _MERGED)
    again = _typed(placed.filter(pc.invert(unchanged)), _AGGREGATED)
    merged = pa.concat_tables([_merge(pa.concat_tables([new, again])), kept])
    return _with_final_state(merged, final)


def final_with_stored_bounds(new_state: pa.Table, stored_state: pa.Table) -> pa.Table:
    """`final_state_columns` of `new_state` (an increment's touched keys after it), each
    with the settle bound of its stored state (`_old`; null where it has no stored state or a
    deleted one): what an increment reads to find which of its stored ranges can change
    (`refresh_scope`) and what the final state says of them.

    A stored range's columns, `settled` included, are those its share-partition's stored
    state gives: every run that touches a share-partition computes its ranges that are not
    settled again, and a settled one stays so while the bound does not go back."""
    final = final_state_columns(new_state)
    stored = final_state_columns(stored_state)
    bounds = dict(
        zip(
            zip(*[stored.column(c).to_pylist() for c in KEY], strict=True),
            stored.column("_bound").to_pylist(),
            strict=True,
        )
    )
    keys = zip(*[final.column(c).to_pylist() for c in KEY], strict=True)
    old = pa.array([bounds.get(key) for key in keys], stored.schema.field("_bound").type)
    return final.append_column("_old", old)


def refresh_scope(final: pa.Table, intervals: pa.Table) -> pa.Table:
    """Per share-partition of `final` (rows of `final_with_stored_bounds`: its new
    state, and `_old`, its stored settle bound), whether this run's new `intervals` reopen
    it (`_reopened`: a new interval below its stored settle bound, a bound that went back, a
    deletion or re-creation). The new records can change its stored ranges that are not
    settled, and, when it is reopened, every one of them: its settled ones too where it has
    any (`_settled_changes`; a key without a stored bound, new or deleted when stored, has no
    settled stored range)."""
    lowest = intervals.group_by(list(KEY)).aggregate([("first_offset", "min")])
    keys = final.select([*KEY, "_bound", "_old"]).join(
        lowest, keys=list(KEY), join_type="left outer"
    )
    old, new = keys.column("_old"), keys.column("_bound")
    reopened = pc.or_(
        pc.or_(pc.is_null(old), pc.is_null(new)),
        pc.or_(
            pc.fill_null(pc.less(new, old), False),
            pc.fill_null(pc.less(keys.column("first_offset_min"), old), False),
        ),
    )
    return pa.table(
        {
            **{name: keys.column(name) for name in KEY},
            "_reopened": reopened,
            "_settled_changes": pc.and_(reopened, pc.is_valid(old)),
        }
    )


def reasoned_intervals(records: pa.Table, delivery_count_limit: int) -> pa.Table:
    """Every Archived batch (last offset >= first) of every
    snapshot and update of `records` (`share_state_records` rows), one row each with the
    record that holds it and the `reason` of its range. The columns and their types are
    Spark's: a batch field is nullable where the batch or the field is."""
    wanted = pc.fill_null(
        pc.is_in(records.column("record_type"), pa.array([SNAPSHOT, UPDATE])), False
    )
    holders = records.select([*KEY, *LOG_ORDER, "source_timestamp", "state_batches"])
    rows, batches = exploded(holders.filter(wanted), "state_batches")
    first = pc.struct_field(batches, "first_offset")
    last = pc.struct_field(batches, "last_offset")
    count = pc.struct_field(batches, "delivery_count")
    archived = pc.and_(
        pc.equal(pc.struct_field(batches, "delivery_state"), ARCHIVED),
        pc.greater_equal(last, first),
    )
    keep = pc.fill_null(archived, False)
    count = count.filter(keep)
    # when(count >= limit, ...).when(count <= 0, ...).otherwise(...): a null count is below.
    reason = pc.if_else(
        pc.fill_null(pc.greater_equal(count, delivery_count_limit), False),
        REASON_DELIVERY_LIMIT,
        pc.if_else(
            pc.fill_null(pc.less_equal(count, 0), False), REASON_NEVER_DELIVERED, REASON_BELOW_LIMIT
        ),
    )
    element = holders.schema.field("state_batches").type.value_field
    batch_fields = [
        pa.field(name, field.type, nullable=element.nullable or field.nullable)
        for name in ("first_offset", "last_offset", "delivery_count")
        for field in [element.type.field(name)]
    ]
    schema = pa.schema(
        [
            *(holders.schema.field(name) for name in (*KEY, *LOG_ORDER, "source_timestamp")),
            *batch_fields,
            pa.field("reason", pa.string(), nullable=False),
        ]
    )
    columns = [
        *(rows.column(name).filter(keep) for name in (*KEY, *LOG_ORDER, "source_timestamp")),
        first.filter(keep),
        last.filter(keep),
        count,
        reason,
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def final_state_columns(state: pa.Table) -> pa.Table:
    """Per share-partition of `state` (`share_partition_state`
    rows), whether it is deleted, its effective start offset (`_eso`), its settle bound
    (`_bound`, `_settle_bound`) and its Archived batches (`_archived`, of the type of
    `state_batches`: a null list stays null, a batch of null state is left out)."""
    lists = state.column("state_batches").combine_chunks()
    batches = pc.list_flatten(lists)
    counts = np.asarray(pc.fill_null(pc.list_value_length(lists), 0), dtype=np.int64)
    parents = np.repeat(np.arange(len(lists), dtype=np.int64), counts)
    keep = np.asarray(
        pc.fill_null(pc.equal(pc.struct_field(batches, "delivery_state"), ARCHIVED), False),
        dtype=bool,
    )
    kept = np.bincount(parents[keep], minlength=len(lists))
    offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int32)
    archived = pa.ListArray.from_arrays(
        pa.array(offsets),
        batches.filter(pa.array(keep)),
        type=lists.type,
        mask=pc.is_null(lists),
    )
    field = state.schema.field
    schema = pa.schema(
        [
            *(field(name) for name in KEY),
            field("deleted").with_name("share_partition_deleted"),
            field("effective_start_offset").with_name("_eso"),
            pa.field("_bound", pa.int64()),
            field("state_batches").with_name("_archived"),
        ]
    )
    columns = [
        *(state.column(name) for name in KEY),
        state.column("deleted"),
        state.column("effective_start_offset"),
        _settle_bound(state, lists, batches, parents),
        archived,
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _settle_bound(
    state: pa.Table, lists: pa.Array, batches: pa.Array, parents: np.ndarray[Any, Any]
) -> pa.Array:
    """The settle bound of each row of `state`: for a live share-partition, the least
    of its start offset and its batches' first offsets (nulls skipped: null if all are),
    null for a deleted one. `batches` are its `lists` flattened, of the rows `parents`."""
    n = len(lists)
    firsts = pc.struct_field(batches, "first_offset")
    valid = np.asarray(pc.is_valid(firsts), dtype=bool)
    values = np.asarray(pc.fill_null(firsts, 0), dtype=np.int64)
    start = state.column("start_offset").combine_chunks()
    start_valid = np.asarray(pc.is_valid(start), dtype=bool)
    bound = np.where(
        start_valid, np.asarray(pc.fill_null(start, 0), dtype=np.int64), np.iinfo(np.int64).max
    )
    np.minimum.at(bound, parents[valid], values[valid])
    found = start_valid | (np.bincount(parents[valid], minlength=n) > 0)
    live = np.asarray(pc.invert(pc.fill_null(state.column("deleted"), False)), dtype=bool)
    return pa.array(bound, pa.int64(), mask=~(found & live))
