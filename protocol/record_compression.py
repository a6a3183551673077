"""The compression codecs of record batches (attributes bits 0-2).

gzip comes from the standard library; snappy, lz4 and zstd from ``cramjam``, imported only when a
batch needs it so that a broker that never sees compressed batches does not need it installed.
Snappy is written in the xerial block framing the Java client uses and read in either that
framing or raw; lz4 is the LZ4 frame format; zstd is a plain zstd frame.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from types import ModuleType

from protocol.errors import DecodeError
from protocol.record import CorruptBatchError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")


class CompressionUnavailableError(DecodeError):
    """A batch uses a codec whose library is not installed."""

    def __init__(self, codec: int) -> None:
        name = CODEC_NAMES.get(codec, str(codec))
        super().__init__(
            "record batch", 2, f"{name} batches need the 'cramjam' package (install the 'compression' extra)"
        )
        self.codec = codec


def library(codec: int) -> ModuleType:
    try:
        import cramjam
    except ImportError:
        raise CompressionUnavailableError(codec) from None
    return cramjam


def _corrupt(reason: str) -> DecodeError:
    return CorruptBatchError(reason, 0, "compression")


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    if codec == GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec == SNAPPY:
        snappy = library(codec).snappy
        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK])))
            out += _I32.pack(len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        return bytes(library(codec).lz4.compress(bytes(data)))
    if codec == ZSTD:
        return bytes(library(codec).zstd.compress(bytes(data)))
    if codec == NONE:
        return bytes(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Raises ``CorruptBatchError`` for bad data or an unknown codec and
    ``CompressionUnavailableError`` when cramjam is missing."""
    if codec == GZIP:
        try:
            return gzip.decompress(bytes(data))
        except (OSError, EOFError, zlib.error) as exc:
            raise _corrupt(f"bad gzip data: {exc}") from None
    if codec == SNAPPY:
        return _snappy_decompress(library(codec), bytes(data))
    if codec in (LZ4, ZSTD):
        lib = library(codec)
        module = lib.lz4 if codec == LZ4 else lib.zstd
        try:
            return bytes(module.decompress(bytes(data)))
        except lib.DecompressionError as exc:
            raise _corrupt(f"bad {CODEC_NAMES[codec]} data: {exc}") from None
    if codec == NONE:
        return bytes(data)
    raise _corrupt(f"unknown compression codec {codec}")


def _snappy_decompress(lib: ModuleType, data: bytes) -> bytes:
    try:
        if not data.startswith(_XERIAL_MAGIC):
            return bytes(lib.snappy.decompress_raw(data))
        # Some producers write the xerial version fields little-endian; only the magic matters.
        out = bytearray()
        pos = len(_XERIAL_HEADER)
        while pos < len(data):
            if pos + 4 > len(data):
                raise _corrupt("truncated snappy block length")
            (size,) = _I32.unpack_from(data, pos)
            pos += 4
            if size < 0 or pos + size > len(data):
                raise _corrupt(f"snappy block of {size} bytes does not fit")
            out += bytes(lib.snappy.decompress_raw(data[pos : pos + size]))
            pos += size
        return bytes(out)
    except lib.DecompressionError as exc:
        raise _corrupt(f"bad snappy data: {exc}") from None
