"""Audit tables: hand-built edge cases with exact expected values, and the sample exports
checked against independent reference computations (per-offset sets for the archived
ranges, a literal port of Kafka's ShareCoordinatorOffsetsManager for the pruning cut-off).

Each data set is audited once per module and its tables collected once; the tests read the
collected rows. On data this small the time goes to planning and compiling the audit
queries (about a hundred shuffle stages), so the module turns off whole-stage code
generation and adaptive execution while it runs: the results do not depend on either."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as sf
from pyspark.sql import types as T

from sharestate import audits
from sharestate.audits import pruning_arrow, ranges_arrow, segments_arrow
from sharestate.audits.findings import (
    FINDINGS_SCHEMA,
    PLACEMENT_RULES,
    RULES,
    SEVERITIES,
    FindingCode,
    FindingRule,
    Severity,
    catalog,
    findings_of,
)
from sharestate.audits.findings.records import gap_ranges
from sharestate.decode.columns import KEY, LOG_ORDER
from sharestate.errors import InputSchemaError, InvalidConfigError
from sharestate.io import read_end_offsets
from sharestate.io.store import arrow_frame
from sharestate.job.config import JobConfig, parse_span
from sharestate.job.pipeline import audit_tables, compute
from sharestate.kafka.partitioning import state_topic_partition
from sharestate.kafka.records import decode_share_state
from sharestate.places import Place
from sharestate.sample.exports import SampleSpec, write_sample
from tests.support.group_records import group_records_frame
from tests.support.start_offsets import start_offset_moves

BASE = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
T1, T2, T3 = "Uj5wn_FqTXirEASvVZRY1w", "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBA"
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
N = 3  # partitions of __share_group_state in the hand-built data

# The share-partitions of the hand-built data.
A = ("orders", T1, 0)  # poison ranges, repeated and overlapping; lag; count above the limit
B = ("orders", T1, 1)  # one snapshot at offset 0: pruning cut-off 0 on its partition
C = ("orders", T2, 0)  # updates only; not initialized in the group metadata; negative lag
D = ("g-deleted", T1, 0)  # update before its snapshot; replay error; group deleted; stalled
E = ("orders", T2, 1)  # deleted; a poison range of a deleted share-partition
F = ("stray", T1, 5)  # on the wrong state-topic partition; unknown group; stalled
H = ("audit", T2, 0)  # snapshot, tombstone, then an update

Batch = tuple[int, int, int, int]


def _ts(offset: int) -> datetime:
    return BASE + timedelta(minutes=offset)


def _utc(value: datetime | None) -> datetime | None:
    """A collected timestamp (naive, in the driver's local zone) in UTC."""
    return None if value is None else value.astimezone(UTC)


RECORD_SCHEMA = T.StructType(
    [
        T.StructField("source_partition", T.IntegerType()),
        T.StructField("source_offset", T.LongType()),
        T.StructField("source_timestamp", T.TimestampType()),
        T.StructField("record_type", T.StringType()),
        T.StructField("group_id", T.StringType()),
        T.StructField("topic_id", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("start_offset", T.LongType()),
        T.StructField("delivery_complete_count", T.IntegerType()),
        T.StructField(
            "state_batches",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("first_offset", T.LongType(), False),
                        T.StructField("last_offset", T.LongType(), False),
                        T.StructField("delivery_state", T.IntegerType(), False),
                        T.StructField("delivery_count", T.IntegerType(), False),
                    ]
                ),
                False,
            ),
        ),
    ]
)
BATCHES_TYPE = RECORD_SCHEMA["state_batches"].dataType
# (source partition, offset, record type, key, start offset, batches); F is placed on 0.
RECORDS: list[tuple[int, int, str, tuple[str, str, int], int | None, list[Batch]]] = [
    (0, 3, "update", D, 55, []),
    (0, 5, "update", F, 5, [(5, 6, AVAILABLE, 2)]),
    (0, 8, "snapshot", D, 60, [(60, 61, ACKNOWLEDGED, 1)]),
    (0, 9, "snapshot", A, 100, []),
    (0, 10, "update", A, -1, [(100, 104, ARCHIVED, 5)]),
    (0, 11, "update", A, -1, [(103, 108, ARCHIVED, 6), (109, 109, ARCHIVED, 2)]),
    (0, 12, "snapshot", A, 110, [(110, 111, ARCHIVED, 5)]),
    (0, 13, "update", A, -1, [(110, 111, ARCHIVED, 5), (112, 112, ARCHIVED, 5)]),
    (0, 14, "update", A, -1, [(120, 120, ARCHIVED, 0)]),
    (0, 15, "update", D, -1, [(63, 63, ACKNOWLEDGED, 1), (64, 64, AVAILABLE, 1)]),
    (1, 0, "snapshot", B, 0, []),
    (1, 1, "update", C, 50, []),
    (1, 2, "update", C, 50, []),
    (1, 3, "snapshot", H, 70, []),
    (1, 4, "tombstone", H, None, []),
    (1, 5, "update", H, 75, []),
    (2, 0, "snapshot", E, 0, []),
    (2, 1, "update", E, -1, [(0, 0, ARCHIVED, 5)]),
    (2, 2, "tombstone", E, None, []),
]

STATE_SCHEMA = T.StructType(
    [
        T.StructField("group_id", T.StringType()),
        T.StructField("topic_id", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("deleted", T.BooleanType()),
        T.StructField("start_offset", T.LongType()),
        T.StructField("effective_start_offset", T.LongType()),
        T.StructField("delivery_complete_count", T.IntegerType()),
        T.StructField("state_batches", BATCHES_TYPE),
        T.StructField("available_offsets", T.LongType()),
        T.StructField("acquired_offsets", T.LongType()),
        T.StructField("last_source_partition", T.IntegerType()),
        T.StructField("last_source_offset", T.LongType()),
    ]
)
# key: (deleted, start, effective start, DCC, batches, available, last record)
STATE: dict[tuple[str, str, int], tuple[Any, ...]] = {
    A: (
        False,
        110,
        113,
        4,
        [
            (110, 112, ARCHIVED, 5),
            (113, 119, AVAILABLE, 1),
            (120, 120, ARCHIVED, 0),
            (121, 121, AVAILABLE, 6),
        ],
        8,
        (0, 14),
    ),
    B: (False, 0, 0, 0, [], 0, (1, 0)),
    C: (False, 50, 50, None, [], 0, (1, 2)),
    D: (
        False,
        60,
        62,
        -1,
        [(60, 61, ACKNOWLEDGED, 1), (63, 63, ACKNOWLEDGED, 1), (64, 64, AVAILABLE, 1)],
        1,
        (0, 15),
    ),
    E: (True, None, None, None, [], None, (2, 2)),
    F: (False, 5, 5, None, [(5, 6, AVAILABLE, 2)], 2, (0, 5)),
    H: (False, 75, 75, None, [], 0, (1, 5)),
}

HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("group_id", T.StringType()),
        T.StructField("topic_id", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("segment", T.LongType()),
        T.StructField("source_partition", T.IntegerType()),
        T.StructField("source_offset", T.LongType()),
        T.StructField("source_timestamp", T.TimestampType()),
        T.StructField("record_type", T.StringType()),
        T.StructField("deleted", T.BooleanType()),
        T.StructField("effective_start_offset", T.LongType()),
        T.StructField("replay_error", T.StringType()),
    ]
)
# (key, segment, source partition, offset, record type, effective start offset, error)
HISTORY: list[tuple[tuple[str, str, int], int, int, int, str, int | None, str | None]] = [
    (A, 1, 0, 9, "snapshot", 100, None),
    (A, 1, 0, 10, "update", 100, None),
    (A, 1, 0, 11, "update", 100, None),
    (A, 2, 0, 12, "snapshot", 110, None),
    (A, 2, 0, 13, "update", 113, None),
    (A, 2, 0, 14, "update", 113, None),
    (B, 1, 1, 0, "snapshot", 0, None),
    (C, 0, 1, 1, "update", 50, None),
    (C, 0, 1, 2, "update", 50, None),
    (D, 0, 0, 3, "update", 55, None),
    (D, 1, 0, 8, "snapshot", 62, None),
    (D, 1, 0, 15, "update", 62, "state batch ends before it starts (at offset 5)"),
    (E, 1, 2, 0, "snapshot", 0, None),
    (E, 1, 2, 1, "update", 0, None),
    (E, 2, 2, 2, "tombstone", None, None),
    (F, 0, 0, 5, "update", 5, None),
    (H, 1, 1, 3, "snapshot", 70, None),
    (H, 2, 1, 4, "tombstone", None, None),
    (H, 2, 1, 5, "update", 75, None),
]

QUARANTINE_SCHEMA = T.StructType(
    [
        T.StructField("source", T.StringType()),
        T.StructField("source_partition", T.IntegerType()),
        T.StructField("source_offset", T.LongType()),
        T.StructField("source_timestamp", T.TimestampType()),
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("reason", T.StringType()),
        T.StructField("reason_kind", T.StringType()),
    ]
)
QUARANTINE = [
    ("share_state", 0, 16, _ts(16), b"k", b"v", "truncated: ...", "truncated"),
    ("consumer_offsets", 3, 9, _ts(9), b"k", b"v", "unknown record type 99", "unknown record type"),
]


def _topics(*items: tuple[str, str, list[int]]) -> list[dict[str, Any]]:
    return [{"topic_id": t, "topic_name": n, "partitions": p} for t, n, p in items]


ASSIGNMENT = [{"topic_id": T1, "partitions": [0, 1]}]
# (offset, type, group, member, tombstone, value fields); all on __consumer_offsets partition 3
GROUP_RECORDS: list[tuple[int, int, str | None, str | None, bool, dict[str, Any]]] = [
    (0, 11, "orders", None, False, {"group_epoch": 3, "metadata_hash": 42}),
    (
        1,
        10,
        "orders",
        "m1",
        False,
        {"client_id": "c1", "client_host": "/10.0.0.1", "subscribed_topic_names": ["t-one"]},
    ),
    (2, 10, "orders", "m2", False, {"client_id": "c2", "client_host": "/10.0.0.2"}),
    (
        3,
        14,
        "orders",
        "m1",
        False,
        {"member_epoch": 3, "previous_member_epoch": 2, "member_state": 0}
        | {"assigned_partitions": ASSIGNMENT},
    ),
    (4, 12, "orders", None, False, {"assignment_epoch": 3}),
    (5, 10, "orders", "m2", True, {}),
    (
        6,
        15,
        "orders",
        None,
        False,
        {
            "initializing_topics": _topics((T2, "t-two", [1])),
            "initialized_topics": _topics((T1, "t-one", [0, 1])),
            "deleting_topics": [{"topic_id": T3, "topic_name": "t-three"}],
        },
    ),
    (7, 11, "g-deleted", None, False, {"group_epoch": 1, "metadata_hash": 7}),
    (8, 15, "g-deleted", None, True, {}),
    # 9: quarantined; 11: missing (compacted away)
    (10, 11, "g-deleted", None, True, {}),
    (12, 11, "legacy", None, False, {"group_epoch": 1}),
    (
        13,
        9,
        "legacy",
        None,
        False,
        {
            "partition_metadata_topics": [
                {"topic_id": T1, "topic_name": "t-one", "num_partitions": 3}
                | {"partition_metadata": []}
            ]
        },
    ),
    (14, 1, None, None, False, {}),  # a classic group's OffsetCommit, not a share record
]


def _group_records_df(spark: SparkSession) -> DataFrame:
    return group_records_frame(
        spark,
        [
            (3, offset, _ts(offset), kind, group, member, tombstone, values)
            for offset, kind, group, member, tombstone, values in GROUP_RECORDS
        ],
    )


def _key_rows(rows: Iterable[Any], *fields: str) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    return {(r.group_id, r.topic_id, r.partition): tuple(r[f] for f in fields) for r in rows}


@dataclass
class HandBuilt:
    delivery_counts: list[Any]
    poison: list[Any]
    archived: list[Any]
    pruning: list[Any]
    groups: list[Any]
    lag: list[Any]
    findings: list[Any]
    #: The partition check's rows with the partition count inferred.
    auto_partition_findings: list[dict[str, Any]]


@pytest.fixture(scope="module")
def fast_sql(spark: SparkSession) -> Iterator[None]:
    settings = {"spark.sql.codegen.wholeStage": "false", "spark.sql.adaptive.enabled": "false"}
    before = {name: spark.conf.get(name) for name in settings}
    for name, value in settings.items():
        spark.conf.set(name, value)
    yield
    for name, value in before.items():
        spark.conf.set(name, value)


def _hand_records(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [
            (sp, so, _ts(so), kind, *key, start, None, batches)
            for sp, so, kind, key, start, batches in RECORDS
        ],
        RECORD_SCHEMA,
    )


def _hand_state(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [
            (*key, deleted, start, eso, dcc, batches, available, None if deleted else 0, *last)
            for key, (deleted, start, eso, dcc, batches, available, last) in STATE.items()
        ],
        STATE_SCHEMA,
    )


def _placement_findings(placements: pa.Table, partitions: int | None) -> list[dict[str, Any]]:
    """The rows of the partition check's rules (`PLACEMENT_RULES`) over `placements`."""
    found = findings_of(
        PLACEMENT_RULES, {"placements": placements, "state_topic_partitions": partitions}
    )
    assert found is not None
    rows: list[dict[str, Any]] = found.to_pylist()
    return rows


def _hand_tables(
    spark: SparkSession, place: Place = "driver"
) -> tuple[audits.AuditTables, DataFrame]:
    """The hand-built data's audit tables (worked on at `place`), and its placements."""
    records, state = _hand_records(spark), _hand_state(spark)
    history = spark.createDataFrame(
        [
            (*key, seg, sp, so, _ts(so), kind, eso is None, eso, error)
            for key, seg, sp, so, kind, eso, error in HISTORY
        ],
        HISTORY_SCHEMA,
    )
    # A state built by hand, not by the fold: when its start offsets moved, from the history.
    state = state.join(start_offset_moves(history), list(KEY), "left")
    quarantine = spark.createDataFrame(QUARANTINE, QUARANTINE_SCHEMA)
    end_offsets = spark.createDataFrame(
        [(T1, None, 0, 130), (None, "t-two", 0, 40)],
        "topic_id string, topic string, partition int, end_offset long",
    )
    options = audits.AuditOptions(
        delivery_count_limit=5, stall_span_seconds=180, state_topic_partitions=N
    )
    result = audits.audit(
        records,
        state,
        history,
        quarantine,
        options,
        group_records=_group_records_df(spark),
        end_offsets=end_offsets,
        place=place,
    )
    return result, arrow_frame(spark, result.placements)


def _collected(spark: SparkSession, table: pa.Table | None) -> list[Any]:
    """Arrow rows as Spark collects them (Rows; timestamps naive, in the session's zone)."""
    assert table is not None
    return arrow_frame(spark, table).collect()


@pytest.fixture(scope="module")
def hand(spark: SparkSession, fast_sql: None) -> HandBuilt:
    result, _ = _hand_tables(spark)
    return HandBuilt(
        delivery_counts=_collected(spark, result.delivery_counts),
        poison=_collected(spark, result.poison_messages),
        archived=_collected(spark, result.archived_messages),
        pruning=_collected(spark, result.pruning_cutoff),
        groups=_collected(spark, result.share_groups),
        lag=_collected(spark, result.share_partition_lag),
        findings=_collected(spark, result.findings),
        auto_partition_findings=_placement_findings(result.placements, None),
    )


@pytest.mark.spark
def test_spark_tasks_give_the_tables_the_driver_gives(spark: SparkSession, fast_sql: None) -> None:
    """Worked on in Spark's tasks (`places.by_key` over partitions of whole keys), the
    audits give the tables they give on the driver: the same functions, other rows per call."""
    on_driver, _ = _hand_tables(spark, "driver")
    in_spark, _ = _hand_tables(spark, "spark")
    for name, rows in audit_tables(on_driver).items():
        got = audit_tables(in_spark)[name]
        assert got.schema.names == rows.schema.names, name
        assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, rows.to_pylist())), name


# --- options -----------------------------------------------------------------------------------


def test_stall_span_and_partition_options() -> None:
    assert parse_span("90m") == 5400 and parse_span("1.5d") == 129600 and parse_span("6H") == 21600
    config = JobConfig(share_state="x", stall_span="2h", state_topic_partitions="12")
    assert (config.stall_span_seconds, config.state_topic_partition_count) == (7200, 12)
    assert JobConfig(share_state="x").state_topic_partition_count is None  # auto
    with pytest.raises(InvalidConfigError, match="--stall-span '6'"):
        JobConfig(share_state="x", stall_span="6")
    with pytest.raises(InvalidConfigError, match="--state-topic-partitions 0"):
        JobConfig(share_state="x", state_topic_partitions=0)


# --- hand-built edge cases -----------------------------------------------------------------------


@pytest.mark.spark
def test_delivery_counts_of_the_final_state(hand: HandBuilt) -> None:
    got = {
        (r.group_id, r.partition, r.delivery_state, r.delivery_count): (
            r.delivery_state_name,
            r.offsets,
            r.batches,
            r.at_delivery_limit,
        )
        for r in hand.delivery_counts
    }
    assert got == {
        ("orders", 0, ARCHIVED, 5): ("Archived", 3, 1, True),
        ("orders", 0, AVAILABLE, 1): ("Available", 7, 1, False),
        ("orders", 0, ARCHIVED, 0): ("Archived", 1, 1, False),
        ("orders", 0, AVAILABLE, 6): ("Available", 1, 1, True),
        ("g-deleted", 0, ACKNOWLEDGED, 1): ("Acknowledged", 3, 2, False),
        ("g-deleted", 0, AVAILABLE, 1): ("Available", 1, 1, False),
        ("stray", 5, AVAILABLE, 2): ("Available", 2, 1, False),
    }  # E is deleted: not counted


@pytest.mark.spark
def test_poison_ranges_are_merged_with_their_first_sighting(hand: HandBuilt) -> None:
    got = {
        (r.group_id, r.topic_id, r.partition, r.first_offset, r.last_offset): (
            r.offsets,
            r.delivery_count,
            r.min_delivery_count,
            r.first_seen_source_offset,
            _utc(r.first_seen_timestamp),
            r.last_seen_source_offset,
            r.sightings,
            r.still_in_state,
            r.offsets_still_in_state,
            r.below_start_offset,
            r.share_partition_deleted,
        )
        for r in hand.poison
    }
    assert got == {
        # 100-104 (count 5, offset 10) and 103-108 (count 6, offset 11) overlap: one range
        (*A, 100, 108): (9, 6, 5, 10, _ts(10), 11, 2, False, 0, True, False),
        # 110-111 written twice (12, 13) and 112 touching it (13); 109 is below the limit
        (*A, 110, 112): (3, 5, 5, 12, _ts(12), 13, 3, True, 3, True, False),
        (*E, 0, 0): (1, 5, 5, 1, _ts(1), 1, 1, False, 0, None, True),
    }


@pytest.mark.spark
def test_archived_below_the_limit_have_a_reason(hand: HandBuilt) -> None:
    got = {
        (r.group_id, r.first_offset, r.last_offset): (
            r.reason,
            r.delivery_count,
            r.first_seen_source_offset,
            r.still_in_state,
            r.below_start_offset,
        )
        for r in hand.archived
    }
    assert got == {
        ("orders", 109, 109): ("below_delivery_limit", 2, 11, False, True),
        ("orders", 120, 120): ("never_delivered", 0, 14, True, False),
    }


@pytest.mark.spark
def test_ranges_are_settled_two_or_more_below_where_the_state_begins(hand: HandBuilt) -> None:
    """A's state begins at 110 (its start offset and first batch): 100-108 can no longer
    change; 109 touches it, 110-112 and 120 are in it; a deleted share-partition's ranges
    are not settled."""
    settled = {
        (r.group_id, r.topic_id, r.partition, r.first_offset): r.settled
        for r in [*hand.poison, *hand.archived]
    }
    assert settled == {
        (*A, 100): True,
        (*A, 109): False,
        (*A, 110): False,
        (*A, 120): False,
        (*E, 0): False,
    }


@pytest.mark.spark
def test_only_reopened_keys_with_a_stored_bound_read_their_settled_ranges(
    spark: SparkSession, fast_sql: None
) -> None:
    stored = _hand_state(spark)

    def is_(k: tuple[str, str, int]) -> Any:
        return (
            (sf.col("group_id") == k[0])
            & (sf.col("topic_id") == k[1])
            & (sf.col("partition") == k[2])
        )

    new = (
        stored.filter(is_(A) | is_(C) | is_(D) | is_(E))
        # A goes on (its bound stays 110), D is deleted, E (deleted) starts again.
        .withColumn("start_offset", sf.when(is_(A), 113).otherwise(sf.col("start_offset")))
        .withColumn("deleted", is_(D))
    )
    brand_new = stored.filter(is_(B)).withColumn("partition", sf.lit(9))
    # C gets an archived interval below its stored bound (its start offset, 50).
    records = spark.createDataFrame(
        [(0, 20, _ts(20), "update", *C, -1, None, [(40, 41, ARCHIVED, 5)])], RECORD_SCHEMA
    )
    final = ranges_arrow.final_with_stored_bounds(
        new.unionByName(brand_new).toArrow(), stored.toArrow()
    )
    intervals = ranges_arrow.reasoned_intervals(records.toArrow(), 5)
    scope = ranges_arrow.refresh_scope(final, intervals)
    got = {
        (r["group_id"], r["topic_id"], r["partition"]): (r["_reopened"], r["_settled_changes"])
        for r in scope.to_pylist()
    }
    assert got == {
        A: (False, False),
        C: (True, True),
        D: (True, True),
        E: (True, False),  # deleted when stored: its ranges are not settled
        (B[0], B[1], 9): (True, False),  # new: no stored range
    }


@pytest.mark.spark
def test_merge_ranges_joins_touching_and_nested_intervals(
    spark: SparkSession, fast_sql: None
) -> None:
    rows = [
        (A, 10, 20, 5, 0, 7),
        (A, 12, 15, 9, 0, 3),  # nested, higher count, seen earlier
        (A, 21, 21, 5, 0, 9),  # touching
        (A, 23, 30, 5, 1, 1),  # gap at 22; another source partition
        (A, 25, 26, 5, 0, 2),
        (B, 21, 21, 5, 0, 0),  # another key never joins
    ]
    records = spark.createDataFrame(
        [
            (sp, so, _ts(so), "update", *key, 0, None, [(f, la, ARCHIVED, c)])
            for key, f, la, c, sp, so in rows
        ],
        RECORD_SCHEMA,
    )
    got = sorted(
        (
            r["partition"],
            r["first_offset"],
            r["last_offset"],
            r["delivery_count"],
            r["min_delivery_count"],
            r["first_seen_source_partition"],
            r["first_seen_source_offset"],
            r["sightings"],
        )
        for r in ranges_arrow.merged_intervals(records.toArrow(), 5).to_pylist()
    )
    assert got == [
        (0, 10, 21, 9, 5, 0, 3, 3),
        (0, 23, 30, 5, 5, 0, 2, 2),  # (0, 2) comes before (1, 1) in log order
        (1, 21, 21, 5, 5, 0, 0, 1),
    ]


@pytest.mark.spark
def test_pruning_cutoff_as_kafka_computes_it(hand: HandBuilt) -> None:
    got = {
        r.source_partition: (
            r.cutoff_offset,
            r.prunable,
            _utc(r.cutoff_timestamp),
            r.live_share_partitions,
            r.tracked_share_partitions,
            r.untracked_live_share_partitions,
            r.deleted_share_partitions,
            (r.held_by_group_id, r.held_by_topic_id, r.held_by_partition),
            r.records_before_cutoff,
            r.exported_records,
            r.first_exported_offset,
            r.last_exported_offset,
        )
        for r in hand.pruning
    }
    assert got == {
        # A (snapshot 12), D (snapshot 8) tracked; F has updates only. The quarantined row
        # at 16 counts as exported.
        0: (8, True, _ts(8), 3, 2, 1, 0, D, 2, 11, 3, 16),
        # B's only snapshot is at 0: Kafka prunes nothing. H's update after its tombstone
        # is not tracked (only snapshots are).
        1: (0, False, _ts(0), 3, 1, 2, 0, B, 0, 6, 0, 5),
        # Every share-partition deleted: the last tombstone's offset stays the cut-off.
        2: (2, True, _ts(2), 0, 0, 0, 1, (None, None, None), 2, 3, 0, 2),
    }


@pytest.mark.spark
def test_carried_pruning_cutoff_counts_records_before_it_from_the_gaps(
    spark: SparkSession, fast_sql: None
) -> None:
    """An incremental run's cut-off and counts (stored table, new positions, gap findings)
    equal those of one run over every position, with gaps below, at and above the cut-off
    and a partition with no snapshot."""
    a, b = ("g", T1, 0), ("g", T1, 1)
    missing = {5, 6, 50, 59, 60, 70}
    snapshots = {0: a, 1: b, 20: a, 65: b, 80: a}
    rows = [
        (
            *snapshots.get(o, a if o % 2 else b),
            0,  # segment, numbered below
            0,  # source_partition
            o,
            _ts(o),
            "snapshot" if o in snapshots else "update",
        )
        for o in range(100)
        if o not in missing
    ] + [(*a, 0, 1, o, _ts(o), "update") for o in range(3, 10)]  # partition 1: updates only
    history = spark.createDataFrame(
        rows,
        "group_id string, topic_id string, partition int, segment long, source_partition int,"
        " source_offset long, source_timestamp timestamp, record_type string",
    )
    # Segments as the replay numbers them: a snapshot starts one.
    history = history.withColumn(
        "segment",
        sf.sum(sf.when(sf.col("record_type") == "snapshot", 1).otherwise(0)).over(
            Window.partitionBy(*KEY).orderBy(*LOG_ORDER)
        ),
    )
    whole_history = history.toArrow()
    positions = whole_history.select(list(LOG_ORDER))

    def placements(history: pa.Table) -> pa.Table:
        return segments_arrow.placements(segments_arrow.history_segments(history))

    whole = pruning_arrow.pruning_cutoff(placements(whole_history), positions)
    boundary = 58
    before = pc.less(whole_history.column("source_offset"), boundary)
    old_history = whole_history.filter(before)
    new_history = whole_history.filter(pc.invert(before))
    stored = pruning_arrow.pruning_cutoff(
        placements(old_history), old_history.select(list(LOG_ORDER))
    )
    carried = pruning_arrow.carried_pruning_cutoff(
        segments_arrow.placements(
            segments_arrow.merge_segments(
                segments_arrow.history_segments(old_history),
                segments_arrow.history_segments(new_history),
            )
        ),
        stored,
        new_history.select(list(LOG_ORDER)),
        gap_ranges(positions),
    )
    expected = {r["source_partition"]: r for r in _as_spark_rows(whole)}
    assert expected[0]["cutoff_offset"] == 65  # b's latest snapshot, below a's (80)
    assert expected[0]["records_before_cutoff"] == 65 - 5  # 5, 6, 50, 59, 60 are missing
    assert expected[1]["cutoff_offset"] is None and expected[1]["records_before_cutoff"] == 0
    assert {r["source_partition"]: r for r in _as_spark_rows(carried)} == expected


def _as_spark_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Arrow rows with timestamps as Spark collects them (naive, in the session's zone)."""
    spark = SparkSession.getActiveSession()
    assert spark is not None
    return [r.asDict() for r in arrow_frame(spark, table).collect()]


@pytest.mark.spark
def test_share_groups_from_the_latest_record_of_each_key(hand: HandBuilt) -> None:
    groups = {r.group_id: r for r in hand.groups}
    assert set(groups) == {"orders", "g-deleted", "legacy"}
    orders = groups["orders"]
    assert (orders.group_epoch, orders.assignment_epoch, orders.deleted) == (3, 3, False)
    assert [(m.member_id, m.client_id, m.member_epoch, m.member_state) for m in orders.members] == [
        ("m1", "c1", 3, 0)
    ]  # m2's metadata was tombstoned
    assert orders.member_count == 1
    assert [(t.topic_id, t.partitions) for t in orders.initializing_topics] == [(T2, [1])]
    assert [(t.topic_id, t.partitions) for t in orders.initialized_topics] == [(T1, [0, 1])]
    assert [t.topic_id for t in orders.deleting_topics] == [T3]
    assert (orders.initializing_partitions, orders.initialized_partitions) == (1, 2)
    assert orders.deleting_topic_count == 1
    assert orders.topic_names == ["t-one", "t-three", "t-two"]
    assert (orders.state_metadata_source_offset, orders.last_source_offset) == (6, 6)
    deleted = groups["g-deleted"]
    assert (deleted.deleted, deleted.deleted_at_source_offset) == (True, 10)
    assert _utc(deleted.deleted_at_timestamp) == _ts(10)
    assert (deleted.group_epoch, deleted.member_count, deleted.topic_names) == (None, 0, [])
    legacy = groups["legacy"]  # Kafka 4.0: topics from ShareGroupPartitionMetadata (type 9)
    assert (legacy.group_epoch, legacy.deleted, legacy.topic_names) == (1, False, ["t-one"])
    assert legacy.initialized_topics is None


@pytest.mark.spark
def test_lag_by_delivery_complete_count_or_batches(hand: HandBuilt) -> None:
    got = _key_rows(
        hand.lag,
        "topic",
        "end_offset",
        "lag",
        "lag_method",
        "lag_from_delivery_complete_count",
        "lag_from_state_batches",
    )
    assert got == {
        # 130 - 110 - DCC 4 = 16, and 130 - 113 - 1 (offset 120 archived) = 16
        A: ("t-one", 130, 16, "delivery_complete_count", 16, 16),
        B: ("t-one", None, None, "delivery_complete_count", None, None),
        # the end offsets name the topic: matched through the group metadata
        C: ("t-two", 40, -10, "state_batches", None, -10),
        # DCC -1 (unknown): 130 - 62 - 1 (offset 63 acknowledged)
        D: ("t-one", 130, 67, "state_batches", None, 67),
        F: ("t-one", None, None, "state_batches", None, None),
        H: ("t-two", 40, -35, "state_batches", None, -35),
    }


def _sort_key(row: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("" if value is None else str(value) for value in row)


@pytest.mark.spark
def test_findings(hand: HandBuilt) -> None:
    got = sorted(
        (
            (
                f.severity,
                f.code,
                f.group_id,
                f.topic_id,
                f.partition,
                f.source,
                f.source_partition,
                f.source_offset,
                f.affected,
            )
            for f in hand.findings
        ),
        key=_sort_key,
    )
    share, offsets = "share_state", "consumer_offsets"
    expected = [
        ("error", "replay_error", *(D), share, 0, 15, 1),
        ("error", "wrong_state_partition", *(F), share, 0, 5, 1),
        ("info", "end_offset_missing", *(B), share, 1, 0, 1),
        ("info", "end_offset_missing", *(F), share, 0, 5, 1),
        ("info", "source_offset_gap", None, None, None, offsets, 3, 0, 1),
        ("info", "update_before_snapshot", *(D), share, 0, 3, 1),
        ("warning", "decode_quarantine", None, None, None, offsets, 3, 9, 1),
        ("warning", "decode_quarantine", None, None, None, share, 0, 16, 1),
        ("warning", "delivery_count_above_limit", *(A), None, None, None, 1),
        ("warning", "negative_lag", *(C), share, 1, 2, 1),
        ("warning", "negative_lag", *(H), share, 1, 5, 1),
        ("warning", "partition_not_initialized", *(C), share, 1, 2, 1),
        ("warning", "source_offset_gap", None, None, None, share, 0, 4, 1),
        ("warning", "source_offset_gap", None, None, None, share, 0, 6, 2),
        ("warning", "spso_stalled", *(D), share, 0, 8, 1),
        ("warning", "spso_stalled", *(F), share, 0, 5, 2),
        ("warning", "state_for_deleted_group", *(D), share, 0, 15, 1),
        ("warning", "state_for_unknown_group", *(F), share, 0, 5, 1),
        ("warning", "state_for_unknown_group", *(H), share, 1, 5, 1),
        ("warning", "state_without_snapshot", *(C), share, 1, 1, 2),
        ("warning", "state_without_snapshot", *(F), share, 0, 5, 1),
        ("warning", "stuck_deleting", "orders", T3, None, offsets, 3, 6, 0),
        ("warning", "stuck_initializing", "orders", T2, 1, offsets, 3, 6, 1),
        ("warning", "update_after_tombstone", *(H), share, 1, 5, 1),
    ]
    assert got == sorted(expected, key=_sort_key)
    messages = {(f.code, f.group_id): f.message for f in hand.findings}
    assert (
        "puts it on partition 2 of 3 (given by --state-topic-partitions)"
        in messages[("wrong_state_partition", "stray")]
    )
    assert (
        "ShareGroupMetadata tombstone at offset 10"
        in messages[("state_for_deleted_group", "g-deleted")]
    )
    assert (
        "has stayed at 62 since 2026-11-01 12:08:00 (0.1 h"
        in messages[("spso_stalled", "g-deleted")]
    )
    assert "no share state exists for it yet" in messages[("stuck_initializing", "orders")]
    assert "offsets 6-7 (2 records)" in " ".join(
        f.message for f in hand.findings if f.code == "source_offset_gap"
    )


@pytest.mark.spark
def test_state_partition_count_is_inferred_when_not_given(hand: HandBuilt) -> None:
    # Partitions 0-2 are exported: 3 fits five of six share-partitions, Kafka's 50 none.
    (only,) = hand.auto_partition_findings
    assert (only["severity"], only["code"], only["group_id"], only["source_partition"]) == (
        "error",
        "wrong_state_partition",
        "stray",
        0,
    )
    assert "of 3 (inferred: highest exported partition + 1)" in only["message"]


@pytest.mark.spark
def test_partition_check_is_skipped_when_no_count_fits(spark: SparkSession, fast_sql: None) -> None:
    keys = [("g", T1, p) for p in range(4)]
    # Every key where neither Kafka's 50 nor the inferred count (8) puts it.
    placed = [
        next(
            sp
            for sp in range(7, -1, -1)
            if sp not in (state_topic_partition(*k, 50), state_topic_partition(*k, 8))
        )
        for k in keys
    ]
    assert max(placed) == 7  # so 8 is what auto infers
    history = spark.createDataFrame(
        [(sp, 0, None, "snapshot", 1, *k) for sp, k in zip(placed, keys, strict=True)],
        "source_partition int, source_offset long, source_timestamp timestamp,"
        " record_type string, segment long, group_id string, topic_id string, partition int",
    )
    fits_50 = sum(state_topic_partition(*k, 50) == sp for sp, k in zip(placed, keys, strict=True))
    fits_8 = sum(state_topic_partition(*k, 8) == sp for sp, k in zip(placed, keys, strict=True))
    assert max(fits_50, fits_8) * 2 < len(keys)  # the premise of this test
    placements = segments_arrow.placements(segments_arrow.history_segments(history.toArrow()))
    (only,) = _placement_findings(placements, None)
    assert (only["severity"], only["code"], only["affected"]) == (
        "info",
        "state_partition_check_skipped",
        4,
    )
    assert (only["group_id"], only["source_partition"], only["source_offset"]) == (None,) * 3
    assert "fewer than half of the 4 share-partitions" in only["message"]


# --- the finding registry ----------------------------------------------------------------------

#: Where each finding rule's rows are produced and checked: `test_findings` (the hand-built
#: data) for all but the rules named here, whose premise the hand-built data cannot meet.
# Rules the hand-built export cannot produce, and the test that produces each.
PRODUCED_ELSEWHERE = {
    (FindingCode.STATE_PARTITION_CHECK_SKIPPED, "share_state"): (
        test_partition_check_is_skipped_when_no_count_fits.__name__
    ),
    # Only an incremental run applies a backfill (and
    # tests/spark/test_incremental.py::test_runs_over_a_growing_export_end_as_one_full_run).
    (FindingCode.BACKFILL_APPLIED, None): (
        "tests/pure/test_finding_rules.py::test_backfill_applied_per_source_and_partition"
    ),
}


def _rule_of(code: str, source: str | None) -> FindingRule[Any]:
    (rule,) = [r for r in RULES if r.code == code and r.source in (None, source)]
    return rule


def test_finding_registry_lists_every_code_once_per_source() -> None:
    assert {rule.code for rule in RULES} == set(FindingCode)
    # One rule per (code, source): source_offset_gap is two (a gap in __share_group_state
    # loses records; one in the compacted __consumer_offsets is expected).
    per_code_and_source = Counter((rule.code, rule.source) for rule in RULES)
    assert set(per_code_and_source.values()) == {1}
    for code in FindingCode:
        sources = [rule.source for rule in RULES if rule.code == code]
        assert len(sources) == 1 or None not in sources, code
    assert len({rule.name for rule in RULES}) == len(RULES)
    assert SEVERITIES == ("error", "warning", "info")
    for rule in RULES:
        assert rule.severities and set(rule.severities) <= set(Severity), rule.name
        assert len(rule.description.split()) >= 20, rule.name  # what it means, what to do
    assert [entry.code for entry in catalog()] == list(FindingCode)
    assert all(entry.severities and entry.description for entry in catalog())
    assert FINDINGS_SCHEMA.names == [
        "severity",
        "code",
        "group_id",
        "topic_id",
        "partition",
        "source",
        "source_partition",
        "source_offset",
        "affected",
        "message",
    ]


@pytest.mark.spark
def test_every_finding_rule_is_exercised_with_its_registered_severities(hand: HandBuilt) -> None:
    produced = set()
    for f in hand.findings:
        rule = _rule_of(f.code, f.source)
        assert f.severity in rule.severities, (f.code, f.severity)
        produced.add((rule.code, rule.source))
    missing = {(rule.code, rule.source) for rule in RULES} - produced
    assert missing == set(PRODUCED_ELSEWHERE)


@pytest.mark.spark
def test_end_offsets_table_needs_its_columns(spark: SparkSession, tmp_path: Path) -> None:
    folder = tmp_path / "ends"
    folder.mkdir()
    pq.write_table(
        pa.table({"topic": ["t"], "partition": pa.array([0], pa.int16())}), folder / "p.parquet"
    )
    with pytest.raises(InputSchemaError, match="--end-offsets .*: missing column end_offset$"):
        read_end_offsets(spark, str(folder))


# --- the sample exports, against reference computations ---------------------------------------

LIMIT = 2  # low, so the sample's released records reach it


@dataclass
class SampleRun:
    records: list[Any]
    quarantine: list[Any]
    group_records: list[Any]
    state: list[Any]
    delivery_counts: list[Any]
    poison: list[Any]
    archived: list[Any]
    pruning: list[Any]
    groups: list[Any]
    lag: list[Any]
    findings: list[Any]


END_OFFSET = 2_000_000  # past every offset the sample uses


@pytest.fixture(scope="module")
def sample_run(
    spark: SparkSession, fast_sql: None, tmp_path_factory: pytest.TempPathFactory
) -> SampleRun:
    root = tmp_path_factory.mktemp("audit-sample")
    write_sample(root, SampleSpec(records=1500, delivery_count_limit=LIMIT))
    # End offsets for every topic-partition of the sample (topic ids from the snapshot keys).
    keys = pq.read_table(root / "share_state", columns=["key"]).column("key").to_pylist()
    decoded = [decode_share_state(key, None) for key in keys if key[:2] == b"\x00\x00"]
    topic_partitions = sorted({(d["topic_id"], d["partition"]) for d in decoded})
    ends = root / "end_offsets"
    ends.mkdir()
    pq.write_table(
        pa.table(
            {
                "topic_id": [t for t, _ in topic_partitions],
                "partition": pa.array([p for _, p in topic_partitions], pa.int32()),
                "end_offset": [END_OFFSET] * len(topic_partitions),
            }
        ),
        ends / "part-0.parquet",
    )
    results = compute(
        spark,
        JobConfig(
            share_state=str(root / "share_state"),
            consumer_offsets=str(root / "consumer_offsets"),
            delivery_count_limit=LIMIT,
            end_offsets=str(ends),
        ),
    )
    assert results.share_groups is not None and results.share_partition_lag is not None
    assert results.share_group_records is not None
    try:
        return SampleRun(
            records=results.share_state_records.collect(),
            quarantine=results.quarantine.collect(),
            group_records=results.share_group_records.filter("is_share_record").collect(),
            state=results.share_partition_state.collect(),
            delivery_counts=results.delivery_counts.collect(),
            poison=results.poison_messages.collect(),
            archived=results.archived_messages.collect(),
            pruning=results.pruning_cutoff.collect(),
            groups=results.share_groups.collect(),
            lag=results.share_partition_lag.collect(),
            findings=results.findings.collect(),
        )
    finally:
        results.unpersist()


Key = tuple[str, str, int]


def _reference_archived(records: list[Any], limit: int) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Archived ranges by sets of offsets: (key, reason, first, last) -> (max count, first
    sighting (partition, offset))."""
    offsets: dict[tuple[Key, str], dict[int, tuple[int, tuple[int, int]]]] = {}
    for r in records:
        if r.record_type not in ("snapshot", "update"):
            continue
        seen = (r.source_partition, r.source_offset)
        for b in r.state_batches:
            if b.delivery_state != ARCHIVED:
                continue
            reason = (
                "delivery_count_limit"
                if b.delivery_count >= limit
                else "never_delivered"
                if b.delivery_count == 0
                else "below_delivery_limit"
            )
            per_offset = offsets.setdefault(((r.group_id, r.topic_id, r.partition), reason), {})
            for offset in range(b.first_offset, b.last_offset + 1):
                count, first = per_offset.get(offset, (b.delivery_count, seen))
                per_offset[offset] = (max(count, b.delivery_count), min(first, seen))
    out: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for (key, reason), per_offset in offsets.items():
        run: list[int] = []
        for offset in [*sorted(per_offset), None]:
            if run and (offset is None or offset != run[-1] + 1):
                out[(*key, reason, run[0], run[-1])] = (
                    max(per_offset[o][0] for o in run),
                    min(per_offset[o][1] for o in run),
                )
                run = []
            if offset is not None:
                run.append(offset)
    return out


@pytest.mark.spark
def test_sample_archived_ranges_equal_the_per_offset_reference(sample_run: SampleRun) -> None:
    expected = _reference_archived(sample_run.records, LIMIT)
    got = {
        (r.group_id, r.topic_id, r.partition, r.reason, r.first_offset, r.last_offset): (
            r.delivery_count,
            (r.first_seen_source_partition, r.first_seen_source_offset),
        )
        for r in [
            *[_with_reason(r, "delivery_count_limit") for r in sample_run.poison],
            *sample_run.archived,
        ]
    }
    assert got == expected
    assert Counter(key[3] for key in expected)["below_delivery_limit"] > 0
    # still_in_state: the final state's archived batches overlap the range.
    final = {(s.group_id, s.topic_id, s.partition): s for s in sample_run.state}
    for r in sample_run.poison:
        state = final[(r.group_id, r.topic_id, r.partition)]
        overlap = sum(
            max(0, min(b.last_offset, r.last_offset) - max(b.first_offset, r.first_offset) + 1)
            for b in state.state_batches
            if b.delivery_state == ARCHIVED
        )
        assert (r.offsets_still_in_state, r.still_in_state) == (overlap, overlap > 0)


def _with_reason(row: Any, reason: str) -> Any:
    values = row.asDict()
    values["reason"] = reason
    return type("R", (), values)


@pytest.mark.spark
def test_sample_delivery_counts_equal_the_state(sample_run: SampleRun) -> None:
    expected: Counter[tuple[Any, ...]] = Counter()
    for s in sample_run.state:
        if s.deleted:
            continue
        for b in s.state_batches:
            key = (s.group_id, s.topic_id, s.partition, b.delivery_state, b.delivery_count)
            expected[key] += b.last_offset - b.first_offset + 1
    got = {
        (r.group_id, r.topic_id, r.partition, r.delivery_state, r.delivery_count): r.offsets
        for r in sample_run.delivery_counts
    }
    assert got == dict(expected) and got


def _kafka_last_redundant_offset(events: list[tuple[Key, int, bool]]) -> int | None:
    """ShareCoordinatorOffsetsManager.updateState, line by line, over (key, offset,
    is_delete) of the snapshots and tombstones of one partition in log order."""
    last_redundant = 2**63 - 1
    offsets: dict[Key, int] = {}
    for key, offset, is_delete in events:
        last_redundant = min(last_redundant, offset)
        offsets[key] = offset
        so_far = 2**63 - 1
        for value in offsets.values():
            so_far = min(so_far, value)
            if so_far == last_redundant:
                break
        last_redundant = so_far
        if is_delete:
            del offsets[key]
    return None if last_redundant == 2**63 - 1 else last_redundant


@pytest.mark.spark
def test_sample_pruning_cutoff_equals_kafkas_offsets_manager(sample_run: SampleRun) -> None:
    by_partition: dict[int, list[Any]] = {}
    for r in sorted(sample_run.records, key=lambda r: (r.source_partition, r.source_offset)):
        by_partition.setdefault(r.source_partition, []).append(r)
    positions: dict[int, list[int]] = {}
    for r in sample_run.records:
        positions.setdefault(r.source_partition, []).append(r.source_offset)
    for q in sample_run.quarantine:
        if q.source == "share_state":
            positions.setdefault(q.source_partition, []).append(q.source_offset)
    expected = {}
    for partition, rows in by_partition.items():
        events = [
            ((r.group_id, r.topic_id, r.partition), r.source_offset, r.record_type == "tombstone")
            for r in rows
            if r.record_type in ("snapshot", "tombstone")
        ]
        cutoff = _kafka_last_redundant_offset(events)
        last = {(r.group_id, r.topic_id, r.partition): r.record_type for r in rows}
        before = sum(1 for o in positions[partition] if cutoff is not None and o < cutoff)
        live = sum(1 for kind in last.values() if kind != "tombstone")
        expected[partition] = (cutoff, cutoff is not None and cutoff > 0, live, before)
    got = {
        r.source_partition: (
            r.cutoff_offset,
            r.prunable,
            r.live_share_partitions,
            r.records_before_cutoff,
        )
        for r in sample_run.pruning
    }
    assert got == expected
    assert any(prunable for _, prunable, _, _ in got.values())


def _reference_groups(records: list[Any]) -> dict[str, tuple[Any, ...]]:
    """group -> (deleted, epoch, live members, initialized partitions) from the latest
    record of every (type, group, member) key, as Kafka's group coordinator replays them."""
    latest: dict[tuple[Any, ...], Any] = {}
    for r in sorted(records, key=lambda r: (r.source_partition, r.source_offset)):
        latest[(r.record_type_id, r.group_id, r.member_id)] = r
    out = {}
    for group in {r.group_id for r in records}:
        mine = {k: r for k, r in latest.items() if k[1] == group}
        meta = mine.get((11, group, None))
        after = [r for r in mine.values() if not r.tombstone]
        deleted = (
            meta is not None
            and meta.tombstone
            and all(
                (r.source_partition, r.source_offset) < (meta.source_partition, meta.source_offset)
                for r in after
            )
        )
        members = sorted(k[2] for k, r in mine.items() if k[0] == 10 and not r.tombstone)
        spm = mine.get((15, group, None))
        initialized = (
            sum(len(t.partitions) for t in spm.initialized_topics or [])
            if spm is not None and not spm.tombstone
            else 0
        )
        epoch = meta.group_epoch if meta is not None and not meta.tombstone else None
        out[group] = (deleted, epoch, members, initialized)
    return out


@pytest.mark.spark
def test_sample_share_groups(sample_run: SampleRun) -> None:
    expected = _reference_groups(sample_run.group_records)
    got = {
        g.group_id: (
            g.deleted,
            g.group_epoch,
            [m.member_id for m in g.members],
            g.initialized_partitions,
        )
        for g in sample_run.groups
    }
    assert got == expected
    assert any(deleted for deleted, *_ in got.values())
    assert any(not deleted and members for deleted, _, members, _ in got.values())


@pytest.mark.spark
def test_sample_lag(sample_run: SampleRun) -> None:
    live = {(s.group_id, s.topic_id, s.partition): s for s in sample_run.state if not s.deleted}
    got = {(r.group_id, r.topic_id, r.partition): r for r in sample_run.lag}
    assert set(got) == set(live) and got
    for key, row in got.items():
        state = live[key]
        eso = state.effective_start_offset
        terminal = sum(
            max(0, b.last_offset - max(b.first_offset, eso) + 1)
            for b in state.state_batches
            if b.delivery_state in (ACKNOWLEDGED, ARCHIVED)
        )
        by_batches = END_OFFSET - eso - terminal if state.start_offset >= 0 else None
        dcc = state.delivery_complete_count
        if dcc is not None and dcc >= 0:
            by_count = END_OFFSET - state.start_offset - dcc if state.start_offset >= 0 else None
            assert (row.lag, row.lag_method) == (by_count, "delivery_complete_count"), key
        else:
            assert (row.lag, row.lag_method) == (by_batches, "state_batches"), key
        assert row.lag_from_state_batches == by_batches, key
        assert row.end_offset == END_OFFSET and row.topic is not None


@pytest.mark.spark
def test_sample_findings(sample_run: SampleRun) -> None:
    codes = Counter((f.severity, f.code) for f in sample_run.findings)
    # Every damaged row is reported once per (input, reason kind) ...
    kinds = Counter((q.source, q.reason_kind) for q in sample_run.quarantine)
    reported = {
        (f.source, kind): f.affected
        for f in sample_run.findings
        for _, kind in kinds
        if f.code == "decode_quarantine" and f"could not be decoded ({kind})" in f.message
    }
    assert reported == dict(kinds) and reported
    # ... and the rest is consistent: records on Kafka's partitions (the count, 50, is
    # detected), no replay errors, consecutive offsets.
    assert not [code for (severity, code) in codes if severity == "error"]
    assert ("info", "state_partition_check_skipped") not in codes
    assert ("warning", "source_offset_gap") not in codes


def test_kafka_key_hash_agrees_with_java_string_hash() -> None:
    """The numpy form of Kafka's partitioner hash against the readable one,
    on non-ASCII group ids, surrogate pairs (UTF-16 code units) and Integer.MIN_VALUE."""
    import random

    from sharestate.kafka.partitioning import (
        java_string_hash,
        kafka_abs,
        share_partition_key_hashes,
    )

    rng = random.Random(932)
    alphabet = "abcXYZ-_.09éü漢字😀𝄞"
    rows = [
        (
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))),
            "".join(rng.choice("0123456789ABCDEFabcdef-_") for _ in range(22)),
            rng.randint(0, 2**31 - 1),
        )
        for _ in range(2000)
    ]
    # A group id whose whole key hashes to Integer.MIN_VALUE (Utils.abs maps it to 0):
    # hash(g + rest) = hash(g) * 31**len(rest) + hash(rest) (mod 2**32), and 31 is odd.
    rest = ":topic:0"
    modulus = 1 << 32
    target = ((1 << 31) - java_string_hash(rest)) * pow(31, -len(rest), modulus) % modulus
    digits = []
    for _ in range(7):  # 31**7 > 2**32: seven base-31 digits, as chars 0..30
        target, digit = divmod(target, 31)
        digits.append(chr(digit))
    group = "".join(reversed(digits))
    assert java_string_hash(group + rest) == -(1 << 31)
    rows.append((group, "topic", 0))
    expected = {k: kafka_abs(java_string_hash(f"{k[0]}:{k[1]}:{k[2]}")) for k in rows}
    assert dict(zip(rows, share_partition_key_hashes(rows).tolist(), strict=True)) == expected


@pytest.mark.spark
def test_archived_ranges_go_on_from_stored_ranges(spark: SparkSession, fast_sql: None) -> None:
    """An incremental run merges new intervals into the stored ranges (only those that
    overlap or touch the new intervals' span are merged again): at every cut of the hand-built
    records, stored + newer records gives the ranges of all records."""
    records, state = _hand_records(spark).toArrow(), _hand_state(spark).toArrow()
    whole = sorted(
        map(
            repr,
            ranges_arrow.with_final_state(
                ranges_arrow.merged_intervals(records, 5), state
            ).to_pylist(),
        )
    )
    assert len(whole) >= 4
    final = ranges_arrow.final_state_columns(state)
    cuts = sorted({so for _, so, *_ in RECORDS})
    for cut in cuts[1:]:
        before = pc.less(records.column("source_offset"), cut)
        stored = ranges_arrow.archived_ranges(
            ranges_arrow.reasoned_intervals(records.filter(before), 5), final
        )
        got = ranges_arrow.archived_ranges(
            ranges_arrow.reasoned_intervals(records.filter(pc.invert(before)), 5), final, stored
        )
        assert sorted(map(repr, got.to_pylist())) == whole, cut
