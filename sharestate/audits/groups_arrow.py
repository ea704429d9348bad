"""`share_groups`, `latest_group_records` and `topic_names`: the share groups of
`__consumer_offsets` as the group coordinator holds them, from the decoded group records.
Group records are few (tens to thousands), so the rows are rolled up in plain Python loops,
clarity before speed; nested values are taken whole from the input columns. Pure pyarrow:
no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cmp_to_key
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sharestate.arrow_keys import distinct_keys, take_indices

#: Record type ids (`sharestate.kafka.schemas.GROUP_RECORD_TYPES`) the groups are built from.
PARTITION_METADATA: Final = 9  # Kafka 4.0 only
MEMBER_METADATA: Final = 10
GROUP_METADATA: Final = 11
TARGET_ASSIGNMENT_METADATA: Final = 12
CURRENT_MEMBER_ASSIGNMENT: Final = 14
STATE_PARTITION_METADATA: Final = 15

#: The columns whose topic lists name topics (`topic_names`).
TOPIC_LIST_COLUMNS: Final = (
    "initializing_topics",
    "initialized_topics",
    "deleting_topics",
    "partition_metadata_topics",
)
#: A member's columns in `share_groups.members`: from its metadata (type 10), then from its
#: current assignment (type 14).
MEMBER_COLUMNS: Final = (
    "member_id",
    "client_id",
    "client_host",
    "rack_id",
    "subscribed_topic_names",
)
ASSIGNMENT_COLUMNS: Final = ("member_epoch", "member_state", "assigned_partitions")

#: `topic_names`' columns.
TOPIC_NAMES_SCHEMA: Final = pa.schema(
    [pa.field("topic_id", pa.string()), pa.field("topic_name", pa.string())]
)

# A record's place in the log as Spark orders `struct(source_partition, source_offset,
# source_timestamp)`: field by field, a null before any value.
_At = tuple[tuple[int, int], ...]


def _nulls_first(value: int | None) -> tuple[int, int]:
    return (0, 0) if value is None else (1, value)


def _python(table: pa.Table, name: str) -> list[Any]:
    values: list[Any] = table.column(name).to_pylist()
    return values


def _micros(table: pa.Table, name: str) -> list[int | None]:
    values: list[int | None] = table.column(name).cast(pa.int64()).to_pylist()
    return values


def latest_group_records(group_records: pa.Table) -> pa.Table:
    """The latest share-group record (log order) of every record key: (type, group, member),
    nulls a key like any value; every column of `group_records`, in their order."""
    share = group_records.filter(group_records.column("is_share_record"))
    types = _python(share, "record_type_id")
    groups = _python(share, "group_id")
    members = _python(share, "member_id")
    partitions = _python(share, "source_partition")
    offsets = _python(share, "source_offset")
    # Spark ranks by partition then offset descending, nulls last: a null is the oldest.
    best: dict[tuple[Any, ...], tuple[tuple[tuple[int, int], ...], int]] = {}
    for row, key in enumerate(zip(types, groups, members, strict=True)):
        place = (_nulls_first(partitions[row]), _nulls_first(offsets[row]))
        if key not in best or place > best[key][0]:
            best[key] = (place, row)
    kept = sorted(row for _, row in best.values())
    return share.take(pa.array(kept, pa.int64()))


def _flattened_topics(records: pa.Table, name: str) -> tuple[pa.Array, pa.Array]:
    """The topic ids and names of every element of the `name` topic lists of `records`
    (Spark's `explode` of them: a null element gives a null id and name)."""
    flat = pc.list_flatten(records.column(name)).combine_chunks()
    assert isinstance(flat, pa.StructArray)
    fields = flat.flatten()  # with the elements' own nulls
    index = flat.type.get_field_index
    return fields[index("topic_id")], fields[index("topic_name")]


def topic_names(group_records: pa.Table) -> pa.Table:
    """(topic_id, topic_name) pairs named by live share-group records (types 15 and 9), each
    once (`TOPIC_NAMES_SCHEMA`)."""
    live = pc.and_kleene(
        group_records.column("is_share_record"), pc.invert(group_records.column("tombstone"))
    )
    share = group_records.filter(live)
    ids: list[pa.Array] = []
    names: list[pa.Array] = []
    for name in TOPIC_LIST_COLUMNS:
        topic_ids, topic_names_ = _flattened_topics(share, name)
        ids.append(topic_ids.cast(pa.string()))
        names.append(topic_names_.cast(pa.string()))
    pairs = pa.table(
        {
            "topic_id": pa.chunked_array(ids, pa.string()),
            "topic_name": pa.chunked_array(names, pa.string()),
        }
    )
    pairs = pairs.filter(pc.is_valid(pairs.column("topic_name")))
    return distinct_keys(pairs, ["topic_id", "topic_name"]).cast(TOPIC_NAMES_SCHEMA)


def share_groups_schema(group_records: pa.Schema) -> pa.Schema:
    """The columns of `share_groups` (as Spark's `toArrow` gives them) for group records of
    `group_records`' schema: nested types are the records' own."""

    def typed(name: str, nullable: bool = True) -> pa.Field:
        return pa.field(name, group_records.field(name).type, nullable)

    member = pa.struct([typed(c) for c in (*MEMBER_COLUMNS, *ASSIGNMENT_COLUMNS)])
    names_type = group_records.field("initializing_topics").type.value_type.field("topic_name")
    return pa.schema(
        [
            typed("group_id"),
            typed("group_epoch"),
            typed("metadata_hash"),
            typed("assignment_epoch"),
            pa.field("deleted", pa.bool_()),
            pa.field("deleted_at_source_offset", group_records.field("source_offset").type),
            pa.field("deleted_at_timestamp", group_records.field("source_timestamp").type),
            pa.field("member_count", pa.int32(), nullable=False),
            pa.field(
                "members", pa.list_(pa.field("element", member, nullable=False)), nullable=False
            ),
            typed("initializing_topics"),
            typed("initialized_topics"),
            typed("deleting_topics"),
            pa.field("initializing_partitions", pa.int64()),
            pa.field("initialized_partitions", pa.int64()),
            pa.field("deleting_topic_count", pa.int32(), nullable=False),
            pa.field("topic_names", pa.list_(pa.field("element", names_type.type)), nullable=False),
            pa.field("state_metadata_source_offset", group_records.field("source_offset").type),
            pa.field("state_metadata_timestamp", group_records.field("source_timestamp").type),
            pa.field("last_source_partition", group_records.field("source_partition").type),
            pa.field("last_source_offset", group_records.field("source_offset").type),
            pa.field("last_source_timestamp", group_records.field("source_timestamp").type),
        ]
    )


class _Latest:
    """The latest records as Python values, for rolling them up per group."""

    def __init__(self, latest: pa.Table) -> None:
        self.types: list[int | None] = _python(latest, "record_type_id")
        self.tombstones: list[bool | None] = _python(latest, "tombstone")
        self.groups: list[str | None] = _python(latest, "group_id")
        self.members: list[str | None] = _python(latest, "member_id")
        partitions = _python(latest, "source_partition")
        offsets = _python(latest, "source_offset")
        stamps = _micros(latest, "source_timestamp")
        self.at: list[_At] = [
            (_nulls_first(p), _nulls_first(o), _nulls_first(t))
            for p, o, t in zip(partitions, offsets, stamps, strict=True)
        ]
        topic_lists = {name: _python(latest, name) for name in TOPIC_LIST_COLUMNS}
        self.topic_lists: dict[str, list[list[dict[str, Any] | None] | None]] = topic_lists

    def alive(self, row: int) -> bool:
        """Spark's `~tombstone` as a filter: a null tombstone flag is not alive."""
        return self.tombstones[row] is False

    def latest_at(self, rows: Iterable[int]) -> int:
        """Of `rows`, the one latest in log order (-1 for none): Spark's `max(at)`."""
        return max(rows, key=lambda row: self.at[row], default=-1)


def _partition_count(topics: list[dict[str, Any] | None] | None) -> int:
    """`_partition_count`: the partitions of every topic, a null list counting 0 (`size` of a
    null is null with ANSI on, Spark 4's default, and is then coalesced to 0)."""
    return sum(len((topic or {}).get("partitions") or ()) for topic in topics or ())


def _names(topics: list[dict[str, Any] | None] | None) -> list[str | None]:
    return [(topic or {}).get("topic_name") for topic in topics or ()]


def _by_member_id(a: str | None, b: str | None) -> int:
    """`_members_by_id`'s comparator: a null member id compares equal to any."""
    if a is None or b is None:
        return 0
    return -1 if a < b else 1 if a > b else 0


def _ordered_members(
    members: list[tuple[int, int]], member_ids: list[str | None]
) -> list[tuple[int, int]]:
    key: Callable[[tuple[int, int]], Any] = cmp_to_key(
        lambda a, b: _by_member_id(member_ids[a[0]], member_ids[b[0]])
    )
    return sorted(members, key=key)


def share_groups(group_records: pa.Table) -> pa.Table:
    """One row per share group seen in `__consumer_offsets`, from the latest record of every
    record key, as Kafka's group coordinator replays them (a tombstone removes its key);
    (`share_groups_schema`)."""
    schema = share_groups_schema(group_records.schema)
    latest = latest_group_records(group_records)
    rows = _Latest(latest)
    by_group: dict[str | None, list[int]] = {}
    for row, group in enumerate(rows.groups):
        by_group.setdefault(group, []).append(row)
    # Live assignments (type 14) by (group, member): a null key joins nothing.
    assignments = {
        (rows.groups[row], rows.members[row]): row
        for row in range(latest.num_rows)
        if rows.types[row] == CURRENT_MEMBER_ASSIGNMENT
        and rows.alive(row)
        and rows.groups[row] is not None
        and rows.members[row] is not None
    }
    group_ids = sorted(by_group, key=lambda g: (g is not None, g or ""))
    picks: dict[str, list[int]] = {
        name: [] for name in ("group", "meta", "assignment", "spm", "deleted", "last")
    }
    deleted: list[bool] = []
    member_rows: list[tuple[int, int]] = []
    member_offsets = [0]
    partition_counts: dict[str, list[int]] = {"initializing_topics": [], "initialized_topics": []}
    deleting_counts: list[int] = []
    all_names: list[list[str]] = []
    for group in group_ids:
        mine = by_group[group]

        def of_type(record_type: int, mine: list[int] = mine) -> int:
            # Spark's `first(..., ignorenulls=True)`: one row per group for types 11, 12,
            # 15 and 9 (their member id is null); should there be more, the latest.
            return rows.latest_at(r for r in mine if rows.types[r] == record_type)

        def live(row: int) -> bool:
            return row >= 0 and rows.alive(row)

        meta = of_type(GROUP_METADATA)
        assignment = of_type(TARGET_ASSIGNMENT_METADATA)
        spm = of_type(STATE_PARTITION_METADATA)
        pm = of_type(PARTITION_METADATA)
        last_live = rows.latest_at(r for r in mine if rows.alive(r))
        # Deleted: the latest group metadata is a tombstone and nothing live came after it.
        is_deleted = (
            meta >= 0
            and rows.tombstones[meta] is True
            and (last_live < 0 or rows.at[last_live] < rows.at[meta])
        )
        picks["group"].append(mine[0])
        picks["meta"].append(meta if live(meta) else -1)
        picks["assignment"].append(assignment if live(assignment) else -1)
        picks["spm"].append(spm if live(spm) else -1)
        picks["deleted"].append(meta if is_deleted else -1)
        picks["last"].append(rows.latest_at(mine))
        deleted.append(is_deleted)

        members = [
            (row, assignments.get((group, rows.members[row]), -1))
            for row in mine
            if rows.types[row] == MEMBER_METADATA and rows.alive(row) and group is not None
        ]
        member_rows.extend(_ordered_members(members, rows.members))
        member_offsets.append(len(member_rows))

        def topics(name: str, row: int) -> list[dict[str, Any] | None] | None:
            return rows.topic_lists[name][row] if live(row) else None

        for name, counts in partition_counts.items():
            counts.append(_partition_count(topics(name, spm)))
        deleting_counts.append(len(topics("deleting_topics", spm) or ()))
        names = [
            *_names(topics("initializing_topics", spm)),
            *_names(topics("initialized_topics", spm)),
            *_names(topics("deleting_topics", spm)),
            *_names(topics("partition_metadata_topics", pm)),
        ]
        all_names.append(sorted({name for name in names if name is not None}))

    def take(name: str, pick: str) -> pa.Array:
        return _take(latest, name, picks[pick])

    columns: dict[str, pa.Array] = {
        "group_id": take("group_id", "group"),
        "group_epoch": take("group_epoch", "meta"),
        "metadata_hash": take("metadata_hash", "meta"),
        "assignment_epoch": take("assignment_epoch", "assignment"),
        "deleted": pa.array(deleted, pa.bool_()),
        "deleted_at_source_offset": take("source_offset", "deleted"),
        "deleted_at_timestamp": take("source_timestamp", "deleted"),
        "member_count": pa.array(np.diff(member_offsets), pa.int32()),
        "members": _members(latest, member_rows, member_offsets, schema.field("members").type),
        "initializing_topics": take("initializing_topics", "spm"),
        "initialized_topics": take("initialized_topics", "spm"),
        "deleting_topics": take("deleting_topics", "spm"),
        "initializing_partitions": pa.array(partition_counts["initializing_topics"], pa.int64()),
        "initialized_partitions": pa.array(partition_counts["initialized_topics"], pa.int64()),
        "deleting_topic_count": pa.array(deleting_counts, pa.int32()),
        "topic_names": pa.array(all_names, schema.field("topic_names").type),
        "state_metadata_source_offset": take("source_offset", "spm"),
        "state_metadata_timestamp": take("source_timestamp", "spm"),
        "last_source_partition": take("source_partition", "last"),
        "last_source_offset": take("source_offset", "last"),
        "last_source_timestamp": take("source_timestamp", "last"),
    }
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def _take(table: pa.Table, name: str, rows: Sequence[int]) -> pa.Array:
    """`table`'s `name` values at `rows`, null where a row is -1."""
    column = table.column(name).combine_chunks()
    return pc.take(column, take_indices(np.asarray(rows, dtype=np.int64)))


def _members(
    latest: pa.Table,
    member_rows: list[tuple[int, int]],
    offsets: list[int],
    type_: pa.ListType,
) -> pa.Array:
    """The groups' member lists: each member's metadata row and assignment row (-1: none)
    taken whole into a struct, the lists cut at `offsets`."""
    struct_type = type_.value_type
    metadata = [row for row, _ in member_rows]
    assignment = [row for _, row in member_rows]
    fields = [struct_type.field(i) for i in range(struct_type.num_fields)]
    values = [
        _take(latest, f.name, metadata if f.name in MEMBER_COLUMNS else assignment).cast(f.type)
        for f in fields
    ]
    members = pa.StructArray.from_arrays(values, fields=fields)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), members, type=type_)
