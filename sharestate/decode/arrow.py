"""Decoding whole Arrow arrays of exported records (what Spark's Arrow UDFs hand over).

Share-state records are decoded in two tiers:

* a numpy fast path for the shapes Kafka writes in practice (key type 0/1, value version 0,
  one layout, 1-2 byte array count, empty tagged sections in every batch element, and a
  top-level tagged section that is empty or holds only DeliveryCompleteCount), and
* the exact reference decoder (`sharestate.kafka.records`) for every other row, including every
  row that fails, so quarantine reasons always come from one place.

Both tiers must agree; the tests compare them on Kafka's golden records and random bytes.
Still no Spark here: batches in, batches out.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from sharestate.decode.columns import (
    GROUP_RESULT_FIELDS,
    GROUP_VALUE_COLUMNS,
    SHARE_STATE_DECODED_FIELDS,
    SHARE_STATE_RESULT_FIELDS,
    STATE_BATCHES_TYPE,
    UNKNOWN_TAGS_TYPE,
)
from sharestate.errors import DecodeError
from sharestate.kafka import schemas as s
from sharestate.kafka.records import decode_group_record, decode_share_state

_RECORD_TYPES = ("tombstone", "snapshot", "update")
#: Widest fixed read the fast path makes (the 4.1+ snapshot head: 40 bytes).
_PAD = 64

# Bytes between the value version and the state-batch array, per (layout family, record type).
_ARRAY_AT = {
    ("new", s.SHARE_SNAPSHOT): 36,
    ("new", s.SHARE_UPDATE): 16,
    ("4.0", s.SHARE_SNAPSHOT): 18,
    ("4.0", s.SHARE_UPDATE): 14,
}


# --- numpy helpers -------------------------------------------------------------------------


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start offsets, lengths, bytes) of a binary array without copying the bytes."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_binary(arr.type):
        off_dtype: type = np.int64
    elif pa.types.is_binary(arr.type):
        off_dtype = np.int32
    else:
        raise TypeError(f"expected a binary column, got {arr.type}")
    buffers = arr.buffers()
    all_offsets: np.ndarray = np.frombuffer(buffers[1], dtype=off_dtype)
    offsets = all_offsets[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    raw = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else None
    # Zero padding lets fixed-width reads near the end run without bounds checks.
    data = np.zeros((0 if raw is None else len(raw)) + _PAD, dtype=np.uint8)
    if raw is not None:
        data[: len(raw)] = raw
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    lengths = np.where(valid, offsets[1:] - offsets[:-1], -1)
    return offsets[:-1], lengths, data


def _gather(data: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Bytes [pos, pos+width) of each row as an (n, width) matrix. `data` carries
    `_PAD` zero bytes past its end, so a read that starts inside the data is exact;
    starts outside are clamped (callers mask those rows out)."""
    windows = sliding_window_view(data, width)
    rows: np.ndarray = windows[np.clip(pos, 0, len(windows) - 1)]
    return rows


def _field(matrix: np.ndarray, at: int, dtype: str) -> np.ndarray:
    """The big-endian field at byte `at` of each row of a byte matrix."""
    width = np.dtype(dtype).itemsize
    raw = np.ascontiguousarray(matrix[:, at : at + width])
    return raw.view(dtype).reshape(-1).astype(dtype[1:])


def _topic_ids(matrix: np.ndarray) -> pa.Array:
    """Base64url (Kafka's Uuid.toString) of the first 16 bytes of each row.

    Each id is padded to 18 bytes (a multiple of 3), so base64 of all ids laid end to end
    is every id's 24 characters in a row; the first 22 of each are Kafka's form."""
    n = len(matrix)
    padded = np.zeros((n, 18), dtype=np.uint8)
    padded[:, :16] = matrix[:, :16]
    encoded = np.frombuffer(base64.urlsafe_b64encode(padded.tobytes()), dtype=np.uint8)
    chars = encoded.reshape(n, 24)[:, :22]
    offsets = np.arange(0, 22 * n + 1, 22, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def _group_ids(
    key: pa.Array, rows: np.ndarray, kdata: np.ndarray, kpos: np.ndarray, glen: np.ndarray
) -> pa.Array:
    """GroupId of fast-path keys: the bytes between the 4-byte head and the 20-byte tail."""
    picked = key if len(rows) == len(key) else key.take(pa.array(rows, type=pa.int64()))
    sliced = pc.binary_slice(picked, 4, -20)
    try:
        return sliced.cast(pa.string())
    except pa.ArrowInvalid:  # malformed UTF-8: replace it as Java does
        return _strings(kdata, kpos + 4, glen)


def _labels(names: Sequence[str], codes: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A string column from small integer codes into `names` (null where not `valid`)."""
    indices = pa.array(codes.astype(np.int32), mask=None if valid is None else ~valid)
    labels: pa.Array = pa.array(names, type=pa.string()).take(indices)
    return labels


def _strings(data: np.ndarray, pos: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """UTF-8 strings at (pos, length) per row; malformed UTF-8 is replaced as Java does."""
    n = len(pos)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        idx = np.repeat(pos - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
        chars = data[idx]
    else:
        chars = np.zeros(0, dtype=np.uint8)
    if total and chars.max() >= 0x80:
        raw = chars.tobytes()
        return pa.array(
            [raw[offsets[i] : offsets[i + 1]].decode("utf-8", errors="replace") for i in range(n)],
            type=pa.string(),
        )
    return pa.StringArray.from_buffers(
        n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(chars.tobytes())
    )


# --- share state, fast path ----------------------------------------------------------------


def _fast_share_state(
    key: pa.Array, value: pa.Array, layouts: Sequence[str]
) -> tuple[np.ndarray, dict[str, pa.Array]]:
    """Decode the rows the fast path can take. Returns (mask of those rows, their columns).

    Only the first layout in `layouts` is tried here: a row it does not fit goes to the
    reference decoder, which tries them all, so both tiers pick the same layout. Each region
    is read with one gather: key head, key tail, value head, closing tags, batch elements."""
    family = "4.0" if layouts[0] == "4.0" else "new"
    accept_dcc = layouts[0] == "4.2"
    n = len(key)
    kpos, klen, kdata = _binary_parts(key)
    vpos, vlen, vdata = _binary_parts(value)

    # Key: int16 type, int16 group length, group, 16-byte topic id, int32 partition.
    key_head = _gather(kdata, kpos, 4)
    ktype = _field(key_head, 0, ">i2")
    glen = _field(key_head, 2, ">i2")
    ok = (klen >= 4) & ((ktype == s.SHARE_SNAPSHOT) | (ktype == s.SHARE_UPDATE)) & (glen >= 0)
    ok &= klen == 4 + glen + 20
    is_snapshot = ktype == s.SHARE_SNAPSHOT
    # An update tombstone is an error: leave it to the reference decoder.
    tombstone = ok & (vlen < 0) & is_snapshot

    # Value head: version, fixed fields, then 1-2 bytes of the batch-array count.
    array_at = np.where(
        is_snapshot, _ARRAY_AT[(family, s.SHARE_SNAPSHOT)], _ARRAY_AT[(family, s.SHARE_UPDATE)]
    )
    head = _gather(vdata, vpos, 2 + _ARRAY_AT[(family, s.SHARE_SNAPSHOT)] + 2)
    vend = vpos + np.maximum(vlen, 0)
    live = ok & (vlen >= 2) & (_field(head, 0, ">i2") == 0)
    live &= vpos + 2 + array_at + 2 <= vend  # count byte and at least one closing tag byte
    b0 = np.take_along_axis(head, (2 + array_at)[:, None], axis=1)[:, 0].astype(np.int64)
    b1 = np.take_along_axis(head, (3 + array_at)[:, None], axis=1)[:, 0].astype(np.int64)
    one_byte = b0 < 0x80
    two_byte = ~one_byte & (b1 < 0x80)
    count_plus_one = np.where(one_byte, b0, (b0 & 0x7F) | (b1 << 7))
    live &= (one_byte | two_byte) & (count_plus_one >= 1)
    count = np.where(live, count_plus_one - 1, 0)
    elements_at = vpos + 2 + array_at + np.where(one_byte, 1, 2)
    tags_at = elements_at + 20 * count
    live &= tags_at < vend
    tail = _gather(vdata, tags_at, 7)
    no_tags = (tail[:, 0] == 0) & (tags_at + 1 == vend)
    dcc_tag = (
        accept_dcc
        & (tail[:, 0] == 1)
        & (tail[:, 1] == 0)
        & (tail[:, 2] == 4)
        & (tags_at + 7 == vend)
    )
    live &= no_tags | dcc_tag

    # Batch elements: 20 bytes each, whose own tagged section must be the single byte 0.
    count = np.where(live, count, 0)
    first_element = np.concatenate([[0], np.cumsum(count)[:-1]])
    element_row = np.repeat(np.arange(n), count)
    element_pos = np.repeat(elements_at - 20 * first_element, count) + 20 * np.arange(
        len(element_row), dtype=np.int64
    )
    elements = _gather(vdata, element_pos, 20)
    bad_element = elements[:, 19] != 0
    if bad_element.any():
        live[np.unique(element_row[bad_element])] = False

    take = tombstone | live
    rows = np.flatnonzero(take)
    live_t, snap_t = live[rows], (is_snapshot & live)[rows]
    dcc_t = (live & dcc_tag)[rows]
    head_t = head[rows]
    if family == "new":
        snapshot_epoch = _field(head_t, 2, ">i4")
        after_epoch = 6
    else:
        snapshot_epoch = _field(head_t, 2, ">u2").astype(np.int32)
        after_epoch = 4
    # Snapshot: state epoch, leader epoch, start offset [, create, write]; update: leader, start.
    second_int = _field(head_t, after_epoch, ">i4")
    leader_epoch = np.where(snap_t, _field(head_t, after_epoch + 4, ">i4"), second_int)
    start_offset = np.where(
        snap_t, _field(head_t, after_epoch + 8, ">i8"), _field(head_t, after_epoch + 4, ">i8")
    )
    if family == "new":
        create_ts = _field(head_t, after_epoch + 16, ">i8")
        write_ts = _field(head_t, after_epoch + 24, ">i8")
    else:  # 4.0 snapshots have no timestamps
        create_ts = write_ts = np.zeros(len(rows), dtype=np.int64)
    has_timestamps = snap_t & (family == "new")

    count_t = count[rows]
    list_offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum(count_t, out=list_offsets[1:])
    element_t = elements[np.repeat(take, count)] if len(rows) < n else elements
    batch_struct = pa.StructArray.from_arrays(
        [
            pa.array(_field(element_t, 0, ">i8")),
            pa.array(_field(element_t, 8, ">i8")),
            pa.array(element_t[:, 16].view(np.int8).astype(np.int32)),
            pa.array(_field(element_t, 17, ">i2").astype(np.int32)),
        ],
        fields=list(STATE_BATCHES_TYPE.value_type),
    )
    state_batches = pa.ListArray.from_arrays(
        pa.array(list_offsets), batch_struct, type=STATE_BATCHES_TYPE
    )

    def masked(values: np.ndarray, mask: np.ndarray, dtype: pa.DataType) -> pa.Array:
        return pa.array(values, type=dtype, mask=~mask)

    if len(layouts) > 1 and layouts[0] == "4.2":
        # Auto-detection names a record without the tag 4.1, as the reference decoder does.
        layout = _labels(("4.1", "4.2"), dcc_t, live_t)
    else:
        layout = _labels((layouts[0],), np.zeros(len(rows)), live_t)
    record_type = _labels(_RECORD_TYPES, np.where(live_t, np.where(snap_t, 1, 2), 0))
    kpos_t, glen_t = kpos[rows], glen[rows]
    key_tail = _gather(kdata, kpos_t + 4 + glen_t, 20)

    columns: dict[str, pa.Array] = {
        "record_type": record_type,
        "group_id": _group_ids(key, rows, kdata, kpos_t, glen_t),
        "topic_id": _topic_ids(key_tail),
        "partition": pa.array(_field(key_tail, 16, ">i4")),
        "snapshot_epoch": masked(snapshot_epoch, live_t, pa.int32()),
        "state_epoch": masked(second_int, snap_t, pa.int32()),
        "leader_epoch": masked(leader_epoch, live_t, pa.int32()),
        "start_offset": masked(start_offset, live_t, pa.int64()),
        "create_timestamp": masked(create_ts, has_timestamps, pa.int64()),
        "write_timestamp": masked(write_ts, has_timestamps, pa.int64()),
        "delivery_complete_count": masked(_field(tail[rows], 3, ">i4"), dcc_t, pa.int32()),
        "state_batches": state_batches,
        "layout": layout,
        "value_version": masked(np.zeros(len(rows), np.int16), live_t, pa.int16()),
        # Rows with unknown tags never take the fast path.
        "unknown_tagged_fields": pa.nulls(len(rows), type=UNKNOWN_TAGS_TYPE),
    }
    return take, columns


# --- share state, reference path -----------------------------------------------------------


def _slow_share_state(
    keys: Sequence[bytes | None], values: Sequence[bytes | None], layouts: Sequence[str]
) -> tuple[dict[str, list[Any]], list[str | None]]:
    columns: dict[str, list[Any]] = {f.name: [] for f in SHARE_STATE_DECODED_FIELDS}
    errors: list[str | None] = []
    for key, value in zip(keys, values, strict=True):
        try:
            row = decode_share_state(key, value, layouts)
            error = None
        except DecodeError as err:
            row = {}
            error = str(err)
        except Exception as err:  # never let one row take the job down
            row = {}
            error = f"decoder failure: {type(err).__name__}: {err}"
        errors.append(error)
        for name, col in columns.items():
            col.append(row.get(name))
    # No unknown tags is null, as on the fast path.
    columns["unknown_tagged_fields"] = [tags or None for tags in columns["unknown_tagged_fields"]]
    return columns, errors


def _struct(
    columns: Mapping[str, pa.Array | list[Any]], fields: Sequence[pa.Field]
) -> pa.StructArray:
    arrays = [
        col if isinstance(col, pa.Array) else pa.array(col, type=f.type)
        for f, col in ((f, columns[f.name]) for f in fields)
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(fields))


def _in_input_order(
    parts: list[tuple[np.ndarray, pa.StructArray]], fields: Sequence[pa.Field]
) -> pa.StructArray:
    """Stitch the tiers' results back into input row order."""
    if not parts:
        return pa.array([], type=pa.struct(list(fields)))
    if len(parts) == 1:
        return parts[0][1]  # one tier took every row, in order
    combined = pa.concat_arrays([array for _, array in parts])
    inverse = np.argsort(np.concatenate([rows for rows, _ in parts]), kind="stable")
    result: pa.StructArray = combined.take(pa.array(inverse))
    return result


def decode_share_state_arrays(
    key: pa.Array, value: pa.Array, layouts: Sequence[str], use_fast_path: bool = True
) -> pa.StructArray:
    """Decode aligned key/value arrays into a struct array of `SHARE_STATE_RESULT_FIELDS`,
    one element per input row in input order; `decode_error` is set on rows that failed."""
    n = len(key)
    parts: list[tuple[np.ndarray, pa.StructArray]] = []
    taken = np.zeros(n, dtype=bool)
    if use_fast_path and n:
        taken, columns = _fast_share_state(key, value, layouts)
        if taken.any():
            rows = np.flatnonzero(taken)
            columns["decode_error"] = pa.nulls(len(rows), type=pa.string())
            parts.append((rows, _struct(columns, SHARE_STATE_RESULT_FIELDS)))
    rest = np.flatnonzero(~taken)
    if len(rest):
        picked = pa.array(rest, type=pa.int64())
        slow, errors = _slow_share_state(
            key.take(picked).to_pylist(), value.take(picked).to_pylist(), layouts
        )
        slow["decode_error"] = errors
        parts.append((rest, _struct(slow, SHARE_STATE_RESULT_FIELDS)))
    return _in_input_order(parts, SHARE_STATE_RESULT_FIELDS)


# --- __consumer_offsets --------------------------------------------------------------------


def decode_group_arrays(key: pa.Array, value: pa.Array, layouts: Sequence[str]) -> pa.StructArray:
    """Decode `__consumer_offsets` rows (reference decoder; the volume is small) into a struct
    array of `GROUP_RESULT_FIELDS`, in input order."""
    columns: dict[str, list[Any]] = {f.name: [] for f in GROUP_RESULT_FIELDS}
    for raw_key, raw_value in zip(key.to_pylist(), value.to_pylist(), strict=True):
        error: str | None = None
        try:
            row = decode_group_record(raw_key, raw_value, layouts)
        except DecodeError as err:
            row, error = {}, str(err)
        except Exception as err:  # never let one row take the job down
            row, error = {}, f"decoder failure: {type(err).__name__}: {err}"
        fields = row.get("fields", {})
        rtype = row.get("record_type_id")
        for name, col in columns.items():
            if name == "decode_error":
                col.append(error)
            elif name == "unknown_tagged_fields":
                col.append(row.get(name) or None)
            elif name in GROUP_VALUE_COLUMNS:
                owner, kafka_name, _ = GROUP_VALUE_COLUMNS[name]
                col.append(fields.get(kafka_name) if owner == rtype else None)
            else:
                col.append(row.get(name))
    return _struct(columns, GROUP_RESULT_FIELDS)
