"""The share groups (`groups_arrow.share_groups`, `latest_group_records`, `topic_names`) of
hand-built `__consumer_offsets` records, with the rows Kafka's group coordinator holds after
replaying them (docs/audits.md, "Share groups": the latest record of each key, a tombstone
removing it; a group deleted when its latest metadata is a tombstone with nothing live
after): tombstones of every type, a deleted group re-created, members with and without an
assignment, Kafka 4.0's partition metadata (type 9), null topic lists and null values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from sharestate.audits import groups_arrow
from tests.support.group_tables import GROUP_RECORDS_SCHEMA, group_records_table

BASE = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
T1, T2, T3 = "Uj5wn_FqTXirEASvVZRY1w", "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBA"
ASSIGNMENT = [{"topic_id": T1, "partitions": [0, 1]}]


def _topics(*items: tuple[str, str | None, list[int] | None]) -> list[dict[str, Any]]:
    return [{"topic_id": t, "topic_name": n, "partitions": p} for t, n, p in items]


def _metadata(*items: tuple[str, str | None]) -> list[dict[str, Any] | None]:
    return [
        {"topic_id": t, "topic_name": n, "num_partitions": 2, "partition_metadata": []}
        for t, n in items
    ]


Record = tuple[int, int, int, str | None, str | None, bool | None, dict[str, Any]]
# (source partition, offset, type, group, member, tombstone, value fields)
RECORDS: list[Record] = [
    # "orders": live metadata, three members (one without an assignment, one tombstoned),
    # written out of member-id order; a live state metadata with every topic list.
    (3, 0, 11, "orders", None, False, {"group_epoch": 3, "metadata_hash": 42}),
    (3, 1, 10, "orders", "m3", False, {"client_id": "c3", "rack_id": "r1"}),
    (
        3,
        2,
        10,
        "orders",
        "m1",
        False,
        {"client_id": "c1", "client_host": "/10.0.0.1", "subscribed_topic_names": ["t-one"]},
    ),
    (3, 3, 10, "orders", "m2", False, {"client_id": "c2", "client_host": "/10.0.0.2"}),
    (
        3,
        4,
        14,
        "orders",
        "m1",
        False,
        {"member_epoch": 3, "previous_member_epoch": 2, "member_state": 0}
        | {"assigned_partitions": ASSIGNMENT},
    ),
    (3, 5, 14, "orders", "m3", False, {"member_epoch": 2, "member_state": 1}),
    (3, 6, 12, "orders", None, False, {"assignment_epoch": 3}),
    (3, 7, 10, "orders", "m2", True, {}),
    (3, 8, 13, "orders", "m1", False, {"target_partitions": ASSIGNMENT}),
    (
        3,
        9,
        15,
        "orders",
        None,
        False,
        {
            "initializing_topics": _topics((T2, "t-two", [1]), (T3, None, None)),
            "initialized_topics": _topics((T1, "t-one", [0, 1])),
            "deleting_topics": [{"topic_id": T3, "topic_name": "t-three"}, None],
        },
    ),
    # An assignment whose member's metadata is tombstoned; then the assignment is too.
    (3, 10, 14, "orders", "m2", False, {"member_epoch": 1, "member_state": 0}),
    (3, 11, 14, "orders", "m3", True, {}),
    # "g-deleted": live records, then tombstones of its metadata (types 15, 12, 11).
    (3, 20, 11, "g-deleted", None, False, {"group_epoch": 1, "metadata_hash": 7}),
    (3, 21, 10, "g-deleted", "x", False, {"client_id": "cx"}),
    (3, 22, 12, "g-deleted", None, False, {"assignment_epoch": 1}),
    (3, 23, 15, "g-deleted", None, True, {}),
    (3, 24, 12, "g-deleted", None, True, {}),
    (3, 25, 10, "g-deleted", "x", True, {}),
    (3, 26, 11, "g-deleted", None, True, {}),
    # "reborn": deleted, then re-created with a new metadata record.
    (3, 30, 11, "reborn", None, False, {"group_epoch": 5}),
    (3, 31, 11, "reborn", None, True, {}),
    (3, 32, 11, "reborn", None, False, {"group_epoch": 1, "metadata_hash": 9}),
    (3, 33, 15, "reborn", None, False, {}),  # null topic lists
    # "revived": its metadata tombstoned, then a live member (no new metadata).
    (3, 40, 11, "revived", None, True, {}),
    (3, 41, 10, "revived", "a", False, {"client_id": "ca"}),
    # "legacy" (Kafka 4.0): topics from ShareGroupPartitionMetadata (type 9).
    (3, 50, 11, "legacy", None, False, {"group_epoch": 1}),
    (
        3,
        51,
        9,
        "legacy",
        None,
        False,
        {"partition_metadata_topics": [*_metadata((T1, "t-one"), (T2, None)), None]},
    ),
    # "legacy-gone": its partition metadata tombstoned; a state metadata tombstone too.
    (3, 55, 9, "legacy-gone", None, False, {"partition_metadata_topics": _metadata((T3, "t-3"))}),
    (3, 56, 9, "legacy-gone", None, True, {}),
    (3, 57, 15, "legacy-gone", None, True, {}),
    # "moved": records on two partitions: partition 4 comes after partition 3 in log order.
    (4, 1, 11, "moved", None, False, {"group_epoch": 8}),
    (3, 60, 11, "moved", None, False, {"group_epoch": 7}),
    (4, 2, 10, "moved", "z", False, {"client_id": "cz"}),
    (3, 61, 10, "moved", "z", True, {}),
    # "unknown": a null tombstone flag (not alive, not a tombstone).
    (3, 70, 11, "unknown", None, None, {"group_epoch": 4}),
    (3, 71, 15, "unknown", None, None, {"initialized_topics": _topics((T1, "t-one", [0]))}),
    # A share record of no group; a classic group's OffsetCommit (not a share record).
    (3, 80, 11, None, None, False, {"group_epoch": 2}),
    (3, 81, 10, None, "n", False, {"client_id": "cn"}),
    (3, 82, 1, None, None, False, {}),
]


def _records() -> pa.Table:
    return group_records_table(
        (partition, offset, _at(offset), kind, group, member, dead, values)
        for partition, offset, kind, group, member, dead, values in RECORDS
    )


def _at(offset: int) -> datetime:
    return BASE + timedelta(minutes=offset)


def _group(group: str | None, last: tuple[int, int], **values: Any) -> dict[str, Any]:
    """A `share_groups` row: no metadata, members or topics unless `values` say so."""
    return {
        "group_id": group,
        "group_epoch": None,
        "metadata_hash": None,
        "assignment_epoch": None,
        "deleted": False,
        "deleted_at_source_offset": None,
        "deleted_at_timestamp": None,
        "member_count": len(values.get("members", [])),
        "members": [],
        "initializing_topics": None,
        "initialized_topics": None,
        "deleting_topics": None,
        "initializing_partitions": 0,
        "initialized_partitions": 0,
        "deleting_topic_count": 0,
        "topic_names": [],
        "state_metadata_source_offset": None,
        "state_metadata_timestamp": None,
        "last_source_partition": last[0],
        "last_source_offset": last[1],
        "last_source_timestamp": _at(last[1]),
        **values,
    }


def _member(member: str, client: str, **values: Any) -> dict[str, Any]:
    return {
        "member_id": member,
        "client_id": client,
        "client_host": None,
        "rack_id": None,
        "subscribed_topic_names": None,
        "member_epoch": None,
        "member_state": None,
        "assigned_partitions": None,
        **values,
    }


def test_share_groups_of_hand_built_records() -> None:
    records = _records()
    found = groups_arrow.share_groups(records)
    assert found.schema == groups_arrow.share_groups_schema(records.schema)
    # One row per group id, the null one first, then in id order.
    assert found.to_pylist() == [
        # A share record of no group: its metadata counts, its member joins no group; the
        # classic group's OffsetCommit (offset 82) is not a share record.
        _group(None, (3, 81), group_epoch=2),
        # Deleted: the latest metadata (offset 26) is a tombstone, nothing live after it.
        _group(
            "g-deleted",
            (3, 26),
            deleted=True,
            deleted_at_source_offset=26,
            deleted_at_timestamp=_at(26),
        ),
        _group("legacy", (3, 51), group_epoch=1, topic_names=["t-one"]),
        # Its partition metadata tombstoned: no names; no group metadata: not deleted.
        _group("legacy-gone", (3, 57)),
        # Partition 4's records come after partition 3's: epoch 8, member z alive.
        _group("moved", (4, 2), group_epoch=8, members=[_member("z", "cz")]),
        _group(
            "orders",
            (3, 11),
            group_epoch=3,
            metadata_hash=42,
            assignment_epoch=3,
            # m2's metadata is tombstoned (its assignment lives on: no member); m3's
            # assignment is tombstoned; by member id.
            members=[
                _member(
                    "m1",
                    "c1",
                    client_host="/10.0.0.1",
                    subscribed_topic_names=["t-one"],
                    member_epoch=3,
                    member_state=0,
                    assigned_partitions=ASSIGNMENT,
                ),
                _member("m3", "c3", rack_id="r1"),
            ],
            initializing_topics=_topics((T2, "t-two", [1]), (T3, None, None)),
            initialized_topics=_topics((T1, "t-one", [0, 1])),
            deleting_topics=[{"topic_id": T3, "topic_name": "t-three"}, None],
            # A null partition list counts none; a null topic entry counts as a topic.
            initializing_partitions=1,
            initialized_partitions=2,
            deleting_topic_count=2,
            topic_names=["t-one", "t-three", "t-two"],
            state_metadata_source_offset=9,
            state_metadata_timestamp=_at(9),
        ),
        # Re-created after its tombstone: the latest metadata's epoch; null topic lists.
        _group(
            "reborn",
            (3, 33),
            group_epoch=1,
            metadata_hash=9,
            state_metadata_source_offset=33,
            state_metadata_timestamp=_at(33),
        ),
        # A live member after the metadata's tombstone: not deleted, no epoch.
        _group("revived", (3, 41), members=[_member("a", "ca")]),
        # A null tombstone flag: neither alive (no epoch, no topics) nor deleted.
        _group("unknown", (3, 71)),
    ]


def test_latest_group_records_are_the_latest_share_record_of_each_key() -> None:
    found = groups_arrow.latest_group_records(_records())
    positions = sorted(
        zip(
            found.column("source_partition").to_pylist(),
            found.column("source_offset").to_pylist(),
            strict=True,
        )
    )
    # Left out: records of a key written again later (m2's metadata at 3, m3's assignment
    # at 5, g-deleted's at 20-22, reborn's metadata at 30-31, legacy-gone's partition
    # metadata at 55, moved's at 60-61, before partition 4's) and the OffsetCommit at 82.
    superseded = {3, 5, 20, 21, 22, 30, 31, 55, 60, 61, 82}
    expected = [(p, o) for p, o, *_ in RECORDS if p == 4 or o not in superseded]
    assert positions == sorted(expected)


def test_topic_names_are_every_named_topic_of_any_record() -> None:
    found = groups_arrow.topic_names(_records())
    # Tombstoned records' names too (t-3); a topic named twice gives both names.
    assert sorted(found.to_pylist(), key=repr) == sorted(
        [
            {"topic_id": T1, "topic_name": "t-one"},
            {"topic_id": T2, "topic_name": "t-two"},
            {"topic_id": T3, "topic_name": "t-three"},
            {"topic_id": T3, "topic_name": "t-3"},
        ],
        key=repr,
    )
    assert found.schema == groups_arrow.TOPIC_NAMES_SCHEMA


def test_no_records_give_no_groups() -> None:
    records = GROUP_RECORDS_SCHEMA.empty_table()
    found = groups_arrow.share_groups(records)
    assert found.num_rows == 0
    assert found.schema == groups_arrow.share_groups_schema(records.schema)
    assert groups_arrow.topic_names(records).num_rows == 0
    assert groups_arrow.latest_group_records(records).num_rows == 0
