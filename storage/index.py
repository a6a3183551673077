"""The sparse ``.index`` (offset -> file position) and ``.timeindex`` (timestamp -> offset) files.

Entries are kept in memory as two parallel arrays for bisecting, and written through to the file
with positional writes. While a segment is active its index files are preallocated to
``segment.index.bytes`` (zero-filled, as Kafka leaves them); when it rolls or closes they are
trimmed to their entries. Index files have no checksum: recovery validates them against the log
and rebuilds them when they disagree.
"""

from __future__ import annotations

import bisect
import errno
import os
import struct
from array import array
from pathlib import Path


class _Index:
    ENTRY: struct.Struct
    KEY_TYPE: str
    VALUE_TYPE: str

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.ENTRY.size)
        self.keys: array[int] = array(self.KEY_TYPE)
        self.values: array[int] = array(self.VALUE_TYPE)
        self.fd = -1
        # False once the segment rolled (``release``): the entries live in memory and the file no
        # longer changes, so it holds no descriptor (a partition of many segments would otherwise
        # hold three per segment); the rare change or sync after that opens it for the moment.
        self.held = True
        self.closed = False
        self.preallocated = False
        self.dirty = False
        self.write_through = True  # off while recovery recomputes entries to compare

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def open(self) -> bool:
        """Open (creating if missing) and load the valid prefix of entries. Returns False when
        bytes after that prefix are not the zero fill of preallocation, i.e. the file is corrupt."""
        existed = self.path.exists()
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not existed:
            return True
        # After a crash the file still has its preallocated length (10 MB by default), a hole
        # made by ftruncate: only the part written is read, and what follows it is checked to
        # be the hole. Reading and scanning the whole file took ~90 ms per partition, seconds
        # for a broker's 50 offsets partitions.
        file_size = os.fstat(self.fd).st_size
        written = _end_of_data(self.fd, file_size)
        data = _read_all(self.fd, written)
        size = self.ENTRY.size
        count = 0
        prev: tuple[int, int] | None = None
        for key, value in self.ENTRY.iter_unpack(data[: len(data) - len(data) % size]):
            if not self._follows(prev, key, value):
                break
            self.keys.append(key)
            self.values.append(value)
            prev = (key, value)
            count += 1
        start = count * size
        if data.count(0, start) != len(data) - start:
            return False
        if written < file_size and _has_data_after(self.fd, written):
            rest = _read_all(self.fd, file_size)  # written pages after a hole: look at all of them
            return rest.count(0, start) == len(rest) - start
        return True

    def _follows(self, prev: tuple[int, int] | None, key: int, value: int) -> bool:
        raise NotImplementedError

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.keys, self.values))

    def _append(self, key: int, value: int) -> None:
        at = len(self.keys) * self.ENTRY.size
        self.keys.append(key)
        self.values.append(value)
        if self.write_through:
            os.pwrite(self._file(), self.ENTRY.pack(key, value), at)
            self.dirty = True
            self._done()

    def set_entries(self, entries: list[tuple[int, int]]) -> None:
        """Replace the in-memory entries only (they already match the file)."""
        self.keys = array(self.KEY_TYPE, [k for k, _ in entries])
        self.values = array(self.VALUE_TYPE, [v for _, v in entries])

    def forget(self) -> list[tuple[int, int]]:
        """Empty the in-memory entries (not the file) and return what they were."""
        old = self.entries()
        self.keys = array(self.KEY_TYPE)
        self.values = array(self.VALUE_TYPE)
        return old

    def replace_all(self, entries: list[tuple[int, int]]) -> None:
        """Rewrite the file with ``entries`` (a rebuild)."""
        self.set_entries(entries)
        fd = self._file()
        os.ftruncate(fd, 0)
        data = b"".join(self.ENTRY.pack(k, v) for k, v in entries)
        if data:
            os.pwrite(fd, data, 0)
        if self.preallocated:
            self.preallocate()
        self.dirty = True
        self._done()

    def truncate_entries(self, count: int) -> None:
        del self.keys[count:]
        del self.values[count:]
        os.ftruncate(self._file(), count * self.ENTRY.size)
        if self.preallocated:
            self.preallocate()
        self.dirty = True
        self._done()

    def preallocate(self) -> None:
        self.held = True  # an active segment's index: appended to all the time
        os.ftruncate(self._file(), self.max_entries * self.ENTRY.size)
        self.preallocated = True

    def trim(self) -> None:
        os.ftruncate(self._file(), len(self.keys) * self.ENTRY.size)
        self.preallocated = False
        self.dirty = True
        self._done()

    def flush(self) -> None:
        if self.dirty and not self.closed and (self.fd >= 0 or not self.held):
            self.dirty = False
            try:
                os.fsync(self._file())
            except BaseException:
                self.dirty = True
                raise
            finally:
                self._done()

    def release(self) -> None:
        """The index no longer changes (its segment rolled): close its descriptor. Its entries stay
        in memory; a later change or sync (recovery, compaction, the flush that makes the roll
        durable) opens the file for that moment."""
        self.held = False
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _file(self) -> int:
        if self.closed:
            raise OSError(errno.EBADF, f"{self.path.name} is closed")
        if self.fd < 0:
            self.fd = os.open(self.path, os.O_RDWR)
        return self.fd

    def _done(self) -> None:
        if not self.held and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def close(self) -> None:
        self.closed = True  # nothing opens it again
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class OffsetIndex(_Index):
    """8-byte entries: int32 offset relative to the segment base, int32 position in the .log."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPE = "i"
    VALUE_TYPE = "i"

    def _follows(self, prev: tuple[int, int] | None, key: int, value: int) -> bool:
        # The first entry is made after index.interval.bytes, so no entry has position 0:
        # an all-zero entry is the preallocated fill.
        if prev is None:
            return value > 0 and key >= 0
        return key > prev[0] and value > prev[1]

    def append(self, offset: int, position: int) -> None:
        self._append(offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """File position to start scanning from for ``offset`` (0 when before every entry)."""
        i = bisect.bisect_right(self.keys, offset - self.base_offset)
        return self.values[i - 1] if i else 0

    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base, 0)."""
        if not self.keys:
            return self.base_offset, 0
        return self.base_offset + self.keys[-1], self.values[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries that point at or past ``position`` (the log was truncated there)."""
        self.truncate_entries(bisect.bisect_left(self.values, position))


class TimeIndex(_Index):
    """12-byte entries: int64 timestamp, int32 relative offset; timestamps strictly increase."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPE = "q"
    VALUE_TYPE = "i"

    def _follows(self, prev: tuple[int, int] | None, key: int, value: int) -> bool:
        if prev is None:
            return (key, value) != (0, 0) and value >= 0
        return key > prev[0] and value >= prev[1]

    def maybe_append(self, timestamp: int, offset: int, *, even_if_full: bool = False) -> None:
        """Kafka's rule: only a strictly larger timestamp makes a new entry."""
        if timestamp < 0 or (self.keys and timestamp <= self.keys[-1]):
            return
        if self.is_full and not even_if_full:
            return
        if self.values and offset - self.base_offset < self.values[-1]:
            return
        self._append(timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> int:
        """Offset of the last entry with timestamp <= ``timestamp`` (the base offset if none):
        scanning from there finds the first record at or after ``timestamp``."""
        i = bisect.bisect_right(self.keys, timestamp)
        return self.base_offset + (self.values[i - 1] if i else 0)

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base)."""
        if not self.keys:
            return -1, self.base_offset
        return self.keys[-1], self.base_offset + self.values[-1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets at or past ``offset``."""
        self.truncate_entries(bisect.bisect_left(self.values, offset - self.base_offset))


def _end_of_data(fd: int, size: int) -> int:
    """Where the file's first hole starts (its size when it has none, or when the file system
    cannot say)."""
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), size)
    except OSError:
        return size


def _has_data_after(fd: int, offset: int) -> bool:
    try:
        os.lseek(fd, offset, os.SEEK_DATA)
    except OSError:
        return False  # ENXIO: nothing but a hole up to the end
    return True


def _read_all(fd: int, size: int | None = None) -> bytes:
    """The file's first ``size`` bytes (all of it by default)."""
    if size is None:
        size = os.fstat(fd).st_size
    chunks = []
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(size - pos, 1 << 24), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)
