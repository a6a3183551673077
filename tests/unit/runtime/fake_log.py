"""An in-memory partition log whose flushes a test controls, and the "disk" that outlives it.

``FakeDisk.open`` has the signature of ``PartitionLog.open`` and is handed to the broker as its log
opener. Each partition directory's batches live on the disk object, split in two: what was
appended (the page cache) and how much of it a flush made durable. A flush can be held (the sync
thread blocks until the test releases it) or made to fail; reopening a log after a failed flush
keeps only the durable batches unless the test says the unflushed ones survived too, so a test
decides what "the log holds" after a failure and checks that reads show exactly that.

Flushes run on the runtime's sync threads, so everything a test waits for is counted with
``Counter``, which is bumped from any thread and awaited in trio.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from broker.coordinators.group.core.base.records import decode_record
from protocol.record_batch import (
    RecordBatch,
    build_simple_batch,
    decode_records,
    iter_batches,
    rewrite_header,
)
from storage.config import LogConfig
from storage.errors import LogClosedError, OffsetOutOfRangeError
from storage.fencing import Fence
from storage.partition_log import Clock, wall_clock_ms
from storage.recovery import RecoveryReport
from storage.txn_index import AbortedTxn

_HEADER_FIELDS = 13  # a RecordBatch starts with the batch header's fields, as the log's segments scan them
# A held flush that nobody releases fails after this long instead of blocking a sync thread forever.
_HOLD_LIMIT_S = 60.0


class Counter:
    """A count that any thread may bump and trio tasks may wait for."""

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.token = token
        self.value = 0
        self._waiters: list[tuple[int, trio.Event]] = []

    def bump_soon(self) -> None:
        """Thread-safe: the count moves on the trio thread, in the order of the calls."""
        # A log closed after the test's trio run has nobody left to tell.
        with contextlib.suppress(trio.RunFinishedError):
            self.token.run_sync_soon(self._bump)

    def _bump(self) -> None:
        self.value += 1
        for target, event in list(self._waiters):
            if self.value >= target:
                event.set()
                self._waiters.remove((target, event))

    async def reach(self, target: int) -> None:
        if self.value >= target:
            return
        event = trio.Event()
        self._waiters.append((target, event))
        await event.wait()


@dataclass(frozen=True)
class Flush:
    log: str  # the partition directory's name, e.g. "__consumer_offsets-0"
    end_offset: int  # every offset below this was durable once the flush returned
    at: float  # the mock clock's time when the flush started


class FakeDisk:
    """Create inside the test's trio run (it remembers the run to report flushes to)."""

    def __init__(self, now: Callable[[], float] | None = None) -> None:
        token = trio.lowlevel.current_trio_token()
        # Read from sync threads: MockClock.current_time is plain arithmetic, safe from any thread.
        self.now = now or (lambda: 0.0)
        self.written: dict[str, list[bytes]] = {}  # per log: every batch appended, in order
        self.durable: dict[str, int] = {}  # per log: how many of those batches a flush made durable
        self.appends: list[tuple[str, int, int]] = []  # (log, first offset, last offset)
        self.flushes: list[Flush] = []  # flushes that succeeded, in order
        self.flush_calls = Counter(token)  # flushes started (a held one counts once it is waiting)
        self.flushed = Counter(token)  # flushes that returned, well or badly
        self.opens = Counter(token)
        self.keep_unflushed = False  # whether a reopened log still holds what no flush made durable
        self.failing = False
        self.held_by = False
        self._permits = 0  # held flushes that may still go through
        self._gate = threading.Condition()
        self._lock = threading.Lock()

    # ---- the test's controls -------------------------------------------------------------------

    def hold_flushes(self) -> None:
        """Every flush from now on blocks its thread until ``let_flushes_through`` or
        ``release_flushes``."""
        with self._gate:
            self.held_by, self._permits = True, 0

    def let_flushes_through(self, count: int = 1) -> None:
        """The next ``count`` held flushes (waiting or yet to come) go on; later ones are held."""
        with self._gate:
            self._permits += count
            self._gate.notify_all()

    def release_flushes(self) -> None:
        with self._gate:
            self.held_by = False
            self._gate.notify_all()

    def fail_flushes(self, failing: bool = True) -> None:
        """Flushes raise ``OSError(EIO)`` (as fdatasync does when the device fails) while set."""
        self.failing = failing

    def records(self, log: str, *, durable_only: bool = False) -> list[object]:
        """The coordinator records a log holds (all appended, or only the durable ones)."""
        with self._lock:
            batches = self.written.get(log, [])
            batches = batches[: self.durable.get(log, 0)] if durable_only else list(batches)
        out = []
        for raw in batches:
            for batch in iter_batches(raw):
                for record in decode_records(batch):
                    decoded = decode_record(record.key, record.value) if record.key is not None else None
                    if decoded is not None:
                        out.append(decoded)
        return out

    # ---- the log opener ------------------------------------------------------------------------

    def open(self, directory: str | os.PathLike[str], config: LogConfig, *, recovery_point: int | None = None,
             log_start_offset: int | None = None, clock: Clock = wall_clock_ms,
             fence: Fence | None = None) -> tuple[FakeLog, RecoveryReport]:
        """``PartitionLog.open`` for the fake: what the disk holds for this directory, where a log
        that was not closed cleanly loses its unflushed tail unless ``keep_unflushed``."""
        del recovery_point, log_start_offset, clock  # the fake trusts itself
        if fence is not None:
            fence.check()
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)  # the directory is real: the broker keeps files beside the log
        name = path.name
        with self._lock:
            batches = self.written.setdefault(name, [])
            durable = self.durable.setdefault(name, 0)
            if not self.keep_unflushed:
                del batches[durable:]
            self.durable[name] = len(batches)  # what a reopened log reads back is what it holds
        log = FakeLog(self, name, config, batches)
        report = RecoveryReport(directory=str(directory), log_end_offset=log.end_offset)
        self.opens.bump_soon()
        return log, report

    # ---- called by the logs --------------------------------------------------------------------

    def _flush(self, log: FakeLog, *, gated: bool) -> int:
        at = self.now()
        self.flush_calls.bump_soon()
        try:
            if gated:
                self._pass_gate()
            if self.failing:
                raise OSError(errno.EIO, "flush failed (injected)")
            with log.lock:
                count, end = len(log.batches_raw), log.end_offset
            with self._lock:
                self.durable[log.name] = max(self.durable.get(log.name, 0), count)
                self.flushes.append(Flush(log.name, end, at))
            log.recovery_point = max(log.recovery_point, end)
            return log.recovery_point
        finally:
            self.flushed.bump_soon()

    def _pass_gate(self) -> None:
        with self._gate:
            if not self._gate.wait_for(lambda: not self.held_by or self._permits > 0, _HOLD_LIMIT_S):
                raise OSError(errno.EIO, "a held flush was never released")
            if self.held_by:
                self._permits -= 1

    def _appended(self, log: FakeLog, first: int, last: int) -> None:
        with self._lock:
            self.appends.append((log.name, first, last))


class FakeSegment:
    """The whole fake log seen as one segment: what rebuilding producer state reads."""

    def __init__(self, batches: list[bytes]) -> None:
        self.batches = batches
        self.size = sum(len(raw) for raw in batches)
        self.max_timestamp = max((b.max_timestamp for raw in batches for b in iter_batches(raw)), default=-1)

    def scan_headers(self) -> Iterator[tuple[int, tuple[int, ...]]]:
        position = 0
        for raw in self.batches:
            for batch in iter_batches(raw):
                yield position + batch.position, tuple(batch[:_HEADER_FIELDS])
            position += len(raw)


class FakeLog:
    """The parts of ``PartitionLog`` that the log runtime, the shards and the data plane use."""

    def __init__(self, disk: FakeDisk, name: str, config: LogConfig, batches: list[bytes]) -> None:
        self.disk = disk
        self.name = name
        self.config = config
        self.lock = threading.Lock()
        self.batches_raw = batches  # shared with the disk: appends land "in the page cache"
        self.end_offset = 0
        for raw in batches:
            for batch in iter_batches(raw, verify_crc=False):
                self.end_offset = batch.last_offset + 1
        self.log_start_offset = 0
        self.recovery_point = self.end_offset
        self.cleaner_checkpoint = 0
        self.leader_epoch = 0
        self.closed = False
        # Nothing is ever there: the shards find no replay snapshot, and since ``coverage`` offers
        # none they never write one.
        self.directory = Path("/nonexistent-fake-disk") / name
        self.txn_index: list[AbortedTxn] = []  # the partition's .txnindex entries, all segments'

    @property
    def size_bytes(self) -> int:
        return sum(len(raw) for raw in self.batches_raw)

    def append(self, records: Sequence[tuple[bytes | None, bytes | None, int]], *,
               compression: int = 0) -> tuple[int, int]:
        with self.lock:
            self._check_open()
            base = self.end_offset
            self.batches_raw.append(build_simple_batch(records, base, partition_leader_epoch=self.leader_epoch,
                                                       compression=compression))
            self.end_offset = base + len(records)
        self.disk._appended(self, base, self.end_offset - 1)
        return base, self.end_offset - 1

    def append_batch(self, raw: bytes | bytearray | memoryview) -> tuple[int, int]:
        batches = list(iter_batches(raw))  # raises CorruptBatchError, as the real log does
        if not batches:
            raise ValueError("no batches to append")
        with self.lock:
            self._check_open()
            base = self.end_offset
            out = bytes(rewrite_header(raw, base, self.leader_epoch))
            self.batches_raw.append(out)
            self.end_offset = base + sum(b.last_offset_delta + 1 for b in batches)
        self.disk._appended(self, base, self.end_offset - 1)
        return base, self.end_offset - 1

    def flush(self) -> int:
        return self.disk._flush(self, gated=True)

    def coverage(self, end_offset: int) -> None:
        del end_offset

    def covers(self, coverage: object) -> bool:
        del coverage
        return False

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        self.txn_index.append(txn)

    def reconcile_txn_index(self, aborted: Sequence[AbortedTxn]) -> int:
        changed = list(aborted) != self.txn_index
        self.txn_index = list(aborted)
        return int(changed)

    def segments(self) -> list[FakeSegment]:
        with self.lock:
            return [FakeSegment(list(self.batches_raw))]

    def batches(self, from_offset: int = 0) -> Iterator[RecordBatch]:
        with self.lock:
            self._check_open()
            snapshot = list(self.batches_raw)
        for raw in snapshot:
            for batch in iter_batches(raw):
                if batch.last_offset >= from_offset:
                    yield batch

    def read(self, offset: int, max_bytes: int) -> bytes:
        with self.lock:
            self._check_open()
            if offset < self.log_start_offset or offset > self.end_offset:
                raise OffsetOutOfRangeError(offset, self.log_start_offset, self.end_offset)
            snapshot = list(self.batches_raw)
        out = bytearray()
        for raw in snapshot:
            for batch in iter_batches(raw, verify_crc=False):
                if batch.last_offset < offset:
                    continue
                chunk = raw[batch.position : batch.end]
                if out and len(out) + len(chunk) > max_bytes:
                    return bytes(out)
                out += chunk
        return bytes(out)

    def close(self) -> None:
        """Flushes (never held: closing happens on the event loop) and closes, even when the
        flush fails, so a failed log is not written again."""
        if self.closed:
            return
        try:
            self.disk._flush(self, gated=False)
        finally:
            self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise LogClosedError(self.name)
