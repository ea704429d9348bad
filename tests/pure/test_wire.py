from __future__ import annotations

import pytest

from sharestate.errors import DecodeError
from sharestate.kafka.partitioning import java_string_hash, kafka_abs, state_topic_partition
from sharestate.kafka.wire import Reader, Writer, topic_id_from_str, topic_id_to_str

KIP_TOPIC_ID = "Uj5wn_FqTXirEASvVZRY1w"
KIP_TOPIC_BYTES = bytes.fromhex("523e709ff16a4d78ab1004af559458d7")


def test_topic_id_is_kafkas_unpadded_base64url() -> None:
    assert topic_id_to_str(KIP_TOPIC_BYTES) == KIP_TOPIC_ID
    assert topic_id_from_str(KIP_TOPIC_ID) == KIP_TOPIC_BYTES


@pytest.mark.parametrize("bad", ["", "short", KIP_TOPIC_ID + "A"])
def test_topic_id_from_str_rejects_malformed(bad: str) -> None:
    with pytest.raises(ValueError):
        topic_id_from_str(bad)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**31 - 1, "ffffffff07")],
)
def test_uvarint_round_trip(value: int, encoded: str) -> None:
    assert Writer().uvarint(value).getvalue().hex() == encoded
    assert Reader(bytes.fromhex(encoded)).uvarint("x") == value


def test_uvarint_longer_than_five_bytes_is_bad() -> None:
    with pytest.raises(DecodeError, match="^bad varint"):
        Reader(bytes.fromhex("ffffffffff01")).uvarint("count")


def test_uvarint_cut_short_is_truncated() -> None:
    with pytest.raises(DecodeError, match="^truncated"):
        Reader(bytes.fromhex("ff")).uvarint("count")


def test_strings_flexible_and_not() -> None:
    data = (
        Writer()
        .string("grüppe")
        .compact_string("日本")
        .compact_string(None)
        .string(None)
        .getvalue()
    )
    reader = Reader(data)
    assert reader.string("a") == "grüppe"
    assert reader.compact_string("b") == "日本"
    assert reader.compact_string("c", nullable=True) is None
    assert reader.string("d", nullable=True) is None
    assert reader.remaining() == 0


def test_null_where_not_nullable_is_impossible_length() -> None:
    with pytest.raises(DecodeError, match="^impossible length"):
        Reader(Writer().string(None).getvalue()).string("GroupId")


def test_malformed_utf8_is_replaced_like_java() -> None:
    assert Reader(b"\x00\x02\xc3\x28").string("s") == "\ufffd("


def test_array_count_beyond_the_bytes_is_impossible() -> None:
    with pytest.raises(DecodeError, match="^impossible length: batches claims 1000 elements"):
        Reader(Writer().uvarint(1001).getvalue() + b"\x00" * 30).compact_array_length("batches", 20)


def test_tagged_fields_keep_raw_bytes() -> None:
    data = Writer().tagged_fields([(0, b"\x00\x00\x00\x05"), (7, b"xy")]).getvalue()
    assert Reader(data).tagged_fields("v") == [(0, b"\x00\x00\x00\x05"), (7, b"xy")]


def test_java_string_hash_matches_java() -> None:
    # Values Java's String.hashCode() gives.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648
    # Outside the BMP Java hashes the two UTF-16 surrogates.
    assert java_string_hash("😀") == 31 * 0xD83D + 0xDE00


def test_kafka_abs_of_min_int_is_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert state_topic_partition("g", KIP_TOPIC_ID, 0, 50) in range(50)


def test_tags_beyond_int32_read_as_java_ints() -> None:
    """Kafka keeps an unknown tag >= 2**31 as a negative int (and the int32 `tag` column
    must hold it): 2**31 + 5 reads as -(2**31) + 5."""
    data = Writer().tagged_fields([((1 << 31) + 5, b"z")]).getvalue()
    assert Reader(data).tagged_fields("v") == [(-(1 << 31) + 5, b"z")]
