"""Pure-Python decoding of coordinator records: bytes in, plain dicts out, no Spark.

This is the exact reference decoder. `sharestate.fast_decode` vectorizes the common
share-state shapes with numpy and falls back to these functions for everything else, and
the tests hold the two to the same answers.

Every failure is a `DecodeError` whose message is the quarantine reason; it starts with one
of the words in `REASON_KINDS` so reasons can be grouped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from sharestate.errors import DecodeError, InvalidConfigError
from sharestate.kafka import schemas as s
from sharestate.kafka.constants import KNOWN_KAFKA_RELEASES
from sharestate.kafka.wire import Reader

#: First words of quarantine reasons.
REASON_KINDS: Final = (
    "null key",
    "truncated",
    "trailing bytes",
    "bad varint",
    "impossible length",
    "bad tagged field",
    "unknown record type",
    "unknown value version",
    "update tombstone",
    "no layout fits",
    "wrong topic",
)

UnknownTags = list[tuple[str, int, bytes]]
StateBatch = tuple[int, int, int, int]

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)?$")


def parse_kafka_version(text: str) -> tuple[int, int] | None:
    """`auto` -> None; `4.1` / `4.1.2` -> (4, 1), for the releases in KNOWN_KAFKA_RELEASES
    (share groups exist from Kafka 4.0 on)."""
    if text == "auto":
        return None
    match = _VERSION_RE.match(text.strip())
    if not match:
        raise InvalidConfigError(
            f"--kafka-version {text!r}: expected 'auto' or a Kafka release such as 4.1 or 4.2.1"
        )
    version = (int(match.group(1)), int(match.group(2)))
    if version < (4, 0):
        raise InvalidConfigError(
            f"--kafka-version {text}: share groups (KIP-932) first shipped in Kafka 4.0"
        )
    if version not in KNOWN_KAFKA_RELEASES:
        known = ", ".join(f"{major}.{minor}" for major, minor in KNOWN_KAFKA_RELEASES)
        raise InvalidConfigError(
            f"--kafka-version {text}: not a Kafka release this job knows the record layouts "
            f"of ({known}); give one of those, or auto"
        )
    return version


def share_state_layouts(kafka_version: str = "auto") -> tuple[str, ...]:
    """Layouts to try for `__share_group_state` values, in order."""
    version = parse_kafka_version(kafka_version)
    if version is None:
        # The 4.2 table parses 4.1 bytes too (its only addition is a tagged field).
        return ("4.2", "4.0")
    if version == (4, 0):
        return ("4.0",)
    if version == (4, 1):
        return ("4.1",)
    return ("4.2",)


def group_layouts(kafka_version: str = "auto") -> tuple[str, ...]:
    """Layouts to try for share-group values on `__consumer_offsets`, in order."""
    version = parse_kafka_version(kafka_version)
    if version is None:
        return ("4.1", "4.0", "4.0+")
    if version == (4, 0):
        return ("4.0", "4.0+")
    return ("4.1", "4.0+")


# --- generic struct decoding ---------------------------------------------------------------


def _read_fixed(reader: Reader, kind: str, what: str) -> int:
    if kind == s.INT8:
        return reader.int8(what)
    if kind == s.INT16:
        return reader.int16(what)
    if kind == s.UINT16:
        return reader.uint16(what)
    if kind == s.INT32:
        return reader.int32(what)
    if kind == s.INT64:
        return reader.int64(what)
    raise AssertionError(f"not a fixed-width kind: {kind}")


_FIXED_SIZE: Final = {s.INT8: 1, s.INT16: 2, s.UINT16: 2, s.INT32: 4, s.INT64: 8}


def _read_field(reader: Reader, f: s.Field, flexible: bool, unknown: UnknownTags, path: str) -> Any:
    what = f"{path}.{f.name}" if path else f.name
    kind = f.kind
    if kind in _FIXED_SIZE:
        return _read_fixed(reader, kind, what)
    if kind == s.UUID:
        return reader.uuid(what)
    if kind == s.STRING:
        if flexible:
            return reader.compact_string(what, f.nullable)
        return reader.string(what, f.nullable)
    if kind == s.INT32_ARRAY:
        count = reader.compact_array_length(what, 4)
        return [reader.int32(what) for _ in range(count)]
    if kind == s.STRING_ARRAY:
        count = reader.compact_array_length(what, 1)
        return [reader.compact_string(what) for _ in range(count)]
    if kind == s.STRUCT_ARRAY:
        assert f.struct is not None
        count = reader.compact_array_length(what, f.struct.min_bytes)
        return [decode_struct(reader, f.struct, unknown, f"{what}[{i}]") for i in range(count)]
    raise AssertionError(f"unhandled kind {kind}")


def decode_struct(
    reader: Reader, struct: s.Struct, unknown: UnknownTags, path: str = ""
) -> dict[str, Any]:
    """Decode one struct. Tagged fields absent from the wire come back as None; unknown tags
    are appended to `unknown` as (path, tag, bytes), as Kafka keeps them."""
    out: dict[str, Any] = {}
    for f in struct.fields:
        out[f.name] = _read_field(reader, f, struct.flexible, unknown, path)
    if struct.flexible:
        for tf in struct.tagged:
            out[tf.name] = None
        where = path or struct.name
        for tag, data in reader.tagged_fields(where):
            known = next((tf for tf in struct.tagged if tf.tag == tag), None)
            if known is None:
                unknown.append((path, tag, data))
                continue
            size = _FIXED_SIZE[known.kind]
            if len(data) != size:
                raise DecodeError(
                    f"bad tagged field: {where} tag {tag} ({known.name}) has {len(data)} bytes, "
                    f"expected {size}"
                )
            out[known.name] = _read_fixed(Reader(data), known.kind, known.name)
    return out


def _decode_exactly(
    data: bytes, start: int, struct: s.Struct, what: str
) -> tuple[dict[str, Any], UnknownTags]:
    reader = Reader(data, start)
    unknown: UnknownTags = []
    out = decode_struct(reader, struct, unknown)
    require_consumed(reader, what)
    return out, unknown


def require_consumed(reader: Reader, what: str) -> None:
    """A record's parse must use every byte: leftovers mean a wrong layout or bad bytes."""
    if reader.remaining():
        raise DecodeError(
            f"trailing bytes: {what} ends at byte {reader.pos}, "
            f"{reader.remaining()} bytes left over"
        )


def _record_type(key: bytes | None, topic: str) -> tuple[int, Reader]:
    if key is None:
        raise DecodeError(f"null key: a {topic} record always has a key")
    reader = Reader(key)
    return reader.int16("key record type"), reader


def _value_version(value: bytes, record_name: str) -> int:
    version = Reader(value).int16("value version")
    if version != 0:
        hint = " (pre-release 4.0 builds wrote 1)" if record_name == "ShareUpdate" else ""
        raise DecodeError(
            f"unknown value version {version} for {record_name}: released Kafka writes only 0{hint}"
        )
    return version


def _try_layouts(
    value: bytes, tables: dict[str, s.Struct], layouts: Sequence[str], record_name: str
) -> tuple[str, dict[str, Any], UnknownTags]:
    failures: list[str] = []
    fit_with_unknown_tags: tuple[str, dict[str, Any], UnknownTags] | None = None
    for layout in layouts:
        table = tables.get(layout)
        if table is None:
            continue
        try:
            fields, unknown = _decode_exactly(value, 2, table, f"{record_name} value")
        except DecodeError as err:
            failures.append(f"[{layout}] {err}")
            continue
        if not unknown:
            return layout, fields, unknown
        # Unknown tags can soak up the bytes a wrong layout leaves over (a 4.0 record can
        # parse under the 4.1+ table that way); Kafka writes none, so a later layout that
        # fits without any wins. Without unknown tags (and with minimal varints, as Kafka
        # writes them) no value fits two layouts: see docs/kafka-formats.md.
        fit_with_unknown_tags = fit_with_unknown_tags or (layout, fields, unknown)
    if fit_with_unknown_tags is not None:
        return fit_with_unknown_tags
    if len(failures) == 1:
        # One layout asked for: its own error is the precise reason.
        raise DecodeError(failures[0].split("] ", 1)[1])
    raise DecodeError(f"no layout fits the {record_name} value: " + "; ".join(failures))


# --- __share_group_state -------------------------------------------------------------------

SHARE_STATE_FIELDS: Final = (
    "record_type",
    "group_id",
    "topic_id",
    "partition",
    "snapshot_epoch",
    "state_epoch",
    "leader_epoch",
    "start_offset",
    "create_timestamp",
    "write_timestamp",
    "delivery_complete_count",
    "state_batches",
    "layout",
    "value_version",
    "unknown_tagged_fields",
)


def decode_share_state(
    key: bytes | None, value: bytes | None, layouts: Sequence[str] = ("4.2", "4.0")
) -> dict[str, Any]:
    """Decode one `__share_group_state` record into the fields of `share_state_records`."""
    rtype, reader = _record_type(key, s.SHARE_STATE_TOPIC)
    if rtype not in (s.SHARE_SNAPSHOT, s.SHARE_UPDATE):
        raise DecodeError(
            f"unknown record type {rtype} on {s.SHARE_STATE_TOPIC}: Kafka writes 0 (ShareSnapshot)"
            " and 1 (ShareUpdate) only"
        )
    record_name = "ShareSnapshot" if rtype == s.SHARE_SNAPSHOT else "ShareUpdate"
    unknown: UnknownTags = []
    key_fields = decode_struct(reader, s.SHARE_STATE_KEY, unknown)
    require_consumed(reader, f"{record_name} key")
    row: dict[str, Any] = dict.fromkeys(SHARE_STATE_FIELDS)
    row.update(key_fields)
    if value is None:
        if rtype == s.SHARE_UPDATE:
            raise DecodeError(
                "update tombstone: null value on a ShareUpdate key; Kafka writes tombstones on"
                " ShareSnapshot keys only and its coordinator cannot replay this one"
            )
        row["record_type"] = "tombstone"
        row["state_batches"] = []
        row["unknown_tagged_fields"] = []
        return row
    row["value_version"] = _value_version(value, record_name)
    tables = s.SHARE_SNAPSHOT_VALUE if rtype == s.SHARE_SNAPSHOT else s.SHARE_UPDATE_VALUE
    layout, fields, unknown = _try_layouts(value, tables, layouts, record_name)
    if layout == "4.2" and fields["delivery_complete_count"] is None and len(layouts) > 1:
        # Auto-detection: without the tag the bytes are exactly a 4.1 record.
        layout = "4.1"
    row.update(fields)
    row["record_type"] = "snapshot" if rtype == s.SHARE_SNAPSHOT else "update"
    row["layout"] = layout
    row["state_batches"] = [
        (b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
        for b in fields["state_batches"]
    ]
    row["unknown_tagged_fields"] = unknown
    return row


# --- __consumer_offsets --------------------------------------------------------------------


def decode_group_record(
    key: bytes | None, value: bytes | None, layouts: Sequence[str] = ("4.1", "4.0", "4.0+")
) -> dict[str, Any]:
    """Decode one `__consumer_offsets` record.

    Share-group records (types 9-15) are decoded fully; every other type is classified by
    its record name and passed through (`decoded` False), never an error.
    """
    rtype, reader = _record_type(key, s.CONSUMER_OFFSETS_TOPIC)
    name = s.GROUP_RECORD_TYPES.get(rtype, "Unknown")
    row: dict[str, Any] = {
        "record_type_id": rtype,
        "record_type": name,
        "is_share_record": rtype in s.SHARE_GROUP_RECORD_TYPES,
        "tombstone": value is None,
        "group_id": None,
        "member_id": None,
        "layout": None,
        "value_version": None,
        "fields": {},
        "unknown_tagged_fields": [],
    }
    if rtype not in s.SHARE_GROUP_RECORD_TYPES:
        return row
    unknown: UnknownTags = []
    key_fields = decode_struct(reader, s.SHARE_GROUP_KEYS[rtype], unknown)
    require_consumed(reader, f"{name} key")
    row["group_id"] = key_fields["group_id"]
    row["member_id"] = key_fields.get("member_id")
    if value is None:
        return row
    row["value_version"] = _value_version(value, name)
    tables = s.SHARE_GROUP_VALUES[rtype]
    # Type 9 exists only in the 4.0 layout; decode it whatever version was asked for.
    tried = [layout for layout in layouts if layout in tables] or list(tables)
    layout, fields, unknown = _try_layouts(value, tables, tried, name)
    row["layout"] = layout
    row["fields"] = fields
    row["unknown_tagged_fields"] = unknown
    return row
