"""The records region of a batch: ``Record`` and its varint encoding, in both directions.

Record (all lengths zigzag varints): length, attributes int8 (unused), timestampDelta varlong,
offsetDelta varint, key (length -1 = null), value (length -1 = null, a tombstone), header
count, then per header a UTF-8 key and a nullable value. The decoders inline the one-byte (and
for the record length, two-byte) varint case: nearly every field of a small record fits, and a
call per field would halve the throughput.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from protocol.errors import DecodeError


class CorruptBatchError(DecodeError):
    """Bytes that are not a valid record batch. ``position`` is where the bad batch starts;
    ``kind`` is one of: short, length, magic, crc, records, compression."""

    def __init__(self, reason: str, position: int = 0, kind: str = "records") -> None:
        super().__init__("record batch", 2, f"{reason} (at byte {position})")
        self.position = position
        self.kind = kind



class Record(NamedTuple):
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]



def _zz_slow(data: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint of two or more bytes (the one-byte case is inlined by the callers)."""
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptBatchError("varint longer than 10 bytes", 0, "records")



def decode_region(data: bytes, count: int) -> tuple[list[Record], int]:
    # Every varint is read with its one-byte case inline: almost all fields of small records
    # fit one byte, and a function call per field would halve the throughput.
    new = tuple.__new__
    cls = Record
    slow = _zz_slow
    out: list[Record] = []
    append = out.append
    pos = 0
    end = len(data)
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            u = (b & 0x7F) | (data[pos + 1] << 7)
            length = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            length, pos = slow(data, pos)
        rec_end = pos + length
        if length < 6 or rec_end > end:
            raise CorruptBatchError(f"record length {length} does not fit the batch")
        pos += 1  # attributes: unused
        b = data[pos]
        if b < 0x80:
            ts = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            u = (b & 0x7F) | (data[pos + 1] << 7)
            ts = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            ts, pos = slow(data, pos)
        b = data[pos]
        if b < 0x80:
            od = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            u = (b & 0x7F) | (data[pos + 1] << 7)
            od = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            od, pos = slow(data, pos)
        b = data[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n, pos = slow(data, pos)
        if n >= 0:
            key: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            key = None
        else:
            raise CorruptBatchError(f"key length {n}")
        b = data[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n, pos = slow(data, pos)
        if n >= 0:
            value: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            value = None
        else:
            raise CorruptBatchError(f"value length {n}")
        b = data[pos]
        if b == 0:
            headers: list[tuple[str, bytes | None]] = []
            pos += 1
        else:
            headers, pos = _decode_headers(data, pos)
        if pos != rec_end:
            raise CorruptBatchError(f"record body ends at {pos}, its length says {rec_end}")
        append(new(cls, (od, ts, key, value, headers)))
    return out, pos


def _decode_headers(data: bytes, pos: int) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = _zz_slow(data, pos)
    if count < 0:
        raise CorruptBatchError(f"header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        n, pos = _zz_slow(data, pos)
        if n < 0:
            raise CorruptBatchError(f"header key length {n}")
        hkey = data[pos : pos + n].decode()
        pos += n
        n, pos = _zz_slow(data, pos)
        if n >= 0:
            hval: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            hval = None
        else:
            raise CorruptBatchError(f"header value length {n}")
        headers.append((hkey, hval))
    return headers, pos


def decode_keys(data: bytes, count: int) -> tuple[list[tuple[int, bytes | None, bool]], int]:
    """``(offset delta, key, value is null)`` per record, skipping values and headers: what
    compaction needs to decide, at a fraction of the cost of full records."""
    slow = _zz_slow
    out: list[tuple[int, bytes | None, bool]] = []
    append = out.append
    pos = 0
    end = len(data)
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            u = (b & 0x7F) | (data[pos + 1] << 7)
            length = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            length, pos = slow(data, pos)
        rec_end = pos + length
        if length < 6 or rec_end > end:
            raise CorruptBatchError(f"record length {length} does not fit the batch")
        pos += 1
        while data[pos] >= 0x80:  # timestamp delta: skipped
            pos += 1
        pos += 1
        b = data[pos]
        if b < 0x80:
            od = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            u = (b & 0x7F) | (data[pos + 1] << 7)
            od = (u >> 1) ^ -(u & 1)
            pos += 2
        else:
            od, pos = slow(data, pos)
        b = data[pos]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            n, pos = slow(data, pos)
        if n >= 0:
            key: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            key = None
        else:
            raise CorruptBatchError(f"key length {n}")
        if pos >= rec_end:
            raise CorruptBatchError("record ends inside its key")
        append((od, key, data[pos] == 1))  # zigzag -1: a null value
        pos = rec_end
    return out, pos


_ZZ1 = [bytes((i,)) for i in range(128)]


def zigzag(value: int) -> bytes:
    """Zigzag varint/varlong bytes of ``value``."""
    u = (value << 1) ^ (value >> 63)
    if 0 <= u < 0x80:
        return _ZZ1[u]
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"{value} does not fit a varlong")
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _add_nullable(body: bytearray, data: bytes | None) -> None:
    """Length-prefixed bytes, or the length -1 (zigzag 0x01) for null."""
    if data is None:
        body += b"\x01"
    else:
        body += zigzag(len(data))
        body += data


def _record_start(timestamp_delta: int, offset_delta: int, key: bytes | None, value: bytes | None) -> bytearray:
    """A record's attributes, deltas, key and value: everything before its headers."""
    body = bytearray(b"\x00")
    body += zigzag(timestamp_delta)
    body += zigzag(offset_delta)
    _add_nullable(body, key)
    _add_nullable(body, value)
    return body


def encode_simple_records(entries: Sequence[tuple[bytes | None, bytes | None, int]]) -> tuple[bytes, int]:
    """The records region for ``(key, value, timestamp_ms)`` entries at offset deltas 0..n-1,
    without headers, timestamps relative to the first; and the largest timestamp. The same
    bytes as ``encode_records`` without building a ``Record`` per entry."""
    zz = zigzag
    out = bytearray()
    base_ts = max_ts = entries[0][2]
    for delta, (key, value, ts) in enumerate(entries):
        if ts > max_ts:
            max_ts = ts
        body = _record_start(ts - base_ts, delta, key, value)
        body += b"\x00"  # no headers
        out += zz(len(body))
        out += body
    return bytes(out), max_ts


def encode_records(records: Iterable[Record]) -> tuple[bytes, int]:
    """The uncompressed records region and the number of records."""
    zz = zigzag
    out = bytearray()
    count = 0
    for od, ts, key, value, headers in records:
        body = _record_start(ts, od, key, value)
        body += zz(len(headers))
        for hkey, hval in headers:
            kb = hkey.encode()
            body += zz(len(kb))
            body += kb
            _add_nullable(body, hval)
        out += zz(len(body))
        out += body
        count += 1
    return bytes(out), count
