"""The reference decoder on hand-checked bytes; Kafka's own bytes are in test_golden.py."""

from __future__ import annotations

import pytest

from sharestate.errors import DecodeError, InvalidConfigError
from sharestate.kafka.records import (
    decode_group_record,
    decode_share_state,
    group_layouts,
    share_state_layouts,
)
from sharestate.sample import encode

TOPIC = "Uj5wn_FqTXirEASvVZRY1w"
# The ShareUpdate example of the project's spec (kafka-share-state.md §1.4).
UPDATE_KEY = bytes.fromhex("000100026731523e709ff16a4d78ab1004af559458d700000000")
BATCH = "000000000000000a000000000000000e02000100"
UPDATE_41 = bytes.fromhex("00000000000000000001000000000000000a02" + BATCH + "00")
UPDATE_40 = bytes.fromhex("0000000000000001000000000000000a02" + BATCH + "00")
AUTO = share_state_layouts("auto")


def test_update_41_layout() -> None:
    row = decode_share_state(UPDATE_KEY, UPDATE_41, AUTO)
    assert row["record_type"] == "update"
    assert (row["group_id"], row["topic_id"], row["partition"]) == ("g1", TOPIC, 0)
    assert (row["snapshot_epoch"], row["leader_epoch"], row["start_offset"]) == (0, 1, 10)
    assert row["state_epoch"] is None
    assert row["state_batches"] == [(10, 14, 2, 1)]
    assert row["layout"] == "4.1"
    assert row["delivery_complete_count"] is None


def test_update_40_layout_is_detected_by_exact_length() -> None:
    row = decode_share_state(UPDATE_KEY, UPDATE_40, AUTO)
    assert row["layout"] == "4.0"
    assert row["state_batches"] == [(10, 14, 2, 1)]


def test_a_fit_without_unknown_tags_beats_an_earlier_fit_with_them() -> None:
    # Found by tests/pure/test_fuzz.py: this 4.0 snapshot also parses under the 4.1+ table, as
    # fourteen batches whose last carries an empty unknown tag. Kafka writes no unknown tags.
    batches = [(0, 0, 0, 3840)] + [(0, 0, 0, 0)] * 13 + [(0, 0, 0, 256)]
    key = encode.share_state_key(0, "", TOPIC, 0)
    value = encode.share_snapshot_value(
        snapshot_epoch=0,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        batches=batches,
        create_timestamp=0,
        write_timestamp=0,
        delivery_complete_count=None,
        layout="4.0",
    )
    as_41 = decode_share_state(key, value, share_state_layouts("4.1"))
    assert as_41["unknown_tagged_fields"] == [("state_batches[13]", 0, b"")]
    row = decode_share_state(key, value, AUTO)
    assert (row["layout"], row["start_offset"], row["unknown_tagged_fields"]) == ("4.0", 0, [])
    assert row["state_batches"] == batches


def test_delivery_complete_count_tag_marks_42() -> None:
    value = UPDATE_41[:-1] + bytes.fromhex("01000400000005")
    row = decode_share_state(UPDATE_KEY, value, AUTO)
    assert (row["layout"], row["delivery_complete_count"]) == ("4.2", 5)


def test_kafka_41_keeps_the_42_tag_as_unknown() -> None:
    value = UPDATE_41[:-1] + bytes.fromhex("01000400000005")
    row = decode_share_state(UPDATE_KEY, value, share_state_layouts("4.1"))
    assert row["layout"] == "4.1"
    assert row["delivery_complete_count"] is None
    assert row["unknown_tagged_fields"] == [("", 0, bytes.fromhex("00000005"))]


def test_forced_layout_rejects_the_other() -> None:
    with pytest.raises(DecodeError, match="^trailing bytes|^truncated|^impossible"):
        decode_share_state(UPDATE_KEY, UPDATE_41, share_state_layouts("4.0"))


def test_snapshot_41_from_spec() -> None:
    key = b"\x00\x00" + UPDATE_KEY[2:]
    value = bytes.fromhex(
        "0000"
        "00000003"
        "00000001"
        "00000001"
        "000000000000000a"
        "00000194"
        "1f297c00"
        "00000194"
        "1f297c00"
        "02" + BATCH + "00"
    )
    row = decode_share_state(key, value, AUTO)
    assert row["record_type"] == "snapshot"
    assert (row["snapshot_epoch"], row["state_epoch"], row["leader_epoch"]) == (3, 1, 1)
    assert row["create_timestamp"] == row["write_timestamp"] == 1735689600000
    assert row["layout"] == "4.1"


def test_tombstone_on_snapshot_key() -> None:
    row = decode_share_state(b"\x00\x00" + UPDATE_KEY[2:], None, AUTO)
    assert row["record_type"] == "tombstone"
    assert row["state_batches"] == []
    assert row["layout"] is None


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (None, UPDATE_41, "null key"),
        (UPDATE_KEY[:-1], UPDATE_41, "truncated"),
        (UPDATE_KEY + b"\x00", UPDATE_41, "trailing bytes"),
        (b"\x00\x07" + UPDATE_KEY[2:], UPDATE_41, "unknown record type 7"),
        (UPDATE_KEY, b"\x00\x01" + UPDATE_41[2:], "unknown value version 1"),
        (UPDATE_KEY, None, "update tombstone"),
        (UPDATE_KEY, UPDATE_41 + b"\x00", "no layout fits"),
        (UPDATE_KEY, b"\x00", "truncated"),
    ],
)
def test_bad_records_name_the_problem(key: bytes | None, value: bytes | None, reason: str) -> None:
    with pytest.raises(DecodeError, match=f"^{reason}"):
        decode_share_state(key, value, AUTO)


def test_wrong_sized_known_tag_is_rejected() -> None:
    value = UPDATE_41[:-1] + bytes.fromhex("0100020005")
    with pytest.raises(DecodeError, match="bad tagged field"):
        decode_share_state(UPDATE_KEY, value, share_state_layouts("4.2"))


@pytest.mark.parametrize("version", ["3.9", "x", "4", "4.1.2.3", "4.5", "9.9"])
def test_kafka_version_is_validated(version: str) -> None:
    with pytest.raises(InvalidConfigError):
        share_state_layouts(version)


def test_kafka_version_picks_layouts() -> None:
    assert share_state_layouts("4.0.2") == ("4.0",)
    assert share_state_layouts("4.1") == ("4.1",)
    assert share_state_layouts("4.4") == ("4.2",)
    assert group_layouts("4.0") == ("4.0", "4.0+")


def test_group_metadata_layouts_differ_inside_version_0() -> None:
    key, v41 = encode.group_record(11, {"group_id": "g"}, {"epoch": 3, "metadata_hash": 9}, "4.1")
    _, v40 = encode.group_record(11, {"group_id": "g"}, {"epoch": 3}, "4.0")
    assert decode_group_record(key, v41)["layout"] == "4.1"
    assert decode_group_record(key, v41)["fields"] == {"epoch": 3, "metadata_hash": 9}
    assert decode_group_record(key, v40)["layout"] == "4.0"
    assert decode_group_record(key, v40)["fields"] == {"epoch": 3}


def test_other_group_records_are_classified_not_decoded() -> None:
    key = bytes.fromhex("0001") + b"\x00\x01g\x00\x01t\x00\x00\x00\x00"
    row = decode_group_record(key, b"\x00\x03garbage")
    assert (row["record_type_id"], row["record_type"]) == (1, "OffsetCommit")
    assert row["is_share_record"] is False
    assert row["fields"] == {}
    unknown = decode_group_record(b"\x00\x63", None)
    assert (unknown["record_type"], unknown["tombstone"]) == ("Unknown", True)
