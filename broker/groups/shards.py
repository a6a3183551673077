"""The runtime around each coordinator shard: load by replay, run operations, persist their
records with group commit, release responses only once their records are durable, fire timers.

The coordinator itself is pure; this is where its records meet the log and its timers meet trio.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import trio

from broker.coordinator.context import CoordinatorConfig, RequestContext
from broker.coordinator.result import CancelTimer, Result, SetTimer
from broker.coordinator.shard import GroupCoordinatorShard
from broker.coordinator.timers import OFFSETS_EXPIRY_KEY
from broker.groups.replay_plan import replay_log
from broker.groups.timers import TimerService, wall_ms
from broker.log_runtime.sync_threads import SyncThreads
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.topics.catalog import OFFSETS_TOPIC
from protocol.errors import ErrorCode
from protocol.offsets_log_records import OffsetCommitRecord, encode_record
from storage.cleaner import clean
from storage.config import LogConfig
from storage.partition_log import PartitionLog

ErrorBuilder = Callable[[int], Any]
_FLUSH_THREADS = 4
Op = Callable[[GroupCoordinatorShard, RequestContext, int], Result]


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


@dataclass(slots=True)
class Parked:
    deliver: Callable[[Any], None]
    on_error: ErrorBuilder


class ShardRuntime:
    def __init__(self, manager: ShardManager, partition: int) -> None:
        self.manager = manager
        self.partition = partition
        self.shard = manager.new_shard(partition)
        self.log: PartitionLog | None = None
        self.loaded = False
        self.parked: dict[int, Parked] = {}
        self.write_queue: list[tuple[bytes | None, bytes | None, int]] = []
        self.waiting: list[tuple[int, int, Any]] = []  # (write sequence needed, token, response)
        self.queued_seq = 0
        self.durable_seq = 0
        self.load_seconds = 0.0
        self.replayed = 0

    # ---- loading ----------------------------------------------------------------------------

    def _open_and_replay(self) -> int:
        log, report = PartitionLog.open(self.manager.partition_dir(self.partition), self.manager.log_config)
        if not report.clean:
            logs.warn("log.recovered", partition=self.partition, dropped_bytes=report.bytes_dropped,
                      details=report.summary())
        elif report.rebuilt_indexes or report.leftovers:
            logs.event("log.recovered", partition=self.partition, details=report.summary())
        self.log = log
        read, replayed = replay_log(log.batches, self.shard.replay)
        self.replayed = replayed
        return read

    async def load(self) -> None:
        started = time.perf_counter()
        count = await trio.to_thread.run_sync(self._open_and_replay)
        now = wall_ms()
        for timer in self.shard.on_loaded(now):
            self.manager.timers.set(self.partition, timer.key, timer.deadline_ms)
        self.load_seconds = time.perf_counter() - started
        METRICS.load_seconds.labels(str(self.partition)).set(self.load_seconds)
        self.loaded = True
        logs.debug("shard.loaded", partition=self.partition, records=count, replayed=self.replayed,
                   seconds=round(self.load_seconds, 4))

    # ---- the request path -------------------------------------------------------------------

    def execute(self, op: Op, deliver: Callable[[Any], None], ctx_fields: tuple[int, str, str],
                on_error: ErrorBuilder) -> None:
        """Runs ``op`` on the shard now; ``deliver`` gets its response once its records are durable
        (or later still, when the coordinator parks it)."""
        token = next(self.manager.tokens)
        self.parked[token] = Parked(deliver, on_error)
        version, client_id, client_host = ctx_fields
        ctx = RequestContext(token=token, api_version=version, client_id=client_id, client_host=client_host)
        now = wall_ms()
        self.apply(op(self.shard, ctx, now), now)

    def fire_timer(self, key: str, now: int) -> None:
        if self.loaded:
            result = self.shard.on_timer(key, now)
            if key == OFFSETS_EXPIRY_KEY:
                METRICS.offset_expirations.inc(sum(1 for r in result.records if isinstance(r, OffsetCommitRecord)))
            self.apply(result, now)

    def apply(self, result: Result, now: int) -> None:
        timers = self.manager.timers
        for t in result.timers:
            if isinstance(t, SetTimer):
                timers.set(self.partition, t.key, t.deadline_ms)
            elif isinstance(t, CancelTimer):
                timers.cancel(self.partition, t.key)
        for tr in getattr(result, "transitions", ()):
            self.manager.on_transition(tr)
        if result.records:
            self.manager.mark_dirty(self)
            commits = 0
            for rec in result.records:
                if isinstance(rec, OffsetCommitRecord) and rec.value is not None:
                    commits += 1
                key, value = encode_record(rec)
                self.write_queue.append((key, value, now))
            if commits:
                METRICS.offset_commits.inc(commits)
            self.queued_seq += 1
        need = self.queued_seq
        for token, response in result.replies:
            if need <= self.durable_seq:
                self._deliver(token, response)
            else:
                self.waiting.append((need, token, response))

    def _deliver(self, token: int, response: Any) -> None:
        parked = self.parked.pop(token, None)
        if parked is not None:
            parked.deliver(response)

    # ---- the write path ---------------------------------------------------------------------

    def take_pending(self) -> tuple[list[tuple[bytes | None, bytes | None, int]], int]:
        batch, self.write_queue = self.write_queue, []
        return batch, self.queued_seq

    def release(self, target: int) -> None:
        """Everything queued up to write sequence ``target`` is durable: send what waited for it."""
        self.durable_seq = target
        still = []
        for need, token, response in self.waiting:
            if need <= target:
                self._deliver(token, response)
            else:
                still.append((need, token, response))
        self.waiting = still

    def fail_writes(self, exc: Exception) -> None:
        """The log did not take the write: fail every waiting response with a coordinator error
        (clients re-discover and retry); the shard serves again once ``reload`` has rebuilt it
        from what the log really holds."""
        METRICS.write_failures.inc()
        logs.event("log.write_failed", 40, partition=self.partition, error=repr(exc))
        self.loaded = False
        self.manager.timers.cancel_shard(self.partition)
        for token, parked in list(self.parked.items()):
            parked.deliver(parked.on_error(ErrorCode.NOT_COORDINATOR))
            del self.parked[token]
        self.waiting.clear()
        self.write_queue.clear()
        if self.log is not None:
            self.log.close()
            self.log = None
        self.shard = self.manager.new_shard(self.partition)

    async def reload(self) -> None:
        await trio.sleep(0.1)
        await self.load()



class ShardManager:
    def __init__(self, data_dir: Path, num_partitions: int, coordinator_config: CoordinatorConfig,
                 topics: Any, log_config: LogConfig, sync_flush: bool, flush_interval_ms: int,
                 on_transition: Callable[[Any], None], cleaner_backoff_ms: int | None = 15000) -> None:
        self.data_dir = data_dir
        self.num_partitions = num_partitions
        self.coordinator_config = coordinator_config
        self.topics = topics
        self.log_config = log_config
        self.sync_flush = sync_flush
        self.flush_interval_ms = flush_interval_ms
        self.on_transition = on_transition
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.tokens = itertools.count(1)
        self.timers = TimerService(self._fire)
        self.runtimes = [ShardRuntime(self, p) for p in range(num_partitions)]
        self.dirty: dict[int, ShardRuntime] = {}
        self.unflushed: dict[int, ShardRuntime] = {}  # written, not yet flushed (interval policy)
        self.nursery: trio.Nursery | None = None
        self.sync_threads = SyncThreads(_FLUSH_THREADS)
        self.have_dirty = trio.Event()
        self.pass_running = False

    def mark_dirty(self, runtime: ShardRuntime) -> None:
        self.dirty[runtime.partition] = runtime
        self.have_dirty.set()

    def kick(self) -> None:
        """Starts a write pass now, unless one is running (its end starts the next) or nothing
        is queued. Connections call this once they have dispatched what a read carried, so the
        requests that arrived together share a pass without a trip through the scheduler."""
        if self.dirty and not self.pass_running:
            self._start_pass()

    async def flusher(self) -> None:
        """Starts passes for writes queued outside a connection's dispatch (timers, parked
        joins completing); for requests, ``kick`` usually got there first."""
        while True:
            await self.have_dirty.wait()
            self.have_dirty = trio.Event()
            self.kick()

    def _start_pass(self) -> None:
        """Group commit across shards: appends what each shard queued since the last pass (one
        batch per shard), then, under ``sync``, has the sync threads fdatasync those logs
        together; the responses that waited for the pass are released when it is durable."""
        dirty, self.dirty = self.dirty, {}
        started = time.perf_counter()
        written: list[tuple[ShardRuntime, int]] = []
        records = 0
        for runtime in dirty.values():
            batch, target = runtime.take_pending()
            if not batch or runtime.log is None:
                continue
            try:
                runtime.log.append(batch)
            except Exception as exc:
                self._write_failed(runtime, exc)
                continue
            written.append((runtime, target))
            records += len(batch)
        if not written:
            return
        if not self.sync_flush:
            self._finish_pass(written, [], started, records)
            return
        failures: list[tuple[ShardRuntime, Exception]] = []
        runtimes = [rt for rt, _ in written]

        def sync_some(chunk: list[ShardRuntime]) -> None:
            for runtime in chunk:
                try:
                    assert runtime.log is not None
                    runtime.log.flush()
                except Exception as exc:
                    failures.append((runtime, exc))

        def synced(_results: list[BaseException | None]) -> None:
            # A trio system callback: nothing may escape it.
            self.pass_running = False
            try:
                self._finish_pass(written, failures, started, records)
                self.kick()
            except Exception:
                logs.event("flush.failed", 40, exc_info=True)

        self.pass_running = True
        workers = min(len(runtimes), _FLUSH_THREADS)
        self.sync_threads.submit([partial(sync_some, runtimes[i::workers]) for i in range(workers)], synced)

    def _finish_pass(self, written: list[tuple[ShardRuntime, int]], failures: list[tuple[ShardRuntime, Exception]],
                     started: float, records: int) -> None:
        failed = {rt.partition for rt, _ in failures}
        for runtime, error in failures:
            self._write_failed(runtime, error)
        for runtime, target in written:
            if runtime.partition in failed:
                continue
            try:
                runtime.release(target)
            except Exception:
                # One response that cannot be sent must not hold back the others.
                logs.event("flush.release_failed", 40, exc_info=True, partition=runtime.partition)
            if not self.sync_flush:
                self.unflushed[runtime.partition] = runtime
        METRICS.flush_seconds.observe(time.perf_counter() - started)
        METRICS.flush_records.observe(records)

    def _write_failed(self, runtime: ShardRuntime, exc: Exception) -> None:
        runtime.fail_writes(exc)
        assert self.nursery is not None
        self.nursery.start_soon(runtime.reload)

    async def flush_periodically(self, interval_ms: int) -> None:
        """``interval`` policy: every interval, make durable the logs written since the last one."""
        while True:
            await trio.sleep(interval_ms / 1000)
            written, self.unflushed = self.unflushed, {}
            for runtime in written.values():
                if runtime.log is not None and runtime.loaded:
                    await trio.to_thread.run_sync(runtime.log.flush)

    def new_shard(self, partition: int) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(partition, self.coordinator_config, self.topics, new_member_id)

    def partition_dir(self, partition: int) -> Path:
        return self.data_dir / f"{OFFSETS_TOPIC}-{partition}"

    def _fire(self, partition: int, key: str, now: int) -> None:
        self.runtimes[partition].fire_timer(key, now)

    @property
    def loading(self) -> int:
        return sum(1 for r in self.runtimes if not r.loaded)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(self.flusher)
            if not self.sync_flush:
                nursery.start_soon(self.flush_periodically, self.flush_interval_ms)
            nursery.start_soon(self.timers.run)
            if self.cleaner_backoff_ms is not None:
                nursery.start_soon(self.compact_forever, self.cleaner_backoff_ms)
            task_status.started()
            started = time.perf_counter()
            # One partition at a time: each shard serves as soon as its own replay is done.
            for runtime in self.runtimes:
                await runtime.load()
            logs.event("shards.loaded", partitions=self.num_partitions,
                       seconds=round(time.perf_counter() - started, 3))

    async def compact_forever(self, backoff_ms: int) -> None:
        """The log cleaner: compacts partitions whose dirty ratio calls for it, one at a time, in a
        worker thread (the log lock is held only for the final renames, so appends go on)."""
        while True:
            await trio.sleep(backoff_ms / 1000)
            for runtime in self.runtimes:
                log = runtime.log
                if log is None or not runtime.loaded:
                    continue
                try:
                    stats = await trio.to_thread.run_sync(clean, log)
                except Exception as exc:
                    logs.warn("log.compaction_failed", partition=runtime.partition, error=repr(exc))
                    continue
                if stats is None:
                    continue
                reclaimed = stats.bytes_before - stats.bytes_after
                METRICS.compactions.inc()
                METRICS.compaction_reclaimed.inc(max(reclaimed, 0))
                logs.event("log.compacted", partition=runtime.partition, bytes_before=stats.bytes_before,
                           bytes_after=stats.bytes_after, records_removed=stats.records_removed,
                           seconds=round(stats.seconds, 3))

    def close(self) -> None:
        self.sync_threads.close()
        for runtime in self.runtimes:
            if runtime.log is not None:
                runtime.log.flush()
                runtime.log.close()
