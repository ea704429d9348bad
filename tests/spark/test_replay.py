"""Replay: the combiner, the reference fold, and the distributed replay on Spark."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharestate.job import JobConfig, compute
from sharestate.jvm import Engine, available
from sharestate.replay import as_of, replay
from sharestate.replay.combiner import combine
from sharestate.replay.state import ShareState, effective_start_offset, fold
from sharestate.sample import encode
from sharestate.sample.exports import KAFKA_EXPORT_SCHEMA

TOPIC = "Uj5wn_FqTXirEASvVZRY1w"
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


def test_combiner_resolves_by_priority_not_arrival() -> None:
    # KIP-932's example, offsets 132-137 (see docs/worked-example.md).
    state = combine([], [(110, 110, AVAILABLE, 1)], -1)
    state = combine(state, [(111, 118, AVAILABLE, 0), (119, 119, ACKNOWLEDGED, 1)], -1)
    assert state == [(110, 110, 0, 1), (111, 118, 0, 0), (119, 119, 2, 1)]
    state = combine(state, [(111, 112, AVAILABLE, 1)], -1)  # higher count wins 111-112
    assert state == [(110, 112, 0, 1), (113, 118, 0, 0), (119, 119, 2, 1)]
    state = combine(state, [(113, 118, ACKNOWLEDGED, 1)], -1)  # contiguous equal batches join
    assert state == [(110, 112, 0, 1), (113, 119, 2, 1)]
    state = combine(state, [(110, 110, ACKNOWLEDGED, 2)], -1)
    assert state == [(110, 110, 2, 2), (111, 112, 0, 1), (113, 119, 2, 1)]
    assert combine(state, [], 120) == []


def test_combiner_quirks() -> None:
    # Fewer than two batches after pruning: returned as they are, even reversed offsets.
    assert combine([(9, 3, 0, 1)], [], -1) == [(9, 3, 0, 1)]
    # Exact duplicates collapse; a lower delivery count loses where it overlaps.
    assert combine([(1, 5, 0, 2)], [(1, 5, 0, 2), (3, 7, 2, 1)], -1) == [(1, 5, 0, 2), (6, 7, 2, 1)]
    # The start offset cuts and drops; moving it back later does not restore anything.
    pruned = combine([(1, 5, 0, 1), (8, 9, 0, 1)], [], 4)
    assert pruned == [(4, 5, 0, 1), (8, 9, 0, 1)]
    assert combine(pruned, [], 0) == pruned


def test_effective_start_offset_skips_leading_finished_batches() -> None:
    state = ShareState(
        110, 1, 1, 0, 0, 0, None, ((110, 110, 2, 2), (111, 112, 0, 1), (113, 119, 2, 1))
    )
    assert effective_start_offset(state) == 111
    gap = ShareState(110, 1, 1, 0, 0, 0, None, ((112, 115, 2, 1),))
    assert effective_start_offset(gap) == 110


# --- on Spark ------------------------------------------------------------------------------

WORKED_EXAMPLE: list[tuple[int, str, int, list[tuple[int, int, int, int]]]] = [
    # (state-topic offset, record, start offset, batches)
    (130, "snapshot", 100, []),
    (131, "update", 110, []),
    (132, "update", -1, [(110, 110, AVAILABLE, 1)]),
    (133, "update", -1, [(111, 118, AVAILABLE, 0), (119, 119, ACKNOWLEDGED, 1)]),
    (134, "update", -1, [(111, 112, AVAILABLE, 1)]),
    (135, "update", -1, [(113, 118, ACKNOWLEDGED, 1)]),
    (136, "update", -1, [(110, 110, ACKNOWLEDGED, 2)]),
    (137, "update", 120, []),
]
#: Replayed (SPSO, batches) after each record, from the worked example.
EXPECTED = {
    130: (100, []),
    131: (110, []),
    132: (110, [(110, 110, 0, 1)]),
    133: (110, [(110, 110, 0, 1), (111, 118, 0, 0), (119, 119, 2, 1)]),
    134: (110, [(110, 112, 0, 1), (113, 118, 0, 0), (119, 119, 2, 1)]),
    135: (110, [(110, 112, 0, 1), (113, 119, 2, 1)]),
    136: (110, [(110, 110, 2, 2), (111, 112, 0, 1), (113, 119, 2, 1)]),
    137: (120, []),
}


def _record(
    offset: int, kind: str, start: int, batches: list[Any], epoch: int = 0
) -> dict[str, Any]:
    if kind == "snapshot":
        key = encode.share_state_key(0, "G1", TOPIC, 0)
        value = encode.share_snapshot_value(
            snapshot_epoch=epoch, state_epoch=1, leader_epoch=1, start_offset=start, batches=batches
        )
    else:
        key = encode.share_state_key(1, "G1", TOPIC, 0)
        value = encode.share_update_value(
            snapshot_epoch=0, leader_epoch=1, start_offset=start, batches=batches
        )
    return {
        "key": key,
        "value": value,
        "topic": "__share_group_state",
        "partition": 0,
        "offset": offset,
        "timestamp": datetime(2026, 11, 1, 12, 0, offset - 130, tzinfo=UTC),
        "timestampType": 0,
        "headers": [],
    }


def _export(path: Path, rows: list[dict[str, Any]]) -> str:
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=KAFKA_EXPORT_SCHEMA), path / "part-0.parquet")
    return str(path)


def _batches(row: Any) -> list[tuple[int, int, int, int]]:
    return [tuple(b) for b in row.state_batches]


@pytest.mark.spark
def test_worked_example_step_by_step(spark: SparkSession, tmp_path: Path) -> None:
    path = _export(tmp_path / "kip", [_record(*step) for step in WORKED_EXAMPLE])
    records = compute(spark, JobConfig(share_state=path)).share_state_records
    for offset, (spso, batches) in EXPECTED.items():
        (state,) = replay(as_of(records, source_offset=offset)).state.collect()
        assert (state.start_offset, _batches(state)) == (spso, batches), offset
    (after_136,) = replay(as_of(records, source_offset=136)).state.collect()
    assert after_136.effective_start_offset == 111  # 110 is acknowledged
    history = replay(records).history.orderBy("source_offset").collect()
    assert [h.start_offset for h in history] == [EXPECTED[o][0] for o in range(130, 138)]
    assert [h.acknowledged_offsets for h in history] == [0, 0, 0, 1, 1, 7, 8, 0]
    by_time = replay(as_of(records, timestamp=datetime(2026, 11, 1, 12, 0, 3, tzinfo=UTC))).state
    assert by_time.collect()[0].last_source_offset == 133


@pytest.mark.spark
def test_alternative_ending_with_a_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    steps = [*WORKED_EXAMPLE[:-1], (137, "snapshot", 120, [])]
    rows = [_record(*step) for step in steps]
    rows[-1] = _record(137, "snapshot", 120, [], epoch=1)
    records = compute(
        spark, JobConfig(share_state=_export(tmp_path / "alt", rows))
    ).share_state_records
    (state,) = replay(records).state.collect()
    assert (state.start_offset, _batches(state), state.snapshot_epoch) == (120, [], 1)
    assert state.last_snapshot_offset == 137


@pytest.mark.spark
def test_export_starting_after_pruning(spark: SparkSession, tmp_path: Path) -> None:
    # The log head (130-133) is gone: the first record for the key is an update.
    rows = [_record(*step) for step in WORKED_EXAMPLE[4:]]
    records = compute(
        spark, JobConfig(share_state=_export(tmp_path / "pruned", rows))
    ).share_state_records
    history = replay(records).history.orderBy("source_offset").collect()
    # 134 alone becomes the state as it is (start -1 kept), then updates merge into it.
    assert [h.start_offset for h in history] == [-1, -1, -1, 120]
    assert history[0].state_epoch == 0


@pytest.mark.spark
def test_spark_replay_equals_reference_fold(spark: SparkSession, tmp_path: Path) -> None:
    from sharestate.sample.exports import SampleSpec, write_sample

    write_sample(tmp_path, SampleSpec(records=1500, records_per_snapshot=3))
    records = compute(
        spark, JobConfig(share_state=str(tmp_path / "share_state"))
    ).share_state_records
    by_key: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in records.collect():
        by_key.setdefault((row.group_id, row.topic_id, row.partition), []).append(
            row.asDict(recursive=True)
        )
    states = {(s.group_id, s.topic_id, s.partition): s for s in replay(records).state.collect()}
    assert set(states) == set(by_key)
    for key, rows in by_key.items():
        rows.sort(key=lambda r: (r["source_partition"], r["source_offset"]))
        expected = fold(rows)
        got = states[key]
        if expected is None:
            assert got.deleted
            continue
        assert not got.deleted
        assert (got.start_offset, got.leader_epoch, got.snapshot_epoch) == (
            expected.start_offset,
            expected.leader_epoch,
            expected.snapshot_epoch,
        )
        assert _batches(got) == list(expected.batches)


@pytest.mark.spark
def test_replay_from_a_stored_state_equals_a_replay_of_everything(
    spark: SparkSession, tmp_path: Path
) -> None:
    """What `--mode incremental` relies on: records split at an offset per state-topic
    partition; the second part replayed on top of the first part's stored state gives the
    rows a replay of all records gives (state and history, every column)."""
    from sharestate.sample.exports import SampleSpec, write_sample

    write_sample(tmp_path, SampleSpec(records=2_000, share_partitions=30, records_per_snapshot=4))
    records = compute(
        spark, JobConfig(share_state=str(tmp_path / "share_state"))
    ).share_state_records
    cut = F.col("source_offset") < F.lit(40)
    whole = replay(records)
    first = replay(records.filter(cut))
    second = replay(records.filter(~cut), prior_state=first.state)
    keys = ["group_id", "topic_id", "partition"]
    untouched = first.state.join(second.state.select(*keys), keys, "left_anti")
    combined_state = untouched.unionByName(second.state)
    assert second.state.count() > 10 and untouched.count() > 0
    assert_df_equality(combined_state, whole.state, ignore_row_order=True)
    combined_history = first.history.unionByName(second.history)
    assert_df_equality(combined_history, whole.history, ignore_row_order=True)


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["python", "jvm"])
def test_fold_finds_when_the_start_offset_last_moved(
    spark: SparkSession, tmp_path: Path, engine: Engine
) -> None:
    """The fold's SINCE and LATEST_TIMESTAMP (share_partition_state) equal what the window
    over the history (`start_offset_moves`, the reference) computes, also going on from a
    stored state."""
    from sharestate.decode.columns import KEY
    from sharestate.replay.fold import LATEST_TIMESTAMP, SINCE
    from sharestate.sample.exports import SampleSpec, write_sample
    from tests.support.start_offsets import start_offset_moves

    if engine == "jvm" and not available(spark):
        pytest.skip("sharestate-jvm.jar is not in .jars/: run `bash scripts/build_jvm.sh`")
    write_sample(tmp_path, SampleSpec(records=2_000, share_partitions=30, records_per_snapshot=4))
    records = compute(
        spark, JobConfig(share_state=str(tmp_path / "share_state"))
    ).share_state_records
    whole = replay(records, engine=engine)
    got = whole.state.select(*KEY, SINCE, LATEST_TIMESTAMP)
    want = start_offset_moves(whole.history)
    assert got.filter(F.col(SINCE).isNotNull()).count() > 10
    moved_earlier = F.col(f"{SINCE}.source_offset") < F.col("last_source_offset")
    assert whole.state.filter(moved_earlier).count() > 0
    assert_df_equality(got, want, ignore_row_order=True, ignore_nullable=True)
    cut = F.col("source_offset") < F.lit(40)
    first = replay(records.filter(cut), engine=engine)
    second = replay(records.filter(~cut), prior_state=first.state, engine=engine)
    stored = first.state.join(second.state.select(*KEY), list(KEY), "left_semi")
    want_after = start_offset_moves(second.history, stored)
    assert_df_equality(
        second.state.select(*KEY, SINCE, LATEST_TIMESTAMP),
        want_after,
        ignore_row_order=True,
        ignore_nullable=True,
    )
