"""Replay checked against Kafka's own ShareCoordinatorShard, record by record.

tests/kafka/replay_corpus/<release>/ was written by the Java harness (tests/kafka/kafka_harness/,
`make replay-corpus`): 2,000 sequences of share-group activity per release, produced by
Kafka's own write path and replayed by a fresh Kafka shard after every record. Each record
carries the state Kafka holds for the share-partition it touched; each sequence its final
states, and some a replay that starts later (an export that begins after pruning).
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from sharestate.job import JobConfig, compute
from sharestate.kafka.records import decode_share_state, parse_kafka_version, share_state_layouts
from sharestate.replay.combiner import combine
from sharestate.replay.state import STATE_FIELDS, ShareState, apply_record
from sharestate.sample.exports import KAFKA_EXPORT_SCHEMA
from tests.support.corpus import RELEASES, hex_bytes, read_sequences, share_partition_key
from tests.support.paths import CORPUS, GOLDEN

FIELDS = STATE_FIELDS


def _as_kafka(state: ShareState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    out = {name: getattr(state, name) for name in FIELDS}
    out["batches"] = [list(b) for b in state.batches]
    return out


def test_corpus_covers_every_release() -> None:
    assert {"4.1.2", "4.2.1", "4.3.1", "4.4.0"} <= set(RELEASES)


@pytest.mark.parametrize("release", RELEASES)
def test_combiner_matches_kafka(release: str) -> None:
    kafka = parse_kafka_version(release)
    assert kafka is not None
    cases = 0
    with gzip.open(CORPUS / release / "combiner.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            case = json.loads(line)
            cases += 1
            current = [tuple(b) for b in case["current"]]
            new = [tuple(b) for b in case["new"]]
            if case.get("result") is None:  # Kafka's combiner threw on this input
                with pytest.raises(ValueError):
                    combine(current, new, case["start_offset"], kafka)
                continue
            got = [list(b) for b in combine(current, new, case["start_offset"], kafka)]
            assert got == case["result"], case["case"]
    assert cases > 4000


#: The oldest and the newest release in `make test`; those between in `make test-slow`.
ENDS_THEN_SLOW = [
    release
    if release in (RELEASES[0], RELEASES[-1])
    else pytest.param(release, marks=pytest.mark.slow)
    for release in RELEASES
]


@pytest.mark.parametrize("release", ENDS_THEN_SLOW)
def test_replay_matches_kafka_record_by_record(release: str) -> None:
    kafka = parse_kafka_version(release)
    assert kafka is not None
    layouts = share_state_layouts(release)
    records = 0
    for sequence in read_sequences(release):
        rows = []
        states: dict[str, ShareState | None] = {}
        for record in sequence["records"]:
            row = decode_share_state(
                hex_bytes(record["key_hex"]), hex_bytes(record["value_hex"]), layouts
            )
            rows.append(row)
            states[share_partition_key(row)] = apply_record(
                states.get(share_partition_key(row)), row, kafka
            )
            records += 1
            for key, expected in record["expected"].items():
                where = (sequence["sequence"], record["offset"], record["op"])
                assert _as_kafka(states.get(key)) == expected, where
        for key, expected in sequence["final"].items():
            assert _as_kafka(states.get(key)) == expected, sequence["sequence"]
        for suffix in sequence["suffix_replays"]:
            later: dict[str, ShareState | None] = {}
            for row in rows[suffix["start_index"] :]:
                later[share_partition_key(row)] = apply_record(
                    later.get(share_partition_key(row)), row, kafka
                )
            for key, expected in suffix["expected"].items():
                assert _as_kafka(later.get(key)) == expected, (
                    sequence["sequence"],
                    suffix["start_index"],
                )
    assert records > 150_000


@cache
def _spark_sample(
    release: str, sequences: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Export rows for the first sequences (one state-topic partition each) and their finals."""
    rows: list[dict[str, Any]] = []
    finals: list[dict[str, Any]] = []
    for sequence in read_sequences(release):
        if sequence["sequence"] >= sequences:
            break
        finals.append(sequence)
        for record in sequence["records"]:
            rows.append(
                {
                    "key": hex_bytes(record["key_hex"]),
                    "value": hex_bytes(record["value_hex"]),
                    "topic": "__share_group_state",
                    "partition": sequence["sequence"],
                    "offset": record["offset"],
                    "timestamp": None,
                    "timestampType": 0,
                    "headers": [],
                }
            )
    return rows, finals


@pytest.mark.spark
@pytest.mark.parametrize("release", ["4.1.2", "4.4.0"])
def test_spark_replay_matches_kafka(spark: SparkSession, tmp_path: Path, release: str) -> None:
    rows, sequences = _spark_sample(release, 300)
    path = tmp_path / "export"
    path.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=KAFKA_EXPORT_SCHEMA), path / "part-0.parquet")
    results = compute(spark, JobConfig(share_state=str(path), kafka_version=release))
    assert results.quarantine.count() == 0
    state = {
        f"{s.group_id}|{s.topic_id}|{s.partition}": s
        for s in results.share_partition_state.collect()
    }
    history = {
        (h.source_partition, h.source_offset): None if h.deleted else h.start_offset
        for h in results.share_partition_history.collect()
    }
    compared = 0
    for sequence in sequences:
        for key, expected in sequence["final"].items():
            got = state[key]
            if expected is None:
                assert got.deleted, key
                continue
            assert not got.deleted
            assert {name: getattr(got, name) for name in FIELDS} == {n: expected[n] for n in FIELDS}
            assert [list(b) for b in got.state_batches] == expected["batches"], key
            compared += 1
        for record in sequence["records"]:
            for expected in record["expected"].values():
                start = None if expected is None else expected["start_offset"]
                assert history[(sequence["sequence"], record["offset"])] == start
    results.unpersist()
    assert compared >= 300


@pytest.mark.parametrize("kafka", [(4, 3), (4, 4)])
def test_impossible_batches_stop_with_an_error_not_a_hang(kafka: tuple[int, int]) -> None:
    """Kafka's golden records include batches that end before they start. Kafka 4.0-4.3's
    merge never finishes on some of them and 4.4's throws; ours raises ValueError, which
    the Spark replay turns into `replay_error`."""
    golden = GOLDEN / "4.3.1" / "share_group_state.jsonl"
    layouts = share_state_layouts("4.3.1")
    states: dict[str, ShareState | None] = {}
    errors = 0
    for line in golden.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        row = decode_share_state(
            hex_bytes(record["key_hex"]), hex_bytes(record["value_hex"]), layouts
        )
        try:
            states[share_partition_key(row)] = apply_record(
                states.get(share_partition_key(row)), row, kafka
            )
        except ValueError as err:
            assert "starts" in str(err)
            errors += 1
    assert errors > 0
