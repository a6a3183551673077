"""Variable-length integers: unsigned LEB128 (compact lengths, tags) and zigzag varint/varlong
(record fields). Pure functions over bytes; the hot callers inline the one-byte case."""

from __future__ import annotations


class VarintError(ValueError):
    """A varint that is too long or runs past the end of the buffer."""


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 at ``pos`` -> (value, next position). At most 5 bytes (uint32)."""
    result = 0
    shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise VarintError("varint runs past the end of the buffer") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise VarintError("unsigned varint longer than 5 bytes")


def encode_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError("unsigned varint cannot be negative")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Zigzag varint (int32) -> (value, next position)."""
    raw, pos = _read_unsigned(buf, pos, 35)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Zigzag varlong (int64) -> (value, next position)."""
    raw, pos = _read_unsigned(buf, pos, 70)
    return (raw >> 1) ^ -(raw & 1), pos


def _read_unsigned(buf: bytes | memoryview, pos: int, max_shift: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise VarintError("varint runs past the end of the buffer") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= max_shift:
            raise VarintError("varint too long")


def encode_varint(value: int) -> bytes:
    """Zigzag varint/varlong (the encoding is the same; only the range differs)."""
    return encode_uvarint((value << 1) ^ (value >> 63)) if value >= -(1 << 63) else _too_big(value)


def _too_big(value: int) -> bytes:
    raise ValueError(f"{value} does not fit a varlong")
