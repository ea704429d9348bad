"""Encoding coordinator records from the same field tables the decoder uses.

Used for sample data, the benchmark and round-trip tests. It is not the oracle: the golden
files written by Kafka's own serializers (tests/kafka/golden/) are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sharestate.kafka import schemas as s
from sharestate.kafka.wire import Writer

StateBatch = tuple[int, int, int, int]


def _write_fixed(w: Writer, kind: str, value: int) -> None:
    {
        s.INT8: w.int8,
        s.INT16: w.int16,
        s.UINT16: w.uint16,
        s.INT32: w.int32,
        s.INT64: w.int64,
    }[kind](value)


_FIXED_SIZE = {s.INT8: 1, s.INT16: 2, s.UINT16: 2, s.INT32: 4, s.INT64: 8}


def encode_struct(
    w: Writer,
    struct: s.Struct,
    values: Mapping[str, Any],
    extra_tags: Iterable[tuple[int, bytes]] = (),
) -> None:
    """Write `values` (Kafka field names in snake_case) as `struct`. Tagged fields that are
    None or hold their default are omitted, as Kafka does."""
    for f in struct.fields:
        value = values[f.name]
        kind = f.kind
        if kind in _FIXED_SIZE:
            _write_fixed(w, kind, value)
        elif kind == s.UUID:
            w.uuid(value)
        elif kind == s.STRING:
            if struct.flexible:
                w.compact_string(value)
            else:
                w.string(value)
        elif kind == s.INT32_ARRAY:
            w.compact_array_length(len(value))
            for item in value:
                w.int32(item)
        elif kind == s.STRING_ARRAY:
            w.compact_array_length(len(value))
            for item in value:
                w.compact_string(item)
        elif kind == s.STRUCT_ARRAY:
            assert f.struct is not None
            w.compact_array_length(len(value))
            for item in value:
                encode_struct(w, f.struct, item)
        else:
            raise AssertionError(kind)
    if struct.flexible:
        tags: list[tuple[int, bytes]] = list(extra_tags)
        for tf in struct.tagged:
            value = values.get(tf.name)
            if value is not None and value != tf.default:
                inner = Writer()
                _write_fixed(inner, tf.kind, value)
                tags.append((tf.tag, inner.getvalue()))
        w.tagged_fields(tags)


def share_state_key(record_type: int, group_id: str, topic_id: str, partition: int) -> bytes:
    w = Writer().int16(record_type)
    encode_struct(
        w, s.SHARE_STATE_KEY, {"group_id": group_id, "topic_id": topic_id, "partition": partition}
    )
    return w.getvalue()


def _batches(batches: Iterable[StateBatch]) -> list[dict[str, int]]:
    return [
        {"first_offset": f, "last_offset": last, "delivery_state": st, "delivery_count": c}
        for f, last, st, c in batches
    ]


def share_snapshot_value(
    *,
    snapshot_epoch: int,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: Iterable[StateBatch] = (),
    create_timestamp: int = 0,
    write_timestamp: int = 0,
    delivery_complete_count: int | None = None,
    layout: str = "4.1",
) -> bytes:
    w = Writer().int16(0)
    encode_struct(
        w,
        s.SHARE_SNAPSHOT_VALUE[layout],
        {
            "snapshot_epoch": snapshot_epoch,
            "state_epoch": state_epoch,
            "leader_epoch": leader_epoch,
            "start_offset": start_offset,
            "create_timestamp": create_timestamp,
            "write_timestamp": write_timestamp,
            "delivery_complete_count": delivery_complete_count,
            "state_batches": _batches(batches),
        },
    )
    return w.getvalue()


def share_update_value(
    *,
    snapshot_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: Iterable[StateBatch] = (),
    delivery_complete_count: int | None = None,
    layout: str = "4.1",
) -> bytes:
    w = Writer().int16(0)
    encode_struct(
        w,
        s.SHARE_UPDATE_VALUE[layout],
        {
            "snapshot_epoch": snapshot_epoch,
            "leader_epoch": leader_epoch,
            "start_offset": start_offset,
            "delivery_complete_count": delivery_complete_count,
            "state_batches": _batches(batches),
        },
    )
    return w.getvalue()


def group_record(
    record_type: int,
    key_fields: Mapping[str, Any],
    value_fields: Mapping[str, Any] | None,
    layout: str,
) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a share-group record on `__consumer_offsets` (types 9-15)."""
    kw = Writer().int16(record_type)
    encode_struct(kw, s.SHARE_GROUP_KEYS[record_type], key_fields)
    if value_fields is None:
        return kw.getvalue(), None
    vw = Writer().int16(0)
    encode_struct(vw, s.SHARE_GROUP_VALUES[record_type][layout], value_fields)
    return kw.getvalue(), vw.getvalue()
