"""The message sets of the formats before record batches: magic 0 (Kafka 0.8-0.9) and magic 1
(0.10, which added a timestamp). Fetch v0-3 and Produce v0-2 carry them.

A message set is a run of ``offset int64, size int32, message``; a message is ``crc uint32`` (CRC-32
of everything after it), ``magic int8``, ``attributes int8`` (bits 0-2 the codec, bit 3 the
timestamp type from magic 1), ``timestamp int64`` (magic 1 only), ``key bytes``, ``value bytes``.
A compressed message set is one wrapper message whose value is the compressed inner message set;
for magic 1 the inner offsets are relative (0, 1, ...) and the wrapper carries the absolute offset
of the last inner message, for magic 0 every offset is absolute. Codecs are those of record batches
except zstd (which these formats never had); lz4 uses Kafka's framing, with the header checksum
computed over the frame magic as well for magic 0 (the old Kafka bug its readers expect).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from protocol.record import CorruptBatchError
from protocol.record_compression import GZIP, LZ4, NONE, SNAPPY, compress, decompress, library

MAGIC0, MAGIC1 = 0, 1
CODEC_MASK = 0x07
LOG_APPEND_TIME_MASK = 0x08
NO_TIMESTAMP = -1
LEGACY_CODECS = (NONE, GZIP, SNAPPY, LZ4)

_ENTRY = struct.Struct(">qi")  # offset, size
_HEAD = struct.Struct(">IBb")  # crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
# Version 01, independent blocks, no checksums, no content size; 64 KiB blocks: Kafka's framing.
_LZ4_FLG, _LZ4_BD = 0x60, 0x40
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000


class LegacyMessage(NamedTuple):
    """One message of a (decompressed) message set, with its absolute offset."""

    offset: int
    magic: int
    timestamp: int  # NO_TIMESTAMP for magic 0
    log_append_time: bool
    key: bytes | None
    value: bytes | None


class Entry(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _bytes_field(data: bytes | None) -> bytes:
    return _I32.pack(-1) if data is None else _I32.pack(len(data)) + data


def encode_message(magic: int, offset: int, attributes: int, timestamp: int,
                   key: bytes | None, value: bytes | None) -> bytes:
    """One ``offset, size, message`` entry."""
    body = bytearray(struct.pack(">Bb", magic, attributes))
    if magic >= MAGIC1:
        body += _I64.pack(timestamp)
    body += _bytes_field(key)
    body += _bytes_field(value)
    crc = zlib.crc32(body) & 0xFFFFFFFF
    return _ENTRY.pack(offset, len(body) + 4) + struct.pack(">I", crc) + bytes(body)


def build_message_set(entries: Sequence[Entry], magic: int, codec: int = NONE,
                      log_append_time: int | None = None) -> bytes:
    """``entries`` (absolute offsets) as one message set; compressed, one wrapper message. With
    ``log_append_time`` (magic 1), the messages carry that time and the log-append-time flag."""
    if codec not in LEGACY_CODECS:
        raise ValueError(f"codec {codec} has no message format {magic}")
    ts_flag = LOG_APPEND_TIME_MASK if magic >= MAGIC1 and log_append_time is not None else 0
    if codec == NONE:
        out = bytearray()
        for e in entries:
            ts = log_append_time if ts_flag and log_append_time is not None else e.timestamp
            out += encode_message(magic, e.offset, ts_flag, ts if magic else NO_TIMESTAMP, e.key, e.value)
        return bytes(out)
    if not entries:
        return b""
    first = entries[0].offset
    inner = bytearray()
    for e in entries:
        inner += encode_message(magic, e.offset - first if magic >= MAGIC1 else e.offset, ts_flag,
                                e.timestamp if magic else NO_TIMESTAMP, e.key, e.value)
    if log_append_time is not None and ts_flag:
        wrapper_ts = log_append_time
    else:
        wrapper_ts = max((e.timestamp for e in entries), default=NO_TIMESTAMP)
    payload = _lz4_frame(bytes(inner), magic) if codec == LZ4 else compress(codec, inner)
    return encode_message(magic, entries[-1].offset, codec | ts_flag, wrapper_ts if magic else NO_TIMESTAMP,
                          None, payload)


def iter_messages(data: bytes, *, verify_crc: bool = True) -> Iterator[LegacyMessage]:
    """Every message of a message set, wrappers opened, with absolute offsets; a partial message
    at the end (as Fetch answers may carry) is ignored. Raises ``CorruptBatchError``."""
    for offset, magic, attributes, timestamp, key, value in _shallow(data, verify_crc):
        codec = attributes & CODEC_MASK
        append_time = bool(attributes & LOG_APPEND_TIME_MASK) and magic >= MAGIC1
        if codec == NONE:
            yield LegacyMessage(offset, magic, timestamp, append_time, key, value)
            continue
        if codec not in LEGACY_CODECS or value is None:
            raise CorruptBatchError(f"compressed message with codec {codec}", 0, "compression")
        inner_data = _lz4_unframe(value) if codec == LZ4 else decompress(codec, value)
        inner = list(_shallow(inner_data, verify_crc))
        if not inner:
            continue
        # magic 1: relative inner offsets, the wrapper's offset is the last one's.
        shift = offset - inner[-1][0] if magic >= MAGIC1 else 0
        for i_off, i_magic, _i_attr, i_ts, i_key, i_value in inner:
            ts = timestamp if append_time else i_ts
            yield LegacyMessage(i_off + shift, i_magic, ts, append_time, i_key, i_value)


def _shallow(data: bytes, verify_crc: bool) -> Iterator[tuple[int, int, int, int, bytes | None, bytes | None]]:
    pos, n = 0, len(data)
    while pos + _ENTRY.size <= n:
        offset, size = _ENTRY.unpack_from(data, pos)
        start = pos + _ENTRY.size
        end = start + size
        if size < _HEAD.size + 8:
            raise CorruptBatchError(f"message size {size} is below the minimum", pos, "length")
        if end > n:
            return
        crc, magic, attributes = _HEAD.unpack_from(data, start)
        if magic not in (MAGIC0, MAGIC1):
            raise CorruptBatchError(f"unsupported magic {magic}", pos, "magic")
        if verify_crc and zlib.crc32(memoryview(data)[start + 4 : end]) & 0xFFFFFFFF != crc:
            raise CorruptBatchError("CRC-32 mismatch", pos, "crc")
        p = start + _HEAD.size
        timestamp = NO_TIMESTAMP
        if magic == MAGIC1:
            (timestamp,) = _I64.unpack_from(data, p)
            p += 8
        key, p = _read_bytes(data, p, end)
        value, p = _read_bytes(data, p, end)
        yield offset, magic, attributes, timestamp, key, value
        pos = end


def _read_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptBatchError("message ends inside a length", pos, "records")
    (size,) = _I32.unpack_from(data, pos)
    pos += 4
    if size < 0:
        return None, pos
    if pos + size > end:
        raise CorruptBatchError(f"{size} bytes do not fit the message", pos, "records")
    return bytes(data[pos : pos + size]), pos + size


# ---- lz4 in Kafka's framing ---------------------------------------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (all a frame header checksum needs)."""
    assert len(data) < 16
    h = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        h = _rotl((h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32, 17) * _P4 & _M32
        pos += 4
    for b in data[pos:]:
        h = _rotl((h + b * _P5) & _M32, 11) * _P1 & _M32
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    return h ^ (h >> 16)


def lz4_header_checksum(magic: int) -> int:
    """Byte 6 of the frame. Kafka before 0.10 hashed the frame magic too; magic 0 readers check
    that value, magic 1 readers the standard one (over FLG and BD only)."""
    covered = (_LZ4_MAGIC if magic == MAGIC0 else b"") + bytes([_LZ4_FLG, _LZ4_BD])
    return (xxh32_short(covered) >> 8) & 0xFF


def _lz4_frame(data: bytes, magic: int) -> bytes:
    lz4 = library(LZ4).lz4
    out = bytearray(_LZ4_MAGIC + bytes([_LZ4_FLG, _LZ4_BD, lz4_header_checksum(magic)]))
    for start in range(0, len(data), _LZ4_BLOCK):
        block = data[start : start + _LZ4_BLOCK]
        packed = bytes(lz4.compress_block(block, store_size=False))
        if len(packed) >= len(block):
            out += struct.pack("<I", len(block) | _LZ4_UNCOMPRESSED) + block
        else:
            out += struct.pack("<I", len(packed)) + packed
    out += b"\x00\x00\x00\x00"  # end mark
    return bytes(out)


def _lz4_unframe(data: bytes) -> bytes:
    """Reads a frame whatever its header checksum (old producers wrote either); block and
    content checksums, when flagged, are skipped."""
    lz4 = library(LZ4).lz4
    if data[:4] != _LZ4_MAGIC or len(data) < 7:
        raise CorruptBatchError("not an lz4 frame", 0, "compression")
    flg, bd = data[4], data[5]
    max_block = 1 << (8 + 2 * ((bd >> 4) & 0x07))  # 4 -> 64 KiB ... 7 -> 4 MiB
    pos = 6 + (8 if flg & 0x08 else 0) + 1  # FLG, BD, optional content size, header checksum
    block_checksum = 4 if flg & 0x10 else 0
    out = bytearray()
    scratch = bytearray(max_block)
    try:
        while pos + 4 <= len(data):
            (size,) = struct.unpack_from("<I", data, pos)
            pos += 4
            if size == 0:
                break
            raw = size & ~_LZ4_UNCOMPRESSED
            block = data[pos : pos + raw]
            if len(block) < raw:
                raise CorruptBatchError("truncated lz4 block", 0, "compression")
            if size & _LZ4_UNCOMPRESSED:
                out += block
            else:
                n = lz4.decompress_block_into(block, scratch)
                out += scratch[:n]
            pos += raw + block_checksum
    except library(LZ4).DecompressionError as exc:
        raise CorruptBatchError(f"bad lz4 data: {exc}", 0, "compression") from None
    return bytes(out)

