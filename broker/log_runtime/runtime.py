"""The one runtime that owns every partition log: ``__consumer_offsets`` and ordinary topics alike.

Its clients (the coordinator shards, the data plane) queue writes on a partition and learn when
they are durable; everything about getting bytes onto the disk is decided here, once:

- **Group commit.** A pass takes every partition with queued writes, appends what each queued as
  one step, then, with ``log.flush.policy=sync``, has the sync threads fdatasync those logs
  together. Passes run one at a time: whatever is queued while one runs shares the next, which is
  what makes them group commits (overlapping passes would each pay for their own fdatasyncs).
- **One syncfs for many logs.** Where the kernel reports syncfs errors (Linux 5.8 on), a pass
  that makes two or more logs durable does so with one syncfs of the data directory's filesystem
  on one sync thread, instead of an open, fdatasync and close per log: each of those calls hands
  the interpreter lock to the sync thread and back, and with the event loop busy every hand-off
  made the loop wait (at 10,000 members a fifth of its time). A pass of one log fdatasyncs it.
- **Where work runs.** Small appends (a coordinator batch, a small produced batch) are written on
  the event loop: a write into the page cache costs microseconds, and a thread hop would cost more.
  Large produced batches are validated and written on a sync thread. fdatasync always runs on a
  sync thread, never on the loop.
- **Durable, then visible.** A partition's high watermark (what Fetch and ListOffsets expose) and
  its durable sequence (what replies and reads wait for) move only when a pass completes: after
  the fdatasync with ``sync``, after the write with ``interval`` (which then flushes every
  ``log.flush.interval.ms`` whatever was written since the last period).
- **Answered from the thread.** An answer whose records a pass makes durable may be written to its
  client by the sync thread right after the fdatasync (``send_when_durable``): a client with one
  request in flight then does not wait for the event loop to wake up to learn of it.
- **One failure policy.** A partition whose append or flush fails stops taking writes (later ones
  are refused); everything waiting on it is told so (``ok=False``), and its owner is told to
  rebuild from what the log holds.
- **One maintenance loop** compacts ``compact`` logs (every ``log.cleaner.backoff.ms``) and applies
  time and size retention to ``delete`` logs (every ``log.retention.check.interval.ms``).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import trio

from broker.log_runtime.sync_threads import SyncThreads
from broker.observability import logs
from broker.observability.metrics import METRICS
from storage import filesystem_sync
from storage.cleaner import clean
from storage.config import LogConfig
from storage.errors import FencedError, LogClosedError, StorageError
from storage.fencing import Fence
from storage.log_manager import LogManager, LogOpener
from storage.partition_log import FlushClaim, PartitionLog
from storage.retention import apply_retention

_SYNC_THREADS = 4
# Appends up to this size are written on the event loop; larger produced batches on a sync thread
# (their records are walked for validation, ~0.5 us each).
INLINE_APPEND_BYTES = 64 * 1024
RETENTION_CHECK_MS = 300_000  # log.retention.check.interval.ms
CLEANER_BACKOFF_MS = 15_000  # log.cleaner.backoff.ms

Entry = tuple[bytes | None, bytes | None, int]  # (key, value, timestamp ms) of a coordinator record
DurableCallback = Callable[[bool], None]


class DurableReply(Protocol):
    """An answer that waits for a partition's writes and that the sync thread making them durable
    may send itself, right after its fdatasync: the event loop's wake-up is then off the
    acknowledgement's path."""

    def lend(self) -> tuple[int, bytes] | None:
        """The socket's descriptor and the bytes to write there, if they may be written from the
        pass's thread now; nobody else writes to that socket until ``returned``."""

    def returned(self, sent: int, durable: bool, sent_at: float = 0.0) -> None:
        """On the trio thread, once the pass is over: how many bytes were written (-1: the socket
        failed), whether the writes were made durable, and when the bytes left (perf_counter)."""


class PartitionOwner(Protocol):
    def on_write_failed(self, exc: Exception) -> None:
        """The log refused a write or could not make it durable: rebuild from what it holds."""


def _nothing() -> None:
    pass


def _tell(write: BatchWrite, part: Partition) -> None:
    """Runs a failed write's callback. One that raises is logged and goes no further: it runs
    inside a pass's completion or a connection's read round, which serve every other partition
    and connection of the node."""
    try:
        write.on_done()
    except Exception:
        logs.event("log.release_failed", 40, exc_info=True, topic=part.topic, partition=part.index)
    write.on_done = _nothing


def _send(fd: int, data: bytes) -> int:
    """Writes what a non-blocking socket takes of ``data`` now: the count, 0 when it is full, -1
    when it failed (the connection's task finds out and closes it)."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError:
        return -1


def _always() -> bool:
    return True


def _no_fence(topic: str, index: int) -> Fence | None:
    del topic, index
    return None


__all__ = ["BatchWrite", "DurableReply", "Entry", "FencedError", "LogRuntime", "Partition", "PartitionOwner"]


class BatchWrite:
    """One produced batch on its way to the log. ``first``/``last`` are where it landed (-1 until
    written); ``error`` is why the log refused it; ``on_done`` runs once the pass that wrote it has
    completed (so the batch is durable per the policy, or has failed)."""

    __slots__ = ("raw", "expected", "first", "last", "error", "on_done")

    def __init__(self, raw: bytes, expected: int, on_done: Callable[[], None]) -> None:
        self.raw = raw
        self.expected = expected  # the offset the client of the runtime predicted it would get
        self.first = -1
        self.last = -1
        self.error: Exception | None = None
        self.on_done = on_done


class Partition:
    """One partition log and the runtime's bookkeeping of it. Touched only on the trio thread
    (the ``PartitionLog`` itself is thread-safe)."""

    __slots__ = ("topic", "index", "log", "owner", "high_watermark", "records", "batches", "queued_bytes",
                 "queued_seq", "durable_seq", "waiters", "watchers", "failed", "closed", "lazy", "fence", "replies",
                 "same_fs")

    def __init__(self, topic: str, index: int, log: PartitionLog, owner: PartitionOwner | None) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.owner = owner
        self.high_watermark = log.end_offset  # everything below is durable and may be read
        self.records: list[Entry] = []
        self.batches: list[BatchWrite] = []
        self.queued_bytes = 0
        self.queued_seq = 0  # one per queued write
        self.durable_seq = 0
        self.waiters: deque[tuple[int, DurableCallback]] = deque()
        # Answers that wait for the writes queued so far and that the next pass's sync thread may
        # send (``LogRuntime.send_when_durable``).
        self.replies: list[DurableReply] = []
        self.watchers: set[trio.Event] = set()  # parked fetches, woken when the high watermark moves
        self.failed = False
        self.closed = False
        # A lazy log (the rebalance journal) is written in the passes but never holds one up for an
        # fdatasync: it is flushed every ``log.flush.interval.ms``, its high watermark moving then.
        self.lazy = False
        # Cluster mode: this node's claim of the partition, which its log also holds.
        self.fence: Fence | None = None
        # Its files are on the filesystem the runtime's syncfs makes durable.
        self.same_fs = False

    @property
    def fenced(self) -> bool:
        """Its claim has ended (or its lease may have): nothing more is written or acknowledged."""
        return self.fence is not None and not self.fence.ok

    @property
    def settled(self) -> bool:
        """Nothing queued or in flight that a read could see."""
        return self.queued_seq <= self.durable_seq

    def when_durable(self, callback: DurableCallback) -> None:
        """``callback(True)`` once every write queued so far is durable (at once if it already is),
        ``callback(False)`` if one of them fails first (at once if the partition has failed or
        been closed: nothing queued on it will be made durable)."""
        if self.queued_seq <= self.durable_seq:
            callback(True)
        elif self.failed or self.closed:
            callback(False)
        else:
            self.waiters.append((self.queued_seq, callback))

    async def settle(self, timeout: float) -> None:
        """Waits, at most ``timeout`` seconds, until every write queued so far is durable or has
        failed: what a controlled hand-over of the partition lets finish before it unloads."""
        if self.settled:
            return
        done = trio.Event()
        self.when_durable(lambda _ok: done.set())
        with trio.move_on_after(timeout):
            await done.wait()

    def wake_watchers(self) -> None:
        for event in self.watchers:
            event.set()
        self.watchers.clear()

    def _take(self) -> tuple[list[Entry], list[BatchWrite], int, bool, list[DurableReply]]:
        records, batches, replies = self.records, self.batches, self.replies
        inline = self.queued_bytes <= INLINE_APPEND_BYTES
        self.records, self.batches, self.queued_bytes = [], [], 0
        if replies:
            self.replies = []
        return records, batches, self.queued_seq, inline, replies


class _Job:
    """What one pass does to one partition."""

    __slots__ = ("part", "records", "batches", "target", "inline", "error", "may_write", "replies", "sends", "sent",
                 "sent_at")

    def __init__(self, part: Partition, records: list[Entry], batches: list[BatchWrite], target: int,
                 inline: bool, may_write: Callable[[], bool] = _always,
                 replies: list[DurableReply] | None = None) -> None:
        self.may_write = may_write
        self.replies = replies
        # The replies lent to the pass's thread: each one's descriptor and bytes, and how much of
        # each the thread wrote after the fdatasync.
        self.sends: list[tuple[DurableReply, int, bytes]] = []
        self.sent: list[int] = []
        self.sent_at = 0.0
        self.part = part
        self.records = records
        self.batches = batches
        self.target = target
        self.inline = inline
        self.error: Exception | None = None

    def send_lent(self) -> None:
        """On the pass's thread, once durable: the answers lent to it leave now, not after a
        wake-up of the event loop. The high watermark moves first: a client told its write is
        durable may read the log at once (a Fetch of __consumer_offsets), and must find it there,
        before the event loop settles the pass (which wakes the readers waiting for it). Nothing
        else appends to the log during the pass, so its end is what was just made durable."""
        part = self.part
        end = part.log.end_offset
        if end > part.high_watermark:
            part.high_watermark = end
        self.sent = [_send(fd, data) for _reply, fd, data in self.sends]
        self.sent_at = time.perf_counter()

    def append(self) -> None:
        log = self.part.log
        # Checked as late as possible, right before the bytes go out: a node whose lease may have
        # passed to another node must not write into a log the other node now owns.
        if not self.may_write() or self.part.fenced:
            raise FencedError(f"{self.part.topic}-{self.part.index}: no longer owned here, or the cluster lease "
                              "was not renewed in time")
        if self.records:
            log.append(self.records)
        for write in self.batches:
            try:
                write.first, write.last = log.append_batch(write.raw)
            except StorageError:
                raise  # the log is closed or broken: the whole partition fails
            except Exception as exc:  # this batch is invalid; the log refused it whole
                write.error = exc


class LogRuntime:
    def __init__(self, data_dir: Path, defaults: LogConfig, *, sync_flush: bool, flush_interval_ms: int,
                 cleaner_backoff_ms: int | None = CLEANER_BACKOFF_MS,
                 retention_check_ms: int = RETENTION_CHECK_MS, opener: LogOpener = PartitionLog.open,
                 shared: bool = False, fs_sync: bool | None = None) -> None:
        """``fs_sync``: make a pass's logs durable with one syncfs (None: wherever the kernel
        reports its errors, ``data_dir`` is on a local filesystem (``storage.filesystem_sync``;
        not NFS, say, where a cluster's shared volume may be) and the logs are its files, not a
        test's in-memory logs)."""
        self.data_dir = data_dir
        self.sync_flush = sync_flush
        self.flush_interval_ms = flush_interval_ms
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.retention_check_ms = retention_check_ms
        self.manager = LogManager(data_dir, defaults, opener=opener, shared=shared)
        # The data directory, open for syncfs, and the filesystem it is on (a partition directory
        # mounted from another one is fdatasynced on its own). Not on a network filesystem (a
        # cluster's shared volume may be NFS), nor for a test's in-memory logs.
        self.fs_fd: int | None = None
        self.fs_dev = -1
        chosen = fs_sync is not None
        if fs_sync is None:
            fs_sync = filesystem_sync.available() and opener == PartitionLog.open
        if fs_sync:
            fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
            if chosen or filesystem_sync.suited(fd):
                self.fs_fd, self.fs_dev = fd, os.fstat(fd).st_dev
            else:
                os.close(fd)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.dirty: dict[tuple[str, int], Partition] = {}
        self.unflushed: set[Partition] = set()
        self.sync_threads = SyncThreads(_SYNC_THREADS)
        self.have_dirty = trio.Event()
        # Set while a caller that will call ``kick`` before its next await is queueing writes.
        self.kick_is_coming = False
        self.pass_running = False
        self.nursery: trio.Nursery | None = None
        # Called on the trio thread at every retention check (the data plane expires producers).
        self.retention_hooks: list[Callable[[], None]] = []
        # Cluster mode: false once this node's lease could have passed to another node. Nothing is
        # then written, flushed as a success, compacted or acknowledged.
        self.may_write: Callable[[], bool] = _always
        # Cluster mode: the fence of this node's current claim of a partition (``storage.fencing``),
        # given to its log when it is opened; every change of the log's files checks it.
        self.fence_for: Callable[[str, int], Fence | None] = _no_fence

    # ---- partitions ---------------------------------------------------------------------------

    def open(self, topic: str, index: int, config: LogConfig | None = None, topic_id: bytes | None = None,
             owner: PartitionOwner | None = None, deleted: Collection[bytes] = ()) -> Partition:
        """The partition, opening (recovering) or creating its log. Blocking: may run on a worker
        thread, but registering the result happens on the trio thread in ``adopt``. In cluster mode
        the log is opened afresh from its files under this node's current claim of the partition
        (``FencedError`` without one), replacing a directory of one of the ``deleted`` topic ids."""
        fence = self.fence_for(topic, index)
        log = self.manager.get_or_create(topic, index, config, topic_id, fence, deleted)
        part = Partition(topic, index, log, owner)
        part.fence = fence
        if self.fs_fd is not None:
            part.same_fs = os.stat(log.directory).st_dev == self.fs_dev
        return part

    def adopt(self, part: Partition) -> Partition:
        self.partitions[(part.topic, part.index)] = part
        return part

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def close_partition(self, part: Partition) -> None:
        """Forget ``part`` and close its log (flushing what it can); a later ``open`` recovers it."""
        part.closed = True
        self.partitions.pop((part.topic, part.index), None)
        self.dirty.pop((part.topic, part.index), None)
        self.unflushed.discard(part)
        self.manager.forget(part.topic, part.index)
        self._refuse_queued(part, OSError("the partition's log failed and is being recovered") if part.failed
                            else LogClosedError(f"{part.topic}-{part.index} was closed"))
        try:
            part.log.close()
        except (OSError, StorageError) as exc:
            logs.warn("log.close_failed", topic=part.topic, partition=part.index, error=repr(exc))
        part.wake_watchers()

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self.partitions if k[0] == topic]:
            part = self.partitions.pop(key)
            part.closed = True
            self.dirty.pop(key, None)
            self.unflushed.discard(part)
            # No pass will take what is queued on it now: answer it (the partition is gone).
            self._refuse_queued(part, LogClosedError(f"{topic}-{key[1]}"))
            part.wake_watchers()
        self.manager.delete_topic(topic)

    # ---- writing ------------------------------------------------------------------------------

    def append_records(self, part: Partition, records: list[Entry]) -> None:
        """Queue coordinator records, written as one batch by the next pass."""
        part.records.extend(records)
        part.queued_bytes += 64 * len(records)  # a typical offset commit; only decides inline or not
        part.queued_seq += 1
        self._mark(part)

    def append_batch(self, part: Partition, write: BatchWrite) -> None:
        """Queue a produced batch; ``write.on_done`` runs when its pass completes."""
        part.batches.append(write)
        part.queued_bytes += len(write.raw)
        part.queued_seq += 1
        self._mark(part)

    def send_when_durable(self, part: Partition, reply: DurableReply) -> None:
        """``reply`` waits for every write queued on ``part`` so far (its owner released it when
        they are durable): the sync thread of the pass that makes them durable may send it itself
        (``DurableReply.lend``). Only where that thread's fdatasync is the last word: with the
        sync policy, and outside a cluster, where a write is acknowledged only if the lease held
        until the pass was over, which the trio thread decides."""
        if self.sync_flush and not part.lazy and part.fence is None and self.may_write is _always \
                and part.queued_seq > part.durable_seq:
            part.replies.append(reply)

    def _mark(self, part: Partition) -> None:
        self.dirty[(part.topic, part.index)] = part
        if not self.kick_is_coming:
            self.have_dirty.set()

    def kick_coming(self) -> None:
        """The caller calls ``kick`` before it next awaits: writes queued until then start from
        there, without a turn of the flusher task (a scheduler pass a request on its own)."""
        self.kick_is_coming = True

    def kick(self) -> None:
        """Starts a pass over every partition with queued writes, unless a pass is running (its
        completion kicks again). Connections call this once they have dispatched what a read
        carried, so requests that arrived together share a pass without a trip through the
        scheduler; the flusher task covers the rest."""
        self.kick_is_coming = False
        if not self.dirty or self.pass_running:
            return
        jobs: list[_Job] = []
        for part in self.dirty.values():
            if part.failed or part.closed:
                # Queued after the failure or the deletion: no pass will write it (a partition
                # stays failed until its owner has rebuilt it as a new partition).
                self._refuse_queued(part, OSError("the partition's log failed and is being recovered")
                                    if part.failed else LogClosedError("the partition was deleted"))
                continue
            records, batches, target, inline, replies = part._take()
            jobs.append(_Job(part, records, batches, target, inline, self.may_write, replies))
        self.dirty.clear()
        if jobs:
            self._run_pass(jobs)

    def _run_pass(self, jobs: list[_Job]) -> None:
        started = time.perf_counter()
        self.pass_running = True
        threaded: list[_Job] = []
        for job in jobs:
            if job.inline:
                try:
                    job.append()
                except Exception as exc:
                    job.error = exc
                    continue
            if (self.sync_flush and not job.part.lazy) or not job.inline:
                threaded.append(job)
                if job.replies:  # only ever queued where this pass syncs (send_when_durable)
                    for reply in job.replies:
                        lent = reply.lend()
                        if lent is not None:
                            job.sends.append((reply, *lent))
        if not threaded:
            self._complete(jobs, started)
            return
        sync = self.sync_flush

        def done(_results: list[BaseException | None]) -> None:
            # A trio system callback: nothing may escape it.
            try:
                self._complete(jobs, started)
            except Exception:
                logs.event("log.pass_failed", 40, exc_info=True)

        if sync and self.fs_fd is not None and sum(1 for job in threaded if job.part.same_fs
                                                   and not job.part.lazy) >= 2:
            self.sync_threads.submit([partial(self._sync_together, threaded, self.fs_fd)], done)
            return

        def work(chunk: list[_Job]) -> None:
            for job in chunk:
                try:
                    if not job.inline:
                        job.append()
                    if sync and not job.part.lazy:
                        job.part.log.flush()
                except Exception as exc:
                    job.error = exc
                else:
                    if job.sends:
                        job.send_lent()

        # Large appends are Python work (each record is walked) that holds the GIL: one thread does
        # them all, one after another, as the base broker's topic writer did; threads contending
        # for the GIL would only add switches and smaller passes. Flushes of small appends release
        # the GIL and wait on the disk: they are spread over the other threads.
        heavy = [job for job in threaded if not job.inline]
        light = [job for job in threaded if job.inline]
        chunks = [heavy] if heavy else []
        workers = min(len(light), _SYNC_THREADS - len(chunks))
        chunks += [light[i::workers] for i in range(workers)]
        self.sync_threads.submit([partial(work, chunk) for chunk in chunks], done)

    @staticmethod
    def _sync_together(jobs: list[_Job], fs_fd: int) -> None:
        """A pass with the sync policy, on one sync thread: the large appends, then one syncfs for
        every log on the data directory's filesystem (each claimed first, so that what counts as
        durable is what was appended before the syncfs began), an fdatasync for any other, and
        the lent answers of those that are durable."""
        for job in jobs:
            if not job.inline:
                try:
                    job.append()
                except Exception as exc:
                    job.error = exc
        claims: list[tuple[_Job, FlushClaim]] = []
        alone: list[_Job] = []
        for job in jobs:
            if job.error is not None or job.part.lazy:
                continue
            if not job.part.same_fs:
                alone.append(job)
                continue
            try:
                claim = job.part.log.claim_flush()
            except Exception as exc:
                job.error = exc
                continue
            if claim is not None:
                claims.append((job, claim))
        try:
            filesystem_sync.syncfs(fs_fd)
        except Exception as exc:
            # The kernel does not say which file it could not write: none of them is durable.
            for job, claim in claims:
                claim.undo()
                job.error = exc
        else:
            for job, claim in claims:
                try:
                    claim.done()
                except Exception as exc:
                    job.error = exc
        for job in alone:
            try:
                job.part.log.flush()
            except Exception as exc:
                job.error = exc
        for job in jobs:
            if job.error is None and job.sends:
                job.send_lent()

    def _complete(self, jobs: list[_Job], started: float) -> None:
        self.pass_running = False
        self.kick_is_coming = True  # below, after the callbacks that may queue more
        records = self._finish(jobs)
        METRICS.flush_seconds.observe(time.perf_counter() - started)
        METRICS.flush_records.observe(records)
        self.kick()

    def _finish(self, jobs: list[_Job]) -> int:
        """Settles or fails each job's partition; returns how many records and batches they held."""
        records = 0
        for job in jobs:
            if job.sends:
                self._return_sends(job)
        for job in jobs:
            part = job.part
            records += len(job.records) + len(job.batches)
            try:
                if job.error is None and (not self.may_write() or part.fenced):
                    # Written and flushed, but the lease lapsed meanwhile: acknowledge nothing.
                    job.error = FencedError(f"{part.topic}-{part.index}: the cluster lease lapsed during the write")
                if job.error is not None:
                    self._fail(part, job.error, job.batches)
                else:
                    self._settle(part, job)
            except Exception:
                # One client's callback that cannot run must not hold back the others.
                logs.event("log.release_failed", 40, exc_info=True, topic=part.topic, partition=part.index)
        return records

    def _return_sends(self, job: _Job) -> None:
        sent = job.sent or [0] * len(job.sends)
        durable = job.error is None
        for (reply, _fd, _data), count in zip(job.sends, sent, strict=True):
            try:
                reply.returned(count, durable, job.sent_at)
            except Exception:
                logs.event("log.release_failed", 40, exc_info=True, topic=job.part.topic, partition=job.part.index)

    def _settle(self, part: Partition, job: _Job) -> None:
        if part.lazy:
            if not part.closed:
                self.unflushed.add(part)
        elif not part.closed:
            end = part.log.end_offset
            if end > part.high_watermark:
                part.high_watermark = end
                part.wake_watchers()
            elif job.sent:
                part.wake_watchers()  # the pass's thread moved the high watermark (send_lent)
            if not self.sync_flush:
                self.unflushed.add(part)
        part.durable_seq = job.target
        for write in job.batches:
            write.on_done()
            # The callback's closure usually refers back to this write (through its request): a
            # cycle only the cyclic collector would free, keeping the batch until a full collection.
            write.on_done = _nothing
        waiters = part.waiters
        while waiters and waiters[0][0] <= job.target:
            waiters.popleft()[1](True)

    def _fail(self, part: Partition, exc: Exception, written: list[BatchWrite]) -> None:
        """The failure policy: the partition takes no more writes; its owner rebuilds it from what
        the log holds; every write and read that waited on it hears it failed. ``written`` are the
        produced batches of the pass that failed (none when a periodic flush failed)."""
        first = not part.failed and not part.closed
        if first:
            METRICS.write_failures.inc()
            logs.event("log.write_failed", 40, topic=part.topic, partition=part.index, error=repr(exc))
            part.failed = True
        for write in written:
            if write.error is None:
                write.error = exc if isinstance(exc, StorageError) else OSError(
                    f"the write could not be made durable: {exc}")
            _tell(write, part)
        self._refuse_queued(part, OSError("an earlier write to this partition failed"))
        if first and part.owner is not None:
            part.owner.on_write_failed(exc)

    def _refuse_queued(self, part: Partition, error: Exception) -> None:
        """Every write queued on a partition that no pass will write again (it failed, or its
        topic was deleted) is refused with ``error``, and every wait on it hears it failed."""
        waiters, part.waiters = part.waiters, deque()
        part.records.clear()
        part.replies.clear()
        queued, part.batches = part.batches, []
        part.queued_bytes = 0
        for write in queued:
            write.error = error
            _tell(write, part)
        for _seq, callback in waiters:
            callback(False)

    # ---- running ------------------------------------------------------------------------------

    async def _flusher(self) -> None:
        """Starts passes for writes queued outside a connection's dispatch (timers, parked
        requests completing, fetch long-polls); for requests, ``kick`` usually got there first."""
        while True:
            await self.have_dirty.wait()
            self.have_dirty = trio.Event()
            self.kick()

    async def _flush_periodically(self) -> None:
        """``interval`` policy (and lazy logs under any policy): every period, make durable the logs
        written since the last one."""
        while True:
            await trio.sleep(self.flush_interval_ms / 1000)
            parts, self.unflushed = self.unflushed, set()
            for part in parts:
                if part.closed:
                    continue
                end = part.log.end_offset
                try:
                    await trio.to_thread.run_sync(part.log.flush)
                    if part.lazy and not part.closed and end > part.high_watermark:
                        part.high_watermark = end  # durable now: readers may see it
                        part.wake_watchers()
                except (OSError, StorageError) as exc:
                    # What was written since the last period may not be on the disk, and appending
                    # more on top of it is appending to a log in an unknown state: the same policy
                    # as a failed pass, so the owner serves again only what the log really holds.
                    if not part.closed and not part.failed:
                        self._fail(part, exc, [])

    async def _maintain(self) -> None:
        """Compaction and retention, one partition at a time on a worker thread (the log lock is
        held only for the final renames, so appends go on)."""
        now = trio.current_time()
        next_clean = now + self.cleaner_backoff_ms / 1000 if self.cleaner_backoff_ms is not None else float("inf")
        next_retention = now + self.retention_check_ms / 1000
        while True:
            await trio.sleep_until(min(next_clean, next_retention))
            now = trio.current_time()
            if now >= next_clean:
                assert self.cleaner_backoff_ms is not None
                await self._compact_all()
                next_clean = trio.current_time() + self.cleaner_backoff_ms / 1000
            if now >= next_retention:
                for hook in self.retention_hooks:
                    hook()
                await self._retain_all()
                next_retention = trio.current_time() + self.retention_check_ms / 1000

    async def _compact_all(self) -> None:
        for part in list(self.partitions.values()):
            if part.closed or part.failed or not part.log.config.compact or not self.may_write():
                continue
            try:
                stats = await trio.to_thread.run_sync(clean, part.log)
            except Exception as exc:
                if not part.closed:
                    logs.warn("log.compaction_failed", topic=part.topic, partition=part.index, error=repr(exc))
                continue
            if stats is None:
                continue
            METRICS.compactions.inc()
            METRICS.compaction_reclaimed.inc(max(stats.bytes_before - stats.bytes_after, 0))
            logs.event("log.compacted", topic=part.topic, partition=part.index, bytes_before=stats.bytes_before,
                       bytes_after=stats.bytes_after, records_removed=stats.records_removed,
                       seconds=round(stats.seconds, 3))

    async def _retain_all(self) -> None:
        if not self.may_write():
            return
        parts = [p for p in self.partitions.values() if not p.log.config.compact]

        def retain() -> None:
            for part in parts:
                try:
                    removed = apply_retention(part.log)
                except StorageError:
                    continue  # deleted meanwhile
                if removed:
                    logs.event("log.retention", topic=part.topic, partition=part.index, segments=len(removed),
                               log_start_offset=part.log.log_start_offset)
            self.manager.checkpoint()

        await trio.to_thread.run_sync(retain)

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        assert self.nursery is not None, "the log runtime is not running"
        self.nursery.start_soon(fn, *args)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(self._flusher)
            # With ``sync`` only lazy logs are left to it.
            nursery.start_soon(self._flush_periodically)
            nursery.start_soon(self._maintain)
            task_status.started()

    def close(self) -> None:
        """Flush and close every log and write the checkpoints that make the next start quick."""
        self.sync_threads.close()
        self.manager.close()
        self.partitions.clear()
        if self.fs_fd is not None:
            os.close(self.fs_fd)
            self.fs_fd = None


class Spawner(Protocol):
    """Starts a background task beside the logs' (the log runtime, or the topic logs over it)."""

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None: ...
