"""The share groups computed in Arrow (`sharestate.audits.groups_arrow`) give the rows and
column types of their DataFrame twins (`sharestate.audits.groups`): on a sample export's
group records, and on hand-built records with tombstones of every type, a deleted group
re-created, members with and without an assignment, Kafka 4.0's partition metadata (type 9),
null topic lists and null values where Spark's null handling decides the outcome."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from sharestate.audits import groups, groups_arrow
from sharestate.decode.columns import GROUP_RECORD_FIELDS
from sharestate.job.config import JobConfig
from sharestate.job.pipeline import compute
from sharestate.sample.exports import SampleSpec, write_sample
from tests.support.group_records import group_records_frame

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


def _records_df(spark: SparkSession, records: list[Record]) -> DataFrame:
    """Decoded `__consumer_offsets` group records as the decode step gives them."""
    return group_records_frame(
        spark,
        [
            (partition, offset, BASE + timedelta(minutes=offset), kind, group, member, dead, values)
            for partition, offset, kind, group, member, dead, values in records
        ],
    )


@pytest.fixture(scope="module")
def sample_records(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DataFrame]:
    root: Path = tmp_path_factory.mktemp("groups-sample")
    write_sample(root, SampleSpec(records=1500))
    config = JobConfig(
        share_state=str(root / "share_state"), consumer_offsets=str(root / "consumer_offsets")
    )
    results = compute(spark, config)
    try:
        assert results.share_group_records is not None
        yield results.share_group_records
    finally:
        results.unpersist()


def _sorted(table: pa.Table, *keys: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = table.sort_by([(k, "ascending") for k in keys]).to_pylist()
    return rows


def _assert_twins(frame: DataFrame) -> pa.Table:
    """Each Arrow twin equal to its DataFrame version on `frame`; the share groups returned."""
    records = frame.toArrow()
    expected = groups.share_groups(frame).toArrow()
    found = groups_arrow.share_groups(records)
    assert found.schema == expected.schema
    assert found.schema == groups_arrow.share_groups_schema(records.schema)
    assert _sorted(found, "group_id") == _sorted(expected, "group_id")

    expected_latest = groups.latest_group_records(frame).toArrow()
    found_latest = groups_arrow.latest_group_records(records)
    assert found_latest.schema == expected_latest.schema
    order = ("source_partition", "source_offset")
    assert _sorted(found_latest, *order) == _sorted(expected_latest, *order)

    expected_names = groups.topic_names(frame).toArrow()
    found_names = groups_arrow.topic_names(records)
    assert found_names.schema == expected_names.schema
    names = ("topic_id", "topic_name")
    assert _sorted(found_names, *names) == _sorted(expected_names, *names)
    return found


@pytest.mark.spark
def test_share_groups_of_a_sample_equal_the_dataframe_ones(sample_records: DataFrame) -> None:
    found = _assert_twins(sample_records)
    assert found.num_rows > 0
    assert sum(found.column("member_count").to_pylist()) > 0


@pytest.mark.spark
def test_share_groups_of_hand_built_records_equal_the_dataframe_ones(spark: SparkSession) -> None:
    found = _assert_twins(_records_df(spark, RECORDS))
    by_group = {row["group_id"]: row for row in found.to_pylist()}
    # The cases the records are there for.
    assert [m["member_id"] for m in by_group["orders"]["members"]] == ["m1", "m3"]
    assert by_group["orders"]["members"][1]["member_epoch"] is None  # its assignment tombstoned
    assert by_group["orders"]["topic_names"] == ["t-one", "t-three", "t-two"]
    assert by_group["orders"]["initializing_partitions"] == 1
    assert by_group["orders"]["deleting_topic_count"] == 2
    assert (
        by_group["g-deleted"]["deleted"],
        by_group["g-deleted"]["deleted_at_source_offset"],
    ) == (
        True,
        26,
    )
    assert (by_group["reborn"]["deleted"], by_group["reborn"]["group_epoch"]) == (False, 1)
    assert (by_group["revived"]["deleted"], by_group["revived"]["member_count"]) == (False, 1)
    assert by_group["legacy"]["topic_names"] == ["t-one"]
    assert by_group["legacy-gone"]["topic_names"] == []
    assert (by_group["moved"]["group_epoch"], by_group["moved"]["member_count"]) == (8, 1)
    assert (by_group["unknown"]["group_epoch"], by_group["unknown"]["deleted"]) == (None, False)
    assert by_group[None]["members"] == []


def test_no_records_give_no_groups() -> None:
    fields = [
        pa.field("source_partition", pa.int32()),
        pa.field("source_offset", pa.int64()),
        pa.field("source_timestamp", pa.timestamp("us", tz="UTC")),
        *GROUP_RECORD_FIELDS,
    ]
    records = pa.schema(fields).empty_table()
    found = groups_arrow.share_groups(records)
    assert found.num_rows == 0
    assert found.schema == groups_arrow.share_groups_schema(records.schema)
    assert groups_arrow.topic_names(records).num_rows == 0
    assert groups_arrow.latest_group_records(records).num_rows == 0
