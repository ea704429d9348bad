"""Findings from the group metadata (`share_groups`, with --consumer-offsets): share state the
metadata does not account for, and partitions stuck initializing (topics deleting).

Conditions that can be null follow SQL's three-valued logic (as the table's rows have
always been found): a filter drops a row whose condition is null, `exists` is null when no
element holds and some element's test is null, and an equi-join matches no null key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
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
from sharestate.audits.findings.rows import age_at_least, choose, hours_between, message
from sharestate.decode.columns import KEY

#: A column of a table, or an array of values.
Values: TypeAlias = pa.Array | pa.ChunkedArray


def _array(column: Values) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _live_state(state: pa.Table) -> pa.Table:
    """The rows of `share_partition_state` whose share-partition is not deleted (null
    counts as not deleted)."""
    return state.filter(pc.invert(pc.fill_null(state.column("deleted"), False)))


def _is_true(condition: Values) -> np.ndarray:
    """Where `condition` is true (null is not: a filter drops the row)."""
    flags: np.ndarray = pc.fill_null(condition, False).to_numpy(zero_copy_only=False)
    return flags.astype(bool)


def _is_false(condition: Values) -> np.ndarray:
    """Where `condition` is false (null is not: `~condition` is null too)."""
    return _is_true(pc.invert(condition))


def _join(
    left: pa.Table, right: pa.Table, on: Sequence[str], join_type: str
) -> tuple[np.ndarray, np.ndarray]:
    """The row numbers of `left` and `right` an SQL equi-join on the `on` columns pairs
    (null keys match nothing), ordered by left then right row; for a "left outer" join the
    right row number is -1 where a left row matches none. Joined on the keys and row
    numbers only: Arrow's join does not carry every nested type along."""
    keys = left.select(list(on))
    numbered_left = keys.append_column("_left", pa.array(np.arange(left.num_rows)))
    numbered_right = (
        right.select(list(on))
        .cast(keys.schema)
        .append_column("_right", pa.array(np.arange(right.num_rows)))
    )
    joined = numbered_left.join(numbered_right, list(on), join_type=join_type)
    joined = joined.sort_by([("_left", "ascending"), ("_right", "ascending")])
    left_rows = joined.column("_left").to_numpy()
    right_rows = pc.fill_null(joined.column("_right"), -1).to_numpy()
    return left_rows.astype(np.int64), right_rows.astype(np.int64)


def _explode(lists: Values) -> tuple[np.ndarray, pa.Array]:
    """SQL's `explode` of a list column: the row number and the value of each element
    (a null or empty list gives none)."""
    array = _array(lists)
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
    parent = np.repeat(np.arange(len(array), dtype=np.int64), lengths)
    # list_flatten skips null lists, whatever their offsets span (as `lengths` counts).
    return parent, pc.list_flatten(array)


def _fields(structs: pa.Array) -> dict[str, pa.Array]:
    """A struct array's fields by name, null where the struct is null."""
    assert isinstance(structs, pa.StructArray)
    names = [structs.type.field(i).name for i in range(structs.type.num_fields)]
    return dict(zip(names, structs.flatten(), strict=True))


def _exists(rows: int, parent: np.ndarray, holds: Values) -> pa.Array:
    """SQL's `exists` (three-valued): per row, true when `holds` is true for one of its
    elements (`parent`: each element's row), else null when it is null for one, else
    false (a row without elements: false, as over `coalesce(list, array())`)."""
    valid = pc.is_valid(holds).to_numpy(zero_copy_only=False).astype(bool)
    true = np.zeros(rows, dtype=bool)
    true[parent[_is_true(holds)]] = True
    null = np.zeros(rows, dtype=bool)
    null[parent[~valid]] = True
    return pa.array(true, pa.bool_(), mask=~true & null)


def _contains_topic(topics: Values, topic_id: Values) -> pa.Array:
    """Per row, whether `topics` (a list of {topic_id, ...} structs) has the row's topic
    (no list: none)."""
    parent, elements = _explode(topics)
    same_topic = pc.equal(_fields(elements)["topic_id"], pc.take(_array(topic_id), parent))
    return _exists(len(topic_id), parent, same_topic)


def _contains_partition(topics: Values, topic_id: Values, partition: Values) -> pa.Array:
    """Per row, whether `topics` lists the row's topic with its partition (a null list of
    partitions, or a null partition, holds none)."""
    parent, elements = _explode(topics)
    fields = _fields(elements)
    same_topic = pc.equal(fields["topic_id"], pc.take(_array(topic_id), parent))
    listed_parent, listed = _explode(fields["partitions"])
    wanted = pc.take(_array(partition), parent[listed_parent])
    has = np.zeros(len(elements), dtype=bool)
    has[listed_parent[_is_true(pc.equal(listed, wanted))]] = True
    return _exists(len(topic_id), parent, pc.and_kleene(same_topic, pa.array(has)))


def _with_group(state: pa.Table, groups: pa.Table, join_type: str) -> tuple[pa.Table, pa.Table]:
    """The live share-partitions joined to their group's `share_groups` row on `group_id`:
    the state rows and the group rows, row for row (a null `deleted` counts as live)."""
    live = _live_state(state)
    left, right = _join(live, groups, ["group_id"], join_type)
    return live.take(left), groups.take(right)


@finding_rule(FindingCode.STATE_FOR_UNKNOWN_GROUP, Severity.WARNING, source=Source.SHARE_STATE)
def state_for_unknown_group(state: pa.Table, groups: pa.Table) -> FoundRows:
    """Live share state of a group that has no share-group record in `__consumer_offsets`:
    the two exports are from different times or clusters, or the group's records are missing
    from the consumer-offsets export. Export both topics from the same cluster at the same
    time."""
    live = _live_state(state)
    left, right = _join(live, groups, ["group_id"], "left outer")
    found = live.take(left[right < 0])
    return FoundRows(
        found,
        message(
            found.num_rows,
            "live share state, but __consumer_offsets has no share-group record of group '",
            found.column("group_id"),
            "': the exports are from different times or clusters, or the group's records"
            " are missing from the export",
        ),
        AT_LAST_STATE_RECORD,
    )


@finding_rule(FindingCode.STATE_FOR_DELETED_GROUP, Severity.WARNING, source=Source.SHARE_STATE)
def state_for_deleted_group(state: pa.Table, groups: pa.Table) -> FoundRows:
    """Live share state of a group that `__consumer_offsets` shows deleted. Deleting a group
    deletes its share state (tombstones on `__share_group_state`), so the state was left
    behind, or the share-state export ends before the deletion. Compare the exports' end
    times; state left behind is garbage on the cluster."""
    live, group = _with_group(state, groups, "inner")
    deleted = _is_true(group.column("deleted"))
    found, group = live.filter(deleted), group.filter(deleted)
    return FoundRows(
        found,
        message(
            found.num_rows,
            "live share state for group '",
            found.column("group_id"),
            "', which __consumer_offsets shows deleted (ShareGroupMetadata tombstone at offset ",
            group.column("deleted_at_source_offset"),
            "). Deleting a group deletes its share state (tombstones on __share_group_state):"
            " the state was left behind, or the share-state export ends before the deletion",
        ),
        AT_LAST_STATE_RECORD,
    )


@finding_rule(
    FindingCode.PARTITION_NOT_INITIALIZED,
    Severity.WARNING,
    Severity.INFO,
    source=Source.SHARE_STATE,
)
def partition_not_initialized(state: pa.Table, groups: pa.Table) -> FoundRows:
    """Live share state for a topic-partition that the group's
    ShareGroupStatePartitionMetadata does not list as initialized. Info when the partition is
    still initializing or its topic is being deleted; a warning otherwise: the group no
    longer consumes it and its state was not deleted, or the exports are from different
    times. Skipped for groups without that record (Kafka 4.0 never writes it)."""
    live, group = _with_group(state, groups, "inner")
    topic_id, partition = live.column("topic_id"), live.column("partition")
    keep = (
        _is_false(group.column("deleted"))
        & _is_true(pc.is_valid(group.column("state_metadata_source_offset")))
        & _is_false(_contains_partition(group.column("initialized_topics"), topic_id, partition))
    )
    found, group = live.filter(keep), group.filter(keep)
    topic_id, partition = found.column("topic_id"), found.column("partition")
    initializing = _is_true(
        _contains_partition(group.column("initializing_topics"), topic_id, partition)
    )
    deleting = _is_true(_contains_topic(group.column("deleting_topics"), topic_id))
    why = [
        ": it is still initializing"
        if i
        else ": its topic is being deleted"
        if d
        else ": the group no longer consumes it and its state was not deleted, or the"
        " exports are from different times"
        for i, d in zip(initializing, deleting, strict=True)
    ]
    return FoundRows(
        found,
        message(
            found.num_rows,
            "live share state, but the group's ShareGroupStatePartitionMetadata (offset ",
            group.column("state_metadata_source_offset"),
            ") does not list this topic-partition as initialized",
            pa.array(why, pa.string()),
        ),
        AT_LAST_STATE_RECORD,
        severity=choose(
            pa.array(initializing | deleting), Severity.INFO.value, Severity.WARNING.value
        ),
    )


def _listed_topics(groups: pa.Table, topics: str) -> pa.Table:
    """The topics a live group's ShareGroupStatePartitionMetadata lists in `topics`, one row
    each: `group_id`, `topic_id`, `_topic_name`, the record's
    offset and time, the group's last record's partition, and `_partitions` where the
    topics list them."""
    listed = groups.filter(
        _is_false(groups.column("deleted"))
        & _is_true(pc.is_valid(groups.column("state_metadata_timestamp")))
    )
    parent, elements = _explode(listed.column(topics))
    fields = _fields(elements)
    at = pa.array(parent)
    columns = {
        "group_id": pc.take(listed.column("group_id"), at),
        "topic_id": fields["topic_id"],
        "_topic_name": fields["topic_name"],
        "state_metadata_source_offset": pc.take(listed.column("state_metadata_source_offset"), at),
        "state_metadata_timestamp": pc.take(listed.column("state_metadata_timestamp"), at),
        "last_source_partition": pc.take(listed.column("last_source_partition"), at),
    }
    if "partitions" in fields:  # deleting topics list no partitions
        columns["_partitions"] = fields["partitions"]
    return pa.table(columns)


def _export_end(group_records: pa.Table, rows: int) -> pa.Array:
    """The consumer-offsets export's last record time, for each of `rows` (null when there
    is none: an aggregate over no rows)."""
    end = pc.max(group_records.column("source_timestamp"))
    return pa.array([end.as_py()] * rows, end.type)


def _stuck_severity(listed: pa.Table, end: pa.Array, stall_span_seconds: float) -> pa.Array:
    """A warning once listed for --stall-span before the export's last record, else info."""
    old = age_at_least(end, listed.column("state_metadata_timestamp"), stall_span_seconds)
    return choose(old, Severity.WARNING.value, Severity.INFO.value)


def _stuck_for(listed: pa.Table, end: pa.Array) -> pa.Array:
    """` since at least <time> (<hours> h before ...)` of each listed topic."""
    at = listed.column("state_metadata_timestamp")
    return message(
        listed.num_rows,
        " since at least ",
        at,
        " (",
        hours_between(end, at),
        " h before the __consumer_offsets export's last record)",
    )


@finding_rule(
    FindingCode.STUCK_INITIALIZING,
    Severity.WARNING,
    Severity.INFO,
    source=Source.CONSUMER_OFFSETS,
)
def stuck_initializing(
    state: pa.Table, groups: pa.Table, group_records: pa.Table, stall_span_seconds: float
) -> FoundRows:
    """A topic-partition the group's ShareGroupStatePartitionMetadata lists as initializing,
    one finding per partition: a warning once listed for --stall-span before the
    consumer-offsets export's last record, info before. If `__share_group_state` already
    holds its state, the group coordinator did not record the completed initialization;
    check the group coordinator's and the share coordinator's logs."""
    topics = _listed_topics(groups, "initializing_topics")
    parent, partitions = _explode(topics.column("_partitions"))
    exploded = topics.drop_columns(["_partitions"]).take(pa.array(parent))
    exploded = exploded.append_column("partition", partitions)
    live = _live_state(state)
    left, right = _join(exploded, live, list(KEY), "left outer")
    found = exploded.take(pa.array(left))
    has_state = pa.array(right >= 0)
    end = _export_end(group_records, found.num_rows)
    return FoundRows(
        found,
        message(
            found.num_rows,
            "partition ",
            found.column("partition"),
            " of topic ",
            pc.coalesce(found.column("_topic_name"), found.column("topic_id")),
            " has been initializing",
            _stuck_for(found, end),
            choose(
                has_state,
                "; __share_group_state already holds its state, so the group coordinator"
                " did not record the completed initialization",
                "; no share state exists for it yet",
            ),
        ),
        {
            "group_id": "group_id",
            "topic_id": "topic_id",
            "partition": "partition",
            "source_partition": "last_source_partition",
            "source_offset": "state_metadata_source_offset",
            "affected": 1,
        },
        severity=_stuck_severity(found, end, stall_span_seconds),
    )


@finding_rule(
    FindingCode.STUCK_DELETING,
    Severity.WARNING,
    Severity.INFO,
    source=Source.CONSUMER_OFFSETS,
)
def stuck_deleting(
    state: pa.Table, groups: pa.Table, group_records: pa.Table, stall_span_seconds: float
) -> FoundRows:
    """A topic the group's ShareGroupStatePartitionMetadata lists as deleting, one finding
    per topic with how many of its share-partitions still have live state: a warning once
    listed for --stall-span before the consumer-offsets export's last record, info before.
    Deleting a topic from a group deletes its share state first; a topic stuck here points
    at the share coordinator: check its logs."""
    found = _listed_topics(groups, "deleting_topics")
    on = ["group_id", "topic_id"]
    per_topic = (
        _live_state(state).select(on).group_by(on, use_threads=False).aggregate([([], "count_all")])
    )
    left, right = _join(found, per_topic, on, "left outer")
    counts = per_topic.column("count_all").to_numpy()
    live_partitions = np.zeros(found.num_rows, dtype=np.int64)
    # Each (group, topic) is one row of `per_topic`: a listed topic matches one at most.
    live_partitions[left[right >= 0]] = counts[right[right >= 0]]
    live_partitions_array = pa.array(live_partitions)
    end = _export_end(group_records, found.num_rows)
    return FoundRows(
        found,
        message(
            found.num_rows,
            "topic ",
            pc.coalesce(found.column("_topic_name"), found.column("topic_id")),
            " has been deleting",
            _stuck_for(found, end),
            "; ",
            live_partitions_array,
            " of its share-partitions still have live share state",
        ),
        {
            "group_id": "group_id",
            "topic_id": "topic_id",
            "source_partition": "last_source_partition",
            "source_offset": "state_metadata_source_offset",
            "affected": live_partitions_array,
        },
        severity=_stuck_severity(found, end, stall_span_seconds),
    )
