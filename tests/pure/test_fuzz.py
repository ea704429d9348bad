"""Random and mutated bytes: the decoders never raise anything but DecodeError, never hang,
and every row comes out decoded or quarantined with a reason. The numpy fast path and the
reference decoder agree on every row.

Examples per test: SHARESTATE_FUZZ_EXAMPLES (default 2000 for the main properties).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharestate.decode.arrow import decode_share_state_arrays
from sharestate.errors import DecodeError
from sharestate.kafka.records import (
    REASON_KINDS,
    decode_group_record,
    decode_share_state,
    share_state_layouts,
)
from sharestate.kafka.wire import topic_id_to_str
from sharestate.sample import encode

EXAMPLES = int(os.environ.get("SHARESTATE_FUZZ_EXAMPLES", "2000"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=dt.timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LAYOUT_CHOICES = ["auto", "4.0", "4.1", "4.2"]

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
batch = st.tuples(int64, int64, st.integers(-128, 127), int16)


@st.composite
def share_state_record(draw: st.DrawFn) -> tuple[bytes, bytes | None, dict[str, Any]]:
    """(key, value, the fields that went in)."""
    layout = draw(st.sampled_from(["4.0", "4.1", "4.2"]))
    record_type = draw(st.sampled_from([0, 1]))
    fields: dict[str, Any] = {
        "group_id": draw(st.text(max_size=40)),
        "topic_id": topic_id_to_str(draw(st.binary(min_size=16, max_size=16))),
        "partition": draw(int32),
    }
    key = encode.share_state_key(
        record_type, fields["group_id"], fields["topic_id"], fields["partition"]
    )
    if record_type == 0 and draw(st.booleans()) and draw(st.booleans()):
        return key, None, {**fields, "record_type": "tombstone"}
    dcc = draw(st.one_of(st.none(), int32.filter(lambda v: v != -1))) if layout == "4.2" else None
    fields.update(
        snapshot_epoch=draw(st.integers(0, 65535) if layout == "4.0" else int32),
        leader_epoch=draw(int32),
        start_offset=draw(int64),
        state_batches=draw(st.lists(batch, max_size=140)),
        delivery_complete_count=dcc,
        layout="4.1" if layout == "4.2" and dcc is None else layout,
    )
    common = {
        "snapshot_epoch": fields["snapshot_epoch"],
        "leader_epoch": fields["leader_epoch"],
        "start_offset": fields["start_offset"],
        "batches": fields["state_batches"],
        "delivery_complete_count": dcc,
        "layout": layout,
    }
    if record_type == 0:
        fields.update(record_type="snapshot", state_epoch=draw(int32))
        if layout != "4.0":
            fields.update(create_timestamp=draw(int64), write_timestamp=draw(int64))
        value = encode.share_snapshot_value(
            state_epoch=fields["state_epoch"],
            create_timestamp=fields.get("create_timestamp", 0),
            write_timestamp=fields.get("write_timestamp", 0),
            **common,
        )
    else:
        fields["record_type"] = "update"
        value = encode.share_update_value(**common)
    return key, value, fields


def _mutate(data: bytes, draw: st.DrawFn) -> bytes:
    how = draw(st.sampled_from(["truncate", "flip", "extend", "splice", "keep"]))
    if how == "truncate" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip" and data:
        at = draw(st.integers(0, len(data) - 1))
        bit = 1 << draw(st.integers(0, 7))
        return data[:at] + bytes([data[at] ^ bit]) + data[at + 1 :]
    if how == "extend":
        return data + draw(st.binary(min_size=1, max_size=8))
    if how == "splice" and data:
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(max_size=6)) + data[at:]
    return data


@st.composite
def damaged_record(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    key, value, _ = draw(share_state_record())
    if draw(st.booleans()):
        key = _mutate(key, draw)
    if value is not None and draw(st.booleans()):
        value = _mutate(value, draw)
    return key, value


def _decode_or_reason(
    key: bytes | None, value: bytes | None, layouts: tuple[str, ...]
) -> dict[str, Any] | str:
    try:
        return decode_share_state(key, value, layouts)
    except DecodeError as err:
        reason = str(err)
        assert reason.startswith(REASON_KINDS), reason
        return reason


@FUZZ
@given(
    key=st.one_of(st.none(), st.binary(max_size=64)),
    value=st.one_of(st.none(), st.binary(max_size=256)),
    layout=st.sampled_from(LAYOUT_CHOICES),
)
def test_random_bytes_decode_or_give_a_reason(
    key: bytes | None, value: bytes | None, layout: str
) -> None:
    _decode_or_reason(key, value, share_state_layouts(layout))
    try:
        decode_group_record(key, value)
    except DecodeError as err:
        assert str(err).startswith(REASON_KINDS), str(err)


@FUZZ
@given(record=share_state_record())
def test_valid_records_round_trip(record: tuple[bytes, bytes | None, dict[str, Any]]) -> None:
    key, value, fields = record
    row = decode_share_state(key, value, share_state_layouts("auto"))
    assert {name: row[name] for name in fields} == fields


@settings(FUZZ, max_examples=max(EXAMPLES // 10, 50))
@given(
    records=st.lists(damaged_record(), min_size=1, max_size=60),
    layout=st.sampled_from(LAYOUT_CHOICES),
)
def test_arrays_fast_path_equals_reference_and_loses_nothing(
    records: list[tuple[bytes | None, bytes | None]], layout: str
) -> None:
    layouts = share_state_layouts(layout)
    keys = pa.array([k for k, _ in records], pa.binary())
    values = pa.array([v for _, v in records], pa.binary())
    fast = decode_share_state_arrays(keys, values, layouts)
    reference = decode_share_state_arrays(keys, values, layouts, use_fast_path=False)
    assert len(fast) == len(records)
    assert fast.equals(reference)
    for row, (key, value) in zip(fast.to_pylist(), records, strict=True):
        expected = _decode_or_reason(key, value, layouts)
        if isinstance(expected, str):
            assert row["decode_error"] == expected
        else:
            assert row["decode_error"] is None
            assert row["start_offset"] == expected["start_offset"]
            batches = [tuple(b.values()) for b in row["state_batches"]]
            assert batches == expected["state_batches"]
