"""The ``.txnindex`` file of a segment: the transactions aborted by an ABORT marker in that
segment, in Kafka's layout, so that the directory is what a Kafka broker would have written.

Each entry is 34 bytes, big-endian: version (int16, 0), producer id (int64), the transaction's
first offset on the partition (int64), its last offset, i.e. the ABORT marker's (int64), and the
partition's last stable offset right after the marker (int64: the first offset of the oldest other
transaction still open then, or the marker's offset + 1). Entries are in marker order; a segment
with no aborted transaction has no file.

The file is written after the fact: an entry is appended once its marker is in the log, and a
partition opened from disk compares every segment's file with what its log says and rewrites the
ones that differ (missing, torn, or left over from a truncated tail). So the file never decides
anything: the log does.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from storage.layout import fsync_dir, remove_quietly

ENTRY = struct.Struct(">hqqqq")
VERSION = 0


class AbortedTxn(NamedTuple):
    """A transaction aborted on a partition."""

    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def encode(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(ENTRY.pack(VERSION, *e) for e in entries)


def decode(data: bytes) -> list[AbortedTxn] | None:
    """The entries of a file's bytes; None if they are not a whole number of version-0 entries."""
    if len(data) % ENTRY.size:
        return None
    out = []
    for fields in ENTRY.iter_unpack(data):
        if fields[0] != VERSION:
            return None
        out.append(AbortedTxn(*fields[1:]))
    return out


def read(path: Path) -> list[AbortedTxn] | None:
    """A file's entries ([] when there is no file; None when it is damaged)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return decode(data)


def append(path: Path, entry: AbortedTxn) -> None:
    """Adds ``entry`` at the end of the file (created if need be) and syncs it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, encode([entry]))
        os.fdatasync(fd)
    finally:
        os.close(fd)


def rewrite(path: Path, entries: list[AbortedTxn]) -> None:
    """Replaces the file with ``entries`` (removes it when there are none), durably."""
    if not entries:
        if path.exists():
            remove_quietly(path)
            fsync_dir(path.parent)
        return
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, encode(entries))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    fsync_dir(path.parent)
