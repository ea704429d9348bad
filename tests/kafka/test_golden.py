"""Kafka's own bytes, decoded by us, must say exactly what Kafka's own JSON says.

The golden files were written by Kafka's serializers and JSON converters for every release
from 4.0.0 to 4.4.0 (tests/kafka/golden/README.md; `make golden` regenerates them).
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import pyarrow as pa
import pytest

from sharestate.decode.arrow import decode_share_state_arrays
from sharestate.kafka import schemas as s
from sharestate.kafka.records import (
    decode_group_record,
    decode_share_state,
    group_layouts,
    share_state_layouts,
)
from tests.support.paths import GOLDEN

RELEASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


@cache
def _records(release: str, topic_file: str) -> tuple[dict[str, Any], ...]:
    path = GOLDEN / release / topic_file
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())


def _bytes(hex_text: str | None) -> bytes | None:
    return None if hex_text is None else bytes.fromhex(hex_text)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _snake_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_snake(k): _snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake_keys(v) for v in value]
    return value


def _minor(release: str) -> tuple[int, int]:
    major, minor = release.split(".")[:2]
    return int(major), int(minor)


def test_every_release_has_golden_files() -> None:
    assert {"4.0.0", "4.1.0", "4.2.0", "4.3.0", "4.4.0"} <= set(RELEASES)
    for release in RELEASES:
        assert len(_records(release, "share_group_state.jsonl")) > 300
        assert len(_records(release, "consumer_offsets.jsonl")) > 150


def _expected_share_state(record: dict[str, Any]) -> dict[str, Any]:
    """Our row, as Kafka's JSON describes the record."""
    key = record["key"]["data"]
    value = record["value"]["data"] if record["value"] is not None else {}
    rtype = record["key"]["type"]
    expected: dict[str, Any] = {
        "record_type": "tombstone"
        if record["value"] is None
        else ("snapshot" if rtype == 0 else "update"),
        "group_id": key["groupId"],
        "topic_id": key["topicId"],
        "partition": key["partition"],
        "snapshot_epoch": value.get("snapshotEpoch"),
        "state_epoch": value.get("stateEpoch"),
        "leader_epoch": value.get("leaderEpoch"),
        "start_offset": value.get("startOffset"),
        "create_timestamp": value.get("createTimestamp"),
        "write_timestamp": value.get("writeTimestamp"),
        # Kafka leaves the tag (and the JSON field) out when it holds its default, -1.
        "delivery_complete_count": value.get("deliveryCompleteCount"),
        "state_batches": [
            (b["firstOffset"], b["lastOffset"], b["deliveryState"], b["deliveryCount"])
            for b in value.get("stateBatches", [])
        ],
    }
    return expected


def _expected_layout(release: str, record: dict[str, Any], auto: bool) -> str | None:
    if record["value"] is None:
        return None
    minor = _minor(release)
    if minor == (4, 0):
        return "4.0"
    if minor == (4, 1):
        return "4.1"
    if auto and "deliveryCompleteCount" not in record["value"]["data"]:
        return "4.1"  # without the tag a 4.2+ record is byte-for-byte a 4.1 record
    return "4.2"


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("kafka_version", ["auto", "release"])
def test_share_state_records_decode_as_kafka_renders_them(release: str, kafka_version: str) -> None:
    layouts = share_state_layouts("auto" if kafka_version == "auto" else release)
    for record in _records(release, "share_group_state.jsonl"):
        row = decode_share_state(_bytes(record["key_hex"]), _bytes(record["value_hex"]), layouts)
        expected = _expected_share_state(record)
        got = {name: row[name] for name in expected}
        assert got == expected, record["case"]
        assert row["layout"] == _expected_layout(release, record, kafka_version == "auto"), record[
            "case"
        ]
        assert row["unknown_tagged_fields"] == [], record["case"]


@pytest.mark.parametrize("release", RELEASES)
def test_vectorized_decoder_agrees_on_kafkas_records(release: str) -> None:
    records = _records(release, "share_group_state.jsonl")
    keys = pa.array([_bytes(r["key_hex"]) for r in records], pa.binary())
    values = pa.array([_bytes(r["value_hex"]) for r in records], pa.binary())
    for kafka_version in ("auto", release):
        layouts = share_state_layouts(kafka_version)
        fast = decode_share_state_arrays(keys, values, layouts)
        assert fast.equals(decode_share_state_arrays(keys, values, layouts, use_fast_path=False))
        for row, record in zip(fast.to_pylist(), records, strict=True):
            assert row["decode_error"] is None, record["case"]
            expected = _expected_share_state(record)
            row["state_batches"] = [tuple(b.values()) for b in row["state_batches"]]
            assert {name: row[name] for name in expected} == expected, record["case"]


def _tagged_defaults(record_type: int) -> dict[str, int]:
    return {
        tf.name: tf.default
        for table in s.SHARE_GROUP_VALUES[record_type].values()
        for tf in table.tagged
    }


def _group_layout(release: str, record_type: int) -> str:
    if record_type in (11, 15):
        return "4.0" if _minor(release) == (4, 0) else "4.1"
    return "4.0" if record_type == 9 else "4.0+"


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("kafka_version", ["auto", "release"])
def test_consumer_offsets_records_decode_as_kafka_renders_them(
    release: str, kafka_version: str
) -> None:
    layouts = group_layouts("auto" if kafka_version == "auto" else release)
    seen_types = set()
    for record in _records(release, "consumer_offsets.jsonl"):
        rtype = record["key"]["type"]
        seen_types.add(rtype)
        row = decode_group_record(_bytes(record["key_hex"]), _bytes(record["value_hex"]), layouts)
        assert row["record_type_id"] == rtype
        assert row["record_type"] == s.GROUP_RECORD_TYPES[rtype], record["case"]
        assert row["tombstone"] == (record["value"] is None)
        if rtype not in s.SHARE_GROUP_RECORD_TYPES:
            assert row["is_share_record"] is False and row["fields"] == {}, record["case"]
            continue
        key = record["key"]["data"]
        assert (row["group_id"], row["member_id"]) == (key["groupId"], key.get("memberId")), record[
            "case"
        ]
        if record["value"] is None:
            assert row["layout"] is None
            continue
        assert row["layout"] == _group_layout(release, rtype), record["case"]
        expected = _snake_keys(record["value"]["data"])
        for name in _tagged_defaults(rtype):
            # Kafka omits a tagged field at its default; we report it as not on the wire.
            expected.setdefault(name, None)
        assert row["fields"] == expected, record["case"]
        assert row["unknown_tagged_fields"] == [], record["case"]
    share_types = {9, 10, 11, 12, 13, 14, 15} if _minor(release) == (4, 0) else set(range(10, 16))
    assert share_types <= seen_types
    assert seen_types - share_types, "golden files also hold non-share record types"
