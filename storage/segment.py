"""One segment: ``<base>.log`` plus its ``.index`` and ``.timeindex``.

The log file only grows by whole batches. A segment holds a descriptor of its ``.log`` while it is
written (the active one, or one being recovered or cleaned); a rolled segment holds none and opens
its file for each read or sync (checking it is still the same file), so that a partition of any
number of segments needs a handful of descriptors, not one per segment (Kafka keeps one per
segment, and a broker with many small segments runs out of them). Index entries follow Kafka's rule, applied per batch:
when more than ``index.interval.bytes`` were written since the last entry, the next batch gets
an offset-index entry (its last offset -> its position) and the time index gets the largest
timestamp seen so far. Recovery replays the same rule, so rebuilt indexes equal written ones.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Generator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from protocol.record_batch import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    CorruptBatchError,
    RecordBatch,
    iter_batches,
)
from storage.config import LogConfig
from storage.index import OffsetIndex, TimeIndex
from storage.layout import DELETED, INDEX, LOG, TIME_INDEX, TXN_INDEX, remove_quietly, segment_path

INT32_MAX = 2**31 - 1
_SCAN_CHUNK = 1 << 16
_READ_CHUNK = 4 << 20

HeaderFields = tuple[Any, ...]  # HEADER.unpack_from: base, length, ple, magic, crc, attrs, lod, base ts, max ts, ...


class Segment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int, temp_suffix: str = "") -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.temp_suffix = temp_suffix
        self.created_ms = now_ms
        self.fd = -1  # held while the segment is written; -1 once rolled (``release_log``)
        self.inode = -1  # of its .log, checked when a rolled segment's file is opened again
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.rolling_timestamp: int | None = None  # max timestamp of the first batch
        self.bytes_since_index = 0
        self.active = False
        self.unsynced = False
        self.stats_known = True  # False for trusted segments until the tail is scanned
        self.offset_index = OffsetIndex(self.path(INDEX), base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(self.path(TIME_INDEX), base_offset, config.segment_index_bytes)

    def path(self, suffix: str) -> Path:
        return segment_path(self.directory, self.base_offset, suffix + self.temp_suffix)

    @property
    def name(self) -> str:
        return self.path(LOG).name

    def __repr__(self) -> str:
        return f"Segment({self.name}, size={self.size}, next={self.next_offset})"

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int, temp_suffix: str = "") -> Segment:
        """A new, empty segment. The ``.log`` is created exclusively: a segment that exists is never
        truncated (``FileExistsError``), whoever made it (on a shared volume, another node that owns
        the partition now). Index files left without their ``.log`` are stale and replaced."""
        seg = cls(directory, base_offset, config, now_ms, temp_suffix)
        seg.fd = os.open(seg.path(LOG), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        seg.inode = os.fstat(seg.fd).st_ino
        for suffix in (INDEX, TIME_INDEX, TXN_INDEX):
            remove_quietly(seg.path(suffix))
        seg.offset_index.open()
        seg.time_index.open()
        return seg

    def open_files(self) -> tuple[bool, bool]:
        """Open an existing segment. Returns whether each index file looked sane on its own."""
        self.fd = os.open(self.path(LOG), os.O_RDWR | os.O_APPEND)
        stat = os.fstat(self.fd)
        self.size, self.inode = stat.st_size, stat.st_ino
        return self.offset_index.open(), self.time_index.open()

    def release_log(self) -> None:
        """The segment is no longer written: close its .log's descriptor; each later read or sync
        opens the file for that moment (``reader``)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def hold_log(self) -> None:
        """The segment is written again (the last one recovered becomes the active one): hold a
        writable descriptor of its .log, the file it opened before."""
        if self.fd >= 0:
            return
        fd = os.open(self.path(LOG), os.O_RDWR | os.O_APPEND)
        if os.fstat(fd).st_ino != self.inode:
            os.close(fd)
            raise OSError(errno.ESTALE, f"{self.name} is no longer the file this segment opened")
        self.fd = fd

    def reader(self) -> int:
        """A descriptor of the .log of its own (the caller closes it): a duplicate of the held one,
        or the file opened again, which must be the file this segment opened (a rolled segment's
        file replaced by a compaction or removed since raises ``OSError``, ESTALE or ENOENT)."""
        if self.fd >= 0:
            return os.dup(self.fd)
        fd = os.open(self.path(LOG), os.O_RDONLY)
        if os.fstat(fd).st_ino != self.inode:
            os.close(fd)
            raise OSError(errno.ESTALE, f"{self.name} is no longer the file this segment opened")
        return fd

    @contextmanager
    def _log(self) -> Iterator[int]:
        """A descriptor of the .log for one use: the held one, or the file opened for it."""
        if self.fd >= 0:
            yield self.fd
            return
        fd = self.reader()
        try:
            yield fd
        finally:
            os.close(fd)

    def activate(self) -> None:
        self.offset_index.preallocate()
        self.time_index.preallocate()
        self.active = True

    def deactivate(self) -> None:
        """Roll: record the final time-index entry and trim the indexes to their entries."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, even_if_full=True)
        self.offset_index.trim()
        self.time_index.trim()
        # A rolled segment's indexes no longer change: they keep no descriptor (one for its .log
        # is all a segment holds then, as in Kafka, whose indexes are memory-mapped).
        self.offset_index.release()
        self.time_index.release()
        self.active = False
        self.release_log()

    def sync(self, with_indexes: bool, fd: int | None = None) -> None:
        """fdatasync the .log (through ``fd``, a descriptor of its own the caller took with
        ``reader``, when given: any descriptor of the file syncs its data) and, with
        ``with_indexes``, fsync the indexes: only for a rolled segment, whose indexes no longer
        change."""
        if fd is not None:
            os.fdatasync(fd)
        else:
            with self._log() as held:
                os.fdatasync(held)
        if with_indexes:
            self.offset_index.flush()
            self.time_index.flush()

    def close(self) -> None:
        if self.active:
            self.deactivate()
            self.offset_index.flush()
            self.time_index.flush()
        self.offset_index.close()
        self.time_index.close()
        self.release_log()

    def close_files(self) -> None:
        """Close without touching the files (the segment is being removed or replaced)."""
        self.offset_index.close()
        self.time_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def files(self) -> list[Path]:
        """Every file of the segment, the .log last (a .txnindex only exists if Kafka wrote one)."""
        return [self.path(s) for s in (INDEX, TIME_INDEX, TXN_INDEX, LOG)]

    def rename_to_deleted(self) -> list[Path]:
        """Kafka-style removal, step one: ``.deleted`` names (recovery deletes leftovers)."""
        out = []
        for p in self.files():
            if p.exists():
                target = p.with_name(p.name + DELETED)
                os.replace(p, target)
                out.append(target)
        return out

    def set_temp_suffix(self, suffix: str) -> None:
        """The files were renamed; open descriptors stay valid, only the names change."""
        self.temp_suffix = suffix
        self.offset_index.path = self.path(INDEX)
        self.time_index.path = self.path(TIME_INDEX)

    # ---- writing ---------------------------------------------------------------------------

    def should_roll(self, incoming_size: int, incoming_max_ts: int, last_offset: int, now_ms: int) -> bool:
        cfg = self.config
        if self.size > 0 and self.size > cfg.segment_bytes - incoming_size:
            return True
        if self.size > 0:
            if self.rolling_timestamp is not None and self.rolling_timestamp >= 0:
                waited = incoming_max_ts - self.rolling_timestamp
            else:
                waited = now_ms - self.created_ms
            if waited > cfg.segment_ms - cfg.segment_jitter_ms:
                return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > INT32_MAX

    def account(self, position: int, fields: HeaderFields) -> None:
        """Update the in-memory state and indexes for the batch written at ``position``."""
        last_offset = fields[0] + fields[6]
        max_ts = fields[8]
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = last_offset
        if self.rolling_timestamp is None:
            self.rolling_timestamp = max_ts
        if self.bytes_since_index > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index = 0
        self.bytes_since_index += fields[1] + LOG_OVERHEAD
        self.next_offset = last_offset + 1

    def append(self, raw: bytes | bytearray) -> None:
        """Write whole batches (already validated and numbered) at the end of the log."""
        position = self.size
        view = memoryview(raw)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(raw)
        self.unsynced = True
        for batch in iter_batches(raw, verify_crc=False):
            self.account(position + batch.position, batch)

    def truncate_to(self, position: int) -> None:
        """Cut the log at ``position`` (a batch boundary) and drop index entries past it."""
        os.ftruncate(self.fd, position)  # only a segment being written or recovered: it holds its file
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.unsynced = True

    # ---- reading ---------------------------------------------------------------------------

    def read(self, position: int, length: int, fd: int | None = None) -> bytes:
        if fd is None:
            with self._log() as own:
                return self.read(position, length, own)
        chunks = []
        while length > 0:
            chunk = os.pread(fd, min(length, 1 << 26), position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            length -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def scan_headers(self, start: int = 0, end: int | None = None) -> Generator[tuple[int, HeaderFields], None, None]:
        """``(position, header fields)`` of each batch from ``start``, reading only headers."""
        end = self.size if end is None else end
        pos = start
        while pos + HEADER_SIZE <= end:
            chunk = self.read(pos, min(_SCAN_CHUNK, end - pos))
            off = 0
            while off + HEADER_SIZE <= len(chunk):
                fields = HEADER.unpack_from(chunk, off)
                size = fields[1] + LOG_OVERHEAD
                if size < HEADER_SIZE:
                    return  # never written by us; recovery would have cut it
                yield pos + off, fields
                off += size
            if off == 0:
                return
            pos += off

    def batches(self, start: int = 0, fd: int | None = None) -> Iterator[tuple[int, RecordBatch]]:
        """``(position, batch)`` for every batch from ``start`` to the end, CRC-checked, read in
        chunks. A short or bad batch raises ``CorruptBatchError`` carrying its file position."""
        pos, size = start, self.size
        while pos < size:
            data = self.read(pos, min(_READ_CHUNK, size - pos), fd)
            end = 0
            try:
                for batch in iter_batches(data, allow_partial=True):
                    yield pos + batch.position, batch
                    end = batch.end
                if end == 0:  # the next batch is larger than a chunk, or cut short
                    whole = int.from_bytes(data[8:12], "big", signed=True) + LOG_OVERHEAD if len(data) >= 12 else 0
                    if len(data) < whole <= size - pos:
                        data = self.read(pos, whole, fd)
                    for batch in iter_batches(data):  # raises for a short tail
                        yield pos + batch.position, batch
                        end = batch.end
                        break
            except CorruptBatchError as exc:
                exc.position += pos
                raise
            pos += end

    def find(self, offset: int) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset >= ``offset``."""
        with closing(self.scan_headers(self.offset_index.lookup(offset))) as headers:
            for pos, fields in headers:
                if fields[0] + fields[6] >= offset:
                    return pos, fields[1] + LOG_OVERHEAD
        return None

    def ensure_stats(self) -> None:
        """Next offset and max timestamp of a segment loaded without a scan: scanning from the
        last index entry suffices, since the time index already covers what came before it."""
        if self.stats_known:
            return
        ts, ts_offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, ts_offset
        start = self.offset_index.last_entry()[1]
        for _pos, fields in self.scan_headers(start):
            self.next_offset = fields[0] + fields[6] + 1
            if fields[8] > self.max_timestamp:
                self.max_timestamp = fields[8]
                self.offset_of_max_timestamp = self.next_offset - 1
        self.stats_known = True
