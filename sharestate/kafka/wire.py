"""Kafka's generated-message wire encoding: the primitives every coordinator record uses.

Record keys on the coordinator topics are *non-flexible* (int16-length strings, no tagged
fields); share-related values are *flexible* (unsigned-varint compact strings and arrays, a
tagged-field section closing every struct). Everything is big-endian.

`Reader` decodes, `Writer` encodes (the encoder serves sample data, tests and the benchmark;
the golden files made by Kafka itself are what prove the decoder right).
"""

from __future__ import annotations

import base64
import struct
import uuid as _uuid

from sharestate.errors import DecodeError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_UUID = struct.Struct(">16s")

# A compact length above this cannot be real: a coordinator record is far below 2 GiB.
_MAX_UVARINT_BYTES = 5


def topic_id_to_str(raw: bytes) -> str:
    """Kafka's `Uuid.toString`: unpadded base64url of the 16 bytes (22 characters)."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> bytes:
    """Inverse of `topic_id_to_str`; raises ValueError on anything but 22 base64url chars."""
    if len(text) != 22:
        raise ValueError(f"topic id {text!r} is not 22 base64url characters")
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} does not decode to 16 bytes")
    return raw


def random_topic_id(rng_bytes: bytes | None = None) -> str:
    """A topic id in Kafka's printed form, from 16 given bytes or uuid4."""
    return topic_id_to_str(rng_bytes if rng_bytes is not None else _uuid.uuid4().bytes)


class Reader:
    """Cursor over one record's bytes. Every read checks bounds and names what was cut short."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, what: str) -> int:
        start = self.pos
        if n > self.end - start:
            raise DecodeError(
                f"truncated: {what} needs {n} bytes at byte {start}, {self.end - start} left"
            )
        self.pos = start + n
        return start

    def int8(self, what: str) -> int:
        value: int = _I8.unpack_from(self.buf, self._take(1, what))[0]
        return value

    def int16(self, what: str) -> int:
        value: int = _I16.unpack_from(self.buf, self._take(2, what))[0]
        return value

    def uint16(self, what: str) -> int:
        value: int = _U16.unpack_from(self.buf, self._take(2, what))[0]
        return value

    def int32(self, what: str) -> int:
        value: int = _I32.unpack_from(self.buf, self._take(4, what))[0]
        return value

    def int64(self, what: str) -> int:
        value: int = _I64.unpack_from(self.buf, self._take(8, what))[0]
        return value

    def uuid(self, what: str) -> str:
        start = self._take(16, what)
        return topic_id_to_str(self.buf[start : start + 16])

    def uvarint(self, what: str) -> int:
        result = 0
        shift = 0
        for i in range(_MAX_UVARINT_BYTES):
            if self.pos >= self.end:
                raise DecodeError(f"truncated: unsigned varint {what} at byte {self.pos}")
            byte = self.buf[self.pos]
            self.pos += 1
            if i == _MAX_UVARINT_BYTES - 1 and byte > 0x0F:
                raise DecodeError(f"bad varint: {what} does not fit 32 bits")
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
        raise DecodeError(f"bad varint: {what} longer than {_MAX_UVARINT_BYTES} bytes")

    def _utf8(self, start: int, length: int) -> str:
        # Java's `new String(bytes, UTF_8)` replaces malformed input; so do we.
        return self.buf[start : start + length].decode("utf-8", errors="replace")

    def string(self, what: str, nullable: bool = False) -> str | None:
        """Non-flexible string: int16 length (-1 = null), UTF-8 bytes."""
        length = self.int16(f"{what} length")
        if length < 0:
            if length == -1 and nullable:
                return None
            raise DecodeError(f"impossible length: {what} has length {length}")
        return self._utf8(self._take(length, what), length)

    def compact_string(self, what: str, nullable: bool = False) -> str | None:
        """Flexible string: uvarint length+1 (0 = null), UTF-8 bytes."""
        length_plus_one = self.uvarint(f"{what} length")
        if length_plus_one == 0:
            if nullable:
                return None
            raise DecodeError(f"impossible length: non-nullable {what} is null")
        length = length_plus_one - 1
        return self._utf8(self._take(length, what), length)

    def compact_array_length(
        self, what: str, min_element_bytes: int, nullable: bool = False
    ) -> int:
        """Flexible array count (uvarint count+1); -1 for a null array where allowed."""
        count_plus_one = self.uvarint(f"{what} count")
        if count_plus_one == 0:
            if nullable:
                return -1
            raise DecodeError(f"impossible length: non-nullable array {what} is null")
        count = count_plus_one - 1
        if count * min_element_bytes > self.end - self.pos:
            raise DecodeError(
                f"impossible length: {what} claims {count} elements, "
                f"only {self.end - self.pos} bytes left"
            )
        return count

    def tagged_fields(self, what: str) -> list[tuple[int, bytes]]:
        """A tagged-field section: returns (tag, raw bytes) in wire order."""
        count = self.uvarint(f"{what} tagged-field count")
        if count > self.end - self.pos:
            raise DecodeError(f"impossible length: {what} claims {count} tagged fields")
        fields: list[tuple[int, bytes]] = []
        for _ in range(count):
            tag = self.uvarint(f"{what} tag")
            if tag >= 1 << 31:
                # Kafka reads the tag into a Java int and keeps an unknown one as it is:
                # tags of 2**31 and up come out negative.
                tag -= 1 << 32
            size = self.uvarint(f"{what} tag {tag} size")
            start = self._take(size, f"{what} tag {tag}")
            fields.append((tag, self.buf[start : start + size]))
        return fields


class Writer:
    """Builds record bytes with the same primitives (sample data, tests, benchmark)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def getvalue(self) -> bytes:
        return b"".join(self.parts)

    def int8(self, value: int) -> Writer:
        self.parts.append(_I8.pack(value))
        return self

    def int16(self, value: int) -> Writer:
        self.parts.append(_I16.pack(value))
        return self

    def uint16(self, value: int) -> Writer:
        self.parts.append(_U16.pack(value))
        return self

    def int32(self, value: int) -> Writer:
        self.parts.append(_I32.pack(value))
        return self

    def int64(self, value: int) -> Writer:
        self.parts.append(_I64.pack(value))
        return self

    def uuid(self, topic_id: str) -> Writer:
        self.parts.append(_UUID.pack(topic_id_from_str(topic_id)))
        return self

    def uvarint(self, value: int) -> Writer:
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self.parts.append(bytes(out))
        return self

    def string(self, text: str | None) -> Writer:
        if text is None:
            return self.int16(-1)
        data = text.encode("utf-8")
        self.int16(len(data))
        self.parts.append(data)
        return self

    def compact_string(self, text: str | None) -> Writer:
        if text is None:
            return self.uvarint(0)
        data = text.encode("utf-8")
        self.uvarint(len(data) + 1)
        self.parts.append(data)
        return self

    def compact_array_length(self, count: int | None) -> Writer:
        return self.uvarint(0 if count is None else count + 1)

    def tagged_fields(self, fields: list[tuple[int, bytes]] | None = None) -> Writer:
        fields = fields or []
        self.uvarint(len(fields))
        for tag, data in sorted(fields):
            self.uvarint(tag).uvarint(len(data))
            self.parts.append(data)
        return self

    def raw(self, data: bytes) -> Writer:
        self.parts.append(data)
        return self
