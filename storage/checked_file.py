"""A small file beside a log whose content is checked when read: a four-byte kind, the CRC-32C
and length of the payload, the payload. Written to a temporary name, fsynced and renamed over
(``layout.write_atomically``), so a crash leaves the previous file or the new one, whole."""

from __future__ import annotations

import struct
from pathlib import Path

from crc32c import crc32c

from storage.layout import write_atomically

_HEAD = struct.Struct(">4sIQ")  # kind, CRC-32C of the payload, payload length


class CheckedFileError(ValueError):
    """A file that is not whole, not of the expected kind, or whose CRC does not match."""


def write_checked(path: Path, kind: bytes, payload: bytes) -> None:
    if len(kind) != 4:
        raise ValueError("a checked file's kind is four bytes")
    write_atomically(path, _HEAD.pack(kind, crc32c(payload), len(payload)) + payload)


def read_checked(path: Path, kind: bytes) -> bytes | None:
    """The payload, or None when the file does not exist; raises ``CheckedFileError``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(data) < _HEAD.size:
        raise CheckedFileError(f"{path.name}: {len(data)} bytes, shorter than its header")
    found, crc, length = _HEAD.unpack_from(data, 0)
    if found != kind:
        raise CheckedFileError(f"{path.name}: kind {found!r}, expected {kind!r}")
    payload = data[_HEAD.size :]
    if len(payload) != length:
        raise CheckedFileError(f"{path.name}: {len(payload)} payload bytes, expected {length}")
    if crc32c(payload) != crc:
        raise CheckedFileError(f"{path.name}: CRC-32C mismatch")
    return payload
