"""One partition's log: an ordered list of segments, the last one active.

Appends, reads and the segment list are guarded by one lock. ``flush`` runs in a worker thread:
it takes the lock only to note what needs syncing and fsyncs outside it, so appends continue
while the disk works. Segment removal (retention, compaction swaps, close) also takes a flush
lock so that no descriptor is closed under a running fsync. Readers copy a descriptor with
``dup`` while holding the lock and read outside it, for the same reason.

On a shared volume (a cluster) the log carries its owner's ``fence``: every change of a file
(append, roll, epoch start, flush reported as a success, segment deletion, compaction swap,
transaction-index writes, index trimming at close) checks it under the lock, right before the
change, and a log whose fence has fallen is closed without touching its files.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from protocol.record_batch import (
    HEADER,
    LOG_OVERHEAD,
    CorruptBatchError,
    RecordBatch,
    build_simple_batch,
    decode_keys,
    decode_records,
    iter_batches,
    rewrite_header,
)
from storage import txn_index
from storage.config import LogConfig
from storage.errors import FencedError, LogClosedError, OffsetOutOfRangeError
from storage.fencing import Fence
from storage.layout import TXN_INDEX, fsync_dir, remove_quietly
from storage.leader_epochs import LeaderEpochCache
from storage.log_coverage import LogCoverage
from storage.recovery import RecoveryReport, recover
from storage.segment import Segment
from storage.txn_index import AbortedTxn

Clock = Callable[[], int]
_READ_CHUNK = 4 << 20


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    def __init__(
        self, directory: Path, config: LogConfig, segments: list[Segment], log_start_offset: int,
        recovery_point: int, clock: Clock, fence: Fence | None = None, report: RecoveryReport | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self.clock = clock
        # Cluster mode: the owner's right to change the files (None: a single broker's log).
        self.fence = fence
        self.epochs = LeaderEpochCache.load(directory, self.check_fence)
        if report is not None:
            self.epochs.rebuild(report.scanned_from, report.scanned_epochs)
        self.epochs.truncate_from_end(segments[-1].next_offset)
        self.leader_epoch = self.epochs.latest_epoch or 0  # stamped into every appended batch
        self.cleaner_checkpoint = log_start_offset  # first offset the cleaner has not seen
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start = log_start_offset
        self._recovery_point = recovery_point
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._dir_dirty = False
        self._closed = False

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig,
        *,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        clock: Clock = wall_clock_ms,
        fence: Fence | None = None,
    ) -> tuple[PartitionLog, RecoveryReport]:
        """Open (creating if needed) the log in ``directory``. Without ``recovery_point`` every
        segment is verified; with one, segments wholly below it are trusted.

        With a ``fence`` (a cluster node's claim) every change opening makes (the directory, a
        repair, an index rebuilt, the first segment, the epoch checkpoint) is checked against it
        right before it is made: an opening whose claim ends midway (the node stopped, its lease
        lapsed, another node took over and writes) raises ``FencedError`` without touching the
        files the new owner is writing."""
        path = Path(directory)
        if fence is not None:
            fence.check()
        path.mkdir(parents=True, exist_ok=True)
        now = clock()
        segments, report = recover(path, config, now, recovery_point, fence)
        start = max(log_start_offset or 0, segments[0].base_offset if segments else 0)
        if not segments:
            if fence is not None:
                fence.check()
            seg = Segment.create(path, start, config, now)
            seg.activate()
            segments = [seg]
            fsync_dir(path)
        end = segments[-1].next_offset
        try:
            log = cls(path, config, segments, min(start, end), min(recovery_point or 0, end), clock, fence, report)
        except BaseException:
            for seg in segments:
                seg.close_files()
            raise
        report.log_start_offset = log.log_start_offset
        report.log_end_offset = log.end_offset
        report.segments = len(segments)
        return log, report

    # ---- properties ------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def end_offset(self) -> int:
        """The next offset to be assigned (Kafka's log end offset)."""
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def recovery_point(self) -> int:
        """Everything below this offset has been fsynced."""
        return self._recovery_point

    @property
    def active_segment(self) -> Segment:
        return self._segments[-1]

    def segments(self) -> list[Segment]:
        """A snapshot of the segment list, oldest first, with every segment's next offset and
        max timestamp known."""
        with self._lock:
            for seg in self._segments:
                seg.ensure_stats()
            return list(self._segments)

    def open_readers(self, segments: Sequence[Segment]) -> list[int] | None:
        """Private descriptors (``dup``) for reading ``segments`` without the lock, or None if
        any of them has left the log. The caller closes them."""
        with self._lock:
            if self._closed or any(all(s is not t for t in self._segments) for s in segments):
                return None
            fds: list[int] = []
            try:
                for s in segments:
                    fds.append(s.reader())
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
            return fds

    # ---- writing ---------------------------------------------------------------------------

    def append(
        self, records: Sequence[tuple[bytes | None, bytes | None, int]], *, compression: int = 0
    ) -> tuple[int, int]:
        """Append ``(key, value, timestamp_ms)`` records as one batch; returns (first, last)
        offset. Not durable until ``flush``."""
        with self._lock:
            self._check_open()
            base = self.end_offset
            raw = build_simple_batch(records, base, partition_leader_epoch=self.leader_epoch, compression=compression)
            self._write(raw)
            self.epochs.assign(self.leader_epoch, base)
            return base, base + len(records) - 1

    def append_batch(self, raw: bytes | bytearray | memoryview) -> tuple[int, int]:
        """Append produced batch(es) as received, renumbered from the log end (the CRC does not
        cover the base offset or leader epoch, so it stays valid). Raises ``CorruptBatchError``
        for anything that is not whole valid batches."""
        batches = list(iter_batches(raw))
        if not batches:
            raise ValueError("no batches to append")
        for b in batches:
            # Walk every record (decompressing if needed) without building values: the framing and
            # Kafka's produce rule that record offsets run 0..n-1 are what must hold.
            deltas = [d for d, _key, _null in decode_keys(b)]
            if deltas != list(range(b.records_count)) or b.last_offset_delta != b.records_count - 1:
                raise CorruptBatchError("record offsets are not 0..n-1 within the batch", b.position, "records")
        with self._lock:
            self._check_open()
            base = self.end_offset
            out = rewrite_header(raw, base, self.leader_epoch)
            self._write(out)
            self.epochs.assign(self.leader_epoch, base)
            return base, self.end_offset - 1

    def _write(self, raw: bytes | bytearray) -> None:
        self.check_fence()
        fields = HEADER.unpack_from(raw, 0)
        last = self.end_offset - 1
        max_ts = -1
        for b in iter_batches(raw, verify_crc=False):
            last = b.last_offset
            max_ts = max(max_ts, b.max_timestamp)
        active = self._segments[-1]
        if active.should_roll(len(raw), max_ts, last, self.clock()):
            active = self._roll(fields[0])
        active.append(raw)

    def _roll(self, base_offset: int) -> Segment:
        old = self._segments[-1]
        if old.size == 0:
            return old
        self.check_fence()
        old.deactivate()
        old.unsynced = True  # the next flush syncs its trimmed indexes too
        seg = Segment.create(self.directory, base_offset, self.config, self.clock())
        seg.activate()
        self._segments.append(seg)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return seg

    def begin_epoch(self, epoch: int) -> int:
        """Become the writer of this log at ``epoch`` (a new owner in a cluster): later batches carry
        it, the leader-epoch checkpoint records where it starts, and writing goes on in a new
        segment file. The replaced owner may still hold the old active segment open; whatever it
        appends there lies beyond the next segment's base offset, where recovery cuts it (and an
        empty old segment is unlinked and created anew, so its writes land in a file nobody
        reads). Returns the epoch in force: above every epoch the log has seen."""
        with self._lock:
            self._check_open()
            self.check_fence()
            latest = self.epochs.latest_epoch
            if latest is not None and epoch <= latest:
                epoch = latest + 1
            end = self.end_offset
            old = self._segments[-1]
            if old.size == 0:
                old.close_files()
                for path in old.files():
                    remove_quietly(path)
                seg = Segment.create(self.directory, end, self.config, self.clock())
                seg.activate()
                self._segments[-1] = seg
                self._dir_dirty = True
            else:
                self._roll(end)
            self.leader_epoch = epoch
            self.epochs.assign(epoch, end)
            return epoch

    def reconfigure(self, config: LogConfig) -> None:
        """A topic's configs changed (AlterConfigs): retention and compaction read ``config`` from
        their next pass, the active segment rolls by it from its next append. Segments already
        rolled keep the index sizes they were created with."""
        with self._lock:
            self.config = config
            if self._segments:
                self._segments[-1].config = config

    def roll(self) -> None:
        """Start a new segment now (if the active one has data)."""
        with self._lock:
            self._check_open()
            self._roll(self.end_offset)

    def flush(self) -> int:
        """Make every append that returned before this call durable; returns the new recovery
        point. Safe to call from a worker thread while appends continue."""
        with self._flush_lock:
            with self._lock:
                if self._closed:  # a flush racing close has nothing left to do
                    return self._recovery_point
                end, todo, dir_dirty = self._take_unsynced()

                def undo() -> None:  # a failed flush leaves everything to the next one
                    self._give_back(todo, dir_dirty)

                # Each .log is synced through a descriptor of its own, taken now, and a segment's
                # indexes only if it had rolled by now: an append may roll the active segment
                # while this flush runs, closing the descriptors it held (one synced after its
                # close fails, or syncs whatever file took its number).
                work: list[tuple[Segment, int | None, bool]] = []
                try:
                    for s in todo:
                        work.append((s, s.reader(), not s.active))
                except OSError as exc:
                    self._close_readers(work)
                    if exc.errno not in (errno.EMFILE, errno.ENFILE):
                        undo()
                        raise
                    # No descriptor left to take (the process is at its open-files limit, say a
                    # broker holding as many connections as its limit allows): each segment is
                    # synced through its own, under the lock, so that no append rolls one and
                    # closes it meanwhile; appends wait for the fdatasync. A rolled segment whose
                    # file must be opened again, or a directory to sync, still fails as before.
                    self._sync([(s, None, not s.active) for s in todo], dir_dirty, undo)
                    return self._flushed(end)
                except BaseException:
                    undo()
                    self._close_readers(work)
                    raise
            try:
                self._sync(work, dir_dirty, undo)
            finally:
                self._close_readers(work)
            with self._lock:
                return self._flushed(end)

    def claim_flush(self) -> FlushClaim | None:
        """The first half of a flush whose syncing the caller does for many logs at once (one
        syncfs of their filesystem, ``storage.filesystem_sync``): what this flush must make durable
        is taken as ``flush`` takes it, and the flush lock is held, as ``flush`` holds it across its
        fdatasyncs, until the claim's ``done`` or ``undo``. None when the log is closed (nothing
        left to flush); ``FencedError`` when this process no longer owns it."""
        self._flush_lock.acquire()
        try:
            with self._lock:
                if self._closed:
                    self._flush_lock.release()
                    return None
                self.check_fence()
                end, todo, dir_dirty = self._take_unsynced()
        except BaseException:
            self._flush_lock.release()
            raise
        return FlushClaim(self, end, todo, dir_dirty)

    def _take_unsynced(self) -> tuple[int, list[Segment], bool]:
        """Under the lock, as a flush begins: the end it will vouch for, the segments it syncs (the
        active one and any rolled since the last flush) and whether the directory changed, all
        marked synced; ``_give_back`` if the flush fails."""
        end = self.end_offset
        active = self._segments[-1]
        todo = [s for s in self._segments if s.unsynced or s is active]
        for s in todo:
            s.unsynced = False
        dir_dirty, self._dir_dirty = self._dir_dirty, False
        return end, todo, dir_dirty

    def _give_back(self, todo: list[Segment], dir_dirty: bool) -> None:
        """A failed flush leaves what it took to the next one."""
        for s in todo:
            s.unsynced = True
        self._dir_dirty = self._dir_dirty or dir_dirty

    @staticmethod
    def _close_readers(work: list[tuple[Segment, int | None, bool]]) -> None:
        for _s, fd, _i in work:
            if fd is not None:
                os.close(fd)

    def _sync(self, work: list[tuple[Segment, int | None, bool]], dir_dirty: bool, undo: Callable[[], None]) -> None:
        """fdatasync each segment's .log (through ``fd``, or its own descriptor when None), and its
        indexes when ``with_indexes``, then the directory if it changed; ``undo`` on failure."""
        try:
            self.check_fence()
            for s, fd, with_indexes in work:
                s.sync(with_indexes, fd)
            if dir_dirty:
                fsync_dir(self.directory)
        except BaseException:
            undo()
            raise

    def _flushed(self, end: int) -> int:
        """Under the lock, once synced: the new recovery point. A flush is a success only for an
        owner: the bytes may be on the disk, but a node that lost the partition meanwhile must not
        report them durable (or acknowledge)."""
        self.check_fence()
        self._recovery_point = max(self._recovery_point, end)
        return self._recovery_point

    # ---- reading ---------------------------------------------------------------------------

    def _locate(self, offset: int) -> tuple[Segment, int, int] | None:
        """(segment, position, size) of the first batch whose last offset >= ``offset``."""
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            found = seg.find(offset)
            if found:
                return seg, found[0], found[1]
        return None

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing ``offset``: at least one batch even if it is
        larger than ``max_bytes`` (as Kafka does for the first partition of a fetch)."""
        with self._lock:
            self._check_open()
            if offset < self._log_start or offset > self.end_offset:
                raise OffsetOutOfRangeError(offset, self._log_start, self.end_offset)
            where = self._locate(offset)
            if where is None:
                return b""
            seg, pos, first = where
            limit = seg.size
            fd = seg.reader()
        try:
            data = seg.read(pos, min(limit - pos, max(first, max_bytes)), fd)
        finally:
            os.close(fd)
        cut = first
        while cut + LOG_OVERHEAD <= len(data):
            size = int.from_bytes(data[cut + 8 : cut + 12], "big", signed=True) + LOG_OVERHEAD
            if cut + size > len(data):
                break
            cut += size
        return data[:cut]

    def batches(self, from_offset: int = 0) -> Iterator[RecordBatch]:
        """Every batch from the one containing ``from_offset`` to the current end, CRC-checked
        (the first may hold records before ``from_offset``). Appends may continue meanwhile."""
        next_offset = from_offset
        while True:
            with self._lock:
                self._check_open()
                next_offset = max(next_offset, self._log_start)
                if next_offset >= self.end_offset:
                    return
                where = self._locate(next_offset)
                if where is None:
                    return
                seg, pos, first = where
                limit = seg.size
                fd = seg.reader()
            try:
                data = seg.read(pos, min(limit - pos, max(first, _READ_CHUNK)), fd)
            finally:
                os.close(fd)
            last = None
            for batch in iter_batches(data, allow_partial=True):
                last = batch
                yield batch
            if last is None:
                return
            next_offset = last.next_offset

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` (ListOffsets)."""
        self._check_open()
        for seg in self.segments():
            if seg.max_timestamp < timestamp:
                continue
            start = max(seg.time_index.lookup(timestamp), self._log_start)
            for batch in self.batches(start):
                if batch.max_timestamp < timestamp:
                    continue
                for r in decode_records(batch):
                    offset = batch.base_offset + r.offset_delta
                    ts = batch.max_timestamp if batch.log_append_time else batch.base_timestamp + r.timestamp_delta
                    if offset >= start and ts >= timestamp:
                        return offset, ts
            return None
        return None

    # ---- what a derived file covers -------------------------------------------------------

    def coverage(self, end_offset: int) -> LogCoverage | None:
        """The coverage of the log below ``end_offset`` (see ``storage.log_coverage``), or None
        when no batch ends at ``end_offset - 1`` or the log holds nothing below it."""
        with self._lock:
            self._check_open()
            if end_offset <= self._log_start or end_offset > self.end_offset:
                return None
            where = self._locate(end_offset - 1)
            if where is None:
                return None
            seg, position, size = where
            fields = HEADER.unpack(seg.read(position, HEADER.size))
            if fields[0] + fields[6] + 1 != end_offset:
                return None
            covered = [(s.base_offset, s.size, s.inode) for s in self._segments if s.base_offset < seg.base_offset]
            covered.append((seg.base_offset, position + size, seg.inode))
            return LogCoverage(self._log_start, end_offset, tuple(covered), position, fields[4])

    def covers(self, coverage: LogCoverage) -> bool:
        """Whether the log still holds below ``coverage.end_offset`` the bytes it held when
        ``coverage`` was taken (same log start, same segments and sizes, same last batch)."""
        with self._lock:
            if self._closed or self._log_start != coverage.log_start_offset:
                return False
            count = len(coverage.segments)
            if len(self._segments) < count:
                return False
            for (base, size, inode), seg in zip(coverage.segments[:-1], self._segments):
                if seg.base_offset != base or seg.size != size or seg.inode != inode:
                    return False
            last = self._segments[count - 1]
            base, size, inode = coverage.segments[-1]
            position = coverage.last_batch_position
            if (last.base_offset != base or last.size < size or last.inode != inode
                    or not 0 <= position <= size - HEADER.size):
                return False
            fd = last.reader()
        try:
            head = last.read(position, HEADER.size, fd)
        finally:
            os.close(fd)
        if len(head) < HEADER.size:
            return False
        fields = HEADER.unpack(head)
        return (fields[4] == coverage.last_batch_crc and fields[0] + fields[6] + 1 == coverage.end_offset
                and position + fields[1] + LOG_OVERHEAD == size)

    # ---- removing data ---------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Move the log start to ``offset`` (DeleteRecords) and drop segments wholly below it.
        Returns the new log start offset."""
        with self._lock:
            if offset > self.end_offset:
                raise OffsetOutOfRangeError(offset, self._log_start, self.end_offset)
            self._log_start = max(self._log_start, offset)
            self.cleaner_checkpoint = max(self.cleaner_checkpoint, self._log_start)
            count = bisect.bisect_right(self._bases, self._log_start) - 1
            first = self._bases[0]
        if count > 0:
            self.delete_oldest_segments(count, first)
        return self._log_start

    def delete_oldest_segments(self, count: int, first_base: int | None = None) -> list[int]:
        """Remove the ``count`` oldest segments Kafka-style (rename to .deleted, then unlink);
        rolls first if that includes the active segment. Returns their base offsets. With
        ``first_base`` (the oldest segment's base offset when ``count`` was reckoned) nothing is
        removed if the oldest segment has changed since (retention and DeleteRecords each count
        from the segments they saw: counted again, the count would reach newer segments)."""
        with self._flush_lock, self._lock:
            self._check_open()
            if count <= 0 or (first_base is not None and self._bases[0] != first_base):
                return []
            self.check_fence()
            if count >= len(self._segments):
                if self._segments[-1].size == 0:
                    count = len(self._segments) - 1
                else:
                    self._roll(self.end_offset)
            gone = self._segments[:count]
            del self._segments[:count]
            del self._bases[:count]
            self._log_start = max(self._log_start, self._segments[0].base_offset)
            self.cleaner_checkpoint = max(self.cleaner_checkpoint, self._log_start)
            renamed: list[Path] = []
            for seg in gone:
                seg.close_files()
                renamed += seg.rename_to_deleted()
            self._dir_dirty = True
        if not self.fenced:  # else the next owner's recovery removes the .deleted files
            for path in renamed:
                remove_quietly(path)
        return [s.base_offset for s in gone]

    def replace_segments(self, old: list[Segment], new: Segment, steps: Sequence[Callable[[], None]]) -> bool:
        """Swap ``old`` (consecutive closed segments) for ``new`` by running the file ``steps``
        under the lock. Returns False, doing nothing, if ``old`` is no longer in the log."""
        with self._flush_lock, self._lock:
            self._check_open()
            try:
                i = next(k for k, s in enumerate(self._segments) if s is old[0])
            except StopIteration:
                return False
            if self._segments[i : i + len(old)] != old or i + len(old) >= len(self._segments):
                return False
            for step in steps:
                self.check_fence()  # a swap cut short is what recovery finishes or rolls back
                step()
            for seg in old:
                seg.close_files()
            self._segments[i : i + len(old)] = [new]
            self._bases = [s.base_offset for s in self._segments]
            self._dir_dirty = True
            return True

    # ---- the transaction index ---------------------------------------------------------------

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        """Note in the ``.txnindex`` of the segment holding its ABORT marker a transaction aborted
        by a marker already in the log. Not synced: a crash may lose the entry, and the next open
        (``reconcile_txn_index``) writes it again from the log."""
        with self._lock:
            self._check_open()
            self.check_fence()
            if txn.last_offset < self._log_start or txn.last_offset >= self.end_offset:
                return
            seg = self._segments[bisect.bisect_right(self._bases, txn.last_offset) - 1]
            txn_index.append(seg.path(TXN_INDEX), txn)

    def reconcile_txn_index(self, aborted: Sequence[AbortedTxn]) -> int:
        """Make every segment's ``.txnindex`` hold exactly the transactions of ``aborted`` (all
        of the partition's, in marker order, as its log shows them) whose marker it holds.
        Returns how many files were rewritten."""
        with self._lock:
            self._check_open()
            segments = list(self._segments)
            bases = list(self._bases)
        wanted: dict[int, list[AbortedTxn]] = {}
        for txn in aborted:
            i = bisect.bisect_right(bases, txn.last_offset) - 1
            if i >= 0 and txn.last_offset < segments[i].next_offset:
                wanted.setdefault(bases[i], []).append(txn)
        rewritten = 0
        for seg in segments:
            path = seg.path(TXN_INDEX)
            entries = wanted.get(seg.base_offset, [])
            if txn_index.read(path) != entries:
                self.check_fence()
                txn_index.rewrite(path, entries)
                rewritten += 1
        return rewritten

    def close(self) -> None:
        """Flush, trim the active segment's indexes and close every file. A fenced log (its owner
        is another node now) is only let go of: its files are not touched."""
        if self._closed:
            return
        with contextlib.suppress(FencedError):
            self.flush()
        with self._flush_lock, self._lock:
            if self._closed:
                return
            fenced = self.fenced
            for seg in self._segments:
                if fenced:
                    seg.close_files()
                else:
                    seg.close()
            self._closed = True

    def abandon(self) -> None:
        """Close every descriptor without writing, trimming or syncing anything: the files are
        someone else's now, or about to be read afresh."""
        with self._flush_lock, self._lock:
            if self._closed:
                return
            for seg in self._segments:
                seg.close_files()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(str(self.directory))

    def check_fence(self) -> None:
        """Right before a file of the log changes: raises ``FencedError`` if this process is no
        longer (or may no longer be) the partition's owner."""
        fence = self.fence
        if fence is not None:
            fence.check()

    @property
    def fenced(self) -> bool:
        fence = self.fence
        return fence is not None and not fence.ok


class FlushClaim:
    """A flush of one log taken with ``PartitionLog.claim_flush``, whose files the caller has made
    durable some other way (``done``: the new recovery point) or could not (``undo``: everything is
    left to the next flush). Exactly one of the two is called, once; either lets the flush lock go."""

    __slots__ = ("log", "end", "todo", "dir_dirty", "held")

    def __init__(self, log: PartitionLog, end: int, todo: list[Segment], dir_dirty: bool) -> None:
        self.log = log
        self.end = end
        self.todo = todo
        self.dir_dirty = dir_dirty
        self.held = True

    def done(self) -> int:
        """The claimed appends are on the disk: the recovery point moves to them, unless the log
        was fenced meanwhile (``FencedError``: the bytes may be there, but only an owner may say so)."""
        log = self.log
        try:
            with log._lock:
                return log._flushed(self.end)
        finally:
            self._release()

    def undo(self) -> None:
        log = self.log
        try:
            with log._lock:
                log._give_back(self.todo, self.dir_dirty)
        finally:
            self._release()

    def _release(self) -> None:
        if self.held:
            self.held = False
            self.log._flush_lock.release()
