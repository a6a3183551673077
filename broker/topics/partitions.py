"""The logs of ordinary topics, and what the data plane keeps beside them.

Each partition is a ``storage`` log under ``<log.dirs>/<topic>-<partition>/`` (the same segment,
index and recovery code as ``__consumer_offsets``) plus its in-memory state: the high watermark,
the idempotent producers' sequence table and the fetches parked until new data arrives.

Writes happen off the event loop: produce validates a batch's header, checks its producer's
sequence and queues it with the offset it will get; one writer task hands everything queued to a
worker thread, which appends each batch (the log validates its records) and then, with
``log.flush.policy=sync``, fdatasyncs each written log once. Produces queued while a round runs
share the next round's sync (group commit), and the event loop never waits on the disk. A
produce is answered, and its records become visible to consumers (the high watermark moves),
when its round is done; with ``interval`` a periodic task syncs instead.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

import trio

from broker.observability import logs
from broker.topics.catalog import OFFSETS_TOPIC, Topic, TopicCatalog
from broker.topics.producer_state import ProducerIdAllocator, ProducerStateTable, last_sequence
from storage.cleaner import clean
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log_manager import LogManager
from storage.partition_log import PartitionLog
from storage.retention import apply_retention

TopicPartition = tuple[str, int]
PRODUCER_ID_FILE = "kcoord-producer-ids"
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
RETENTION_CHECK_MS = 300_000  # log.retention.check.interval.ms
_LOG_CONFIG_NAMES = {f.name.replace("_", "."): f.name for f in fields(LogConfig)}


def topic_log_config(defaults: LogConfig, configs: dict[str, str]) -> LogConfig:
    """A topic's log settings: broker defaults overridden by the topic's own configs (other
    topic configs, such as ``max.message.bytes``, are read elsewhere). Raises ``ValueError``."""
    for name, value in configs.items():
        try:
            if name == "max.message.bytes" and int(value) < 0:
                raise ValueError("cannot be negative")
            if name == "message.timestamp.type" and value not in ("CreateTime", "LogAppendTime"):
                raise ValueError("must be CreateTime or LogAppendTime")
            if name in _LOG_CONFIG_NAMES:
                LogConfig.from_kafka({name: value}, defaults)
        except ValueError as exc:
            raise ValueError(f"Invalid value {value} for configuration {name}: {exc}") from None
    known: dict[str, str | None] = {k: v for k, v in configs.items() if k in _LOG_CONFIG_NAMES}
    return LogConfig.from_kafka(known, defaults)


class PartitionState:
    """One partition of an ordinary topic as the data plane sees it. Touched only on the trio
    thread (the log itself is thread-safe)."""

    __slots__ = ("topic", "partition", "log", "high_watermark", "next_offset", "producers", "waiters",
                 "max_message_bytes", "log_append_time", "deleted")

    def __init__(self, topic: str, partition: int, log: PartitionLog, max_message_bytes: int,
                 log_append_time: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.high_watermark = log.end_offset
        self.next_offset = log.end_offset  # where the next submitted batch will land
        self.producers = ProducerStateTable()
        self.waiters: set[trio.Event] = set()
        self.max_message_bytes = max_message_bytes
        self.log_append_time = log_append_time
        self.deleted = False

    def advance(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = offset
            self.wake()

    def wake(self) -> None:
        for event in self.waiters:
            event.set()
        self.waiters.clear()


def _answered() -> None:
    pass


class Append:
    """One produced batch on its way to the log. ``expected`` is the offset it was promised when
    queued (the log end plus everything queued before it); ``first``/``last`` are where it landed."""

    __slots__ = ("raw", "expected", "first", "last", "error", "on_done")

    def __init__(self, raw: bytes, expected: int, on_done: Callable[[], None]) -> None:
        self.raw = raw
        self.expected = expected
        self.first = -1
        self.last = -1
        self.error: Exception | None = None
        self.on_done = on_done


def _rebuild_producers(state: PartitionState, now_ms: int) -> None:
    """Producer sequence state from the batch headers of recent segments."""
    table = state.producers
    for seg in state.log.segments():
        if seg.size == 0 or now_ms - seg.max_timestamp > PRODUCER_ID_EXPIRATION_MS:
            continue
        for _pos, h in seg.scan_headers():
            pid = h[9]
            if pid >= 0 and h[11] >= 0:
                base = h[0]
                table.record(pid, h[10], h[11], last_sequence(h[11], h[6]), base, base + h[6], h[8])


def _flush_logs(states: Iterable[PartitionState]) -> set[PartitionState]:
    failed = set()
    for state in states:
        try:
            state.log.flush()
        except (OSError, StorageError) as exc:
            failed.add(state)
            if not state.deleted:
                logs.event("log.flush_failed", 40, topic=state.topic, partition=state.partition, error=repr(exc))
    return failed


class TopicLogs:
    def __init__(self, data_dir: Path, catalog: TopicCatalog, defaults: LogConfig, *, max_message_bytes: int,
                 sync_flush: bool, flush_interval_ms: int, retention_check_ms: int = RETENTION_CHECK_MS) -> None:
        self.data_dir = data_dir
        self.catalog = catalog
        self.defaults = defaults
        self.max_message_bytes = max_message_bytes
        self.sync_flush = sync_flush
        self.flush_interval_ms = flush_interval_ms
        self.retention_check_ms = retention_check_ms
        self.manager = LogManager(data_dir, defaults)
        self.producer_ids = ProducerIdAllocator(data_dir / PRODUCER_ID_FILE)
        self.states: dict[TopicPartition, PartitionState] = {}
        self.nursery: trio.Nursery | None = None
        self._pending: dict[PartitionState, list[Append]] = {}
        self._unflushed: set[PartitionState] = set()
        self._callbacks: list[Callable[[], None]] = []
        self._work = trio.Event()

    @classmethod
    def for_config(cls, data_dir: Path, catalog: TopicCatalog, config: Any) -> TopicLogs:
        defaults = LogConfig(segment_bytes=config["log.segment.bytes"], retention_ms=config["log.retention.ms"],
                             retention_bytes=config["log.retention.bytes"])
        return cls(data_dir, catalog, defaults, max_message_bytes=config["message.max.bytes"],
                   sync_flush=config["log.flush.policy"] == "sync", flush_interval_ms=config["log.flush.interval.ms"],
                   retention_check_ms=config["log.retention.check.interval.ms"])

    # ---- partitions -------------------------------------------------------------------------

    def config_for(self, topic: Topic) -> LogConfig:
        return topic_log_config(self.defaults, topic.configs)

    def _open(self, topic: Topic, partition: int) -> PartitionState:
        log = self.manager.get_or_create(topic.name, partition, self.config_for(topic), topic.topic_id)
        report = self.manager.reports.get((topic.name, partition))
        if report is not None and not report.clean:
            logs.warn("log.recovered", topic=topic.name, partition=partition, dropped_bytes=report.bytes_dropped,
                      details=report.summary())
        max_bytes = int(topic.configs.get("max.message.bytes", self.max_message_bytes))
        append_time = topic.configs.get("message.timestamp.type", "CreateTime") == "LogAppendTime"
        state = PartitionState(topic.name, partition, log, max_bytes, append_time)
        self.states[(topic.name, partition)] = state
        return state

    def open_all(self) -> int:
        """Open (recovering as needed) every partition on disk that belongs to a known topic and
        rebuild its producer state. Blocking: runs in a worker thread before serving."""
        now = int(time.time() * 1000)
        count = 0
        for name, partition in self.manager.existing_partitions():
            if name == OFFSETS_TOPIC:
                continue
            topic = self.catalog.get(name)
            if topic is None or partition >= topic.partitions:
                logs.warn("log.orphan_partition", topic=name, partition=partition)
                continue
            state = self._open(topic, partition)
            _rebuild_producers(state, now)
            self.producer_ids.at_least(state.producers.max_producer_id())
            count += 1
        return count

    def get(self, topic: str, partition: int) -> PartitionState | None:
        """The partition's state, creating its log if the topic exists but the log does not yet."""
        state = self.states.get((topic, partition))
        if state is not None:
            return state
        t = self.catalog.get(topic)
        if t is None or t.internal or not 0 <= partition < t.partitions:
            return None
        return self._open(t, partition)

    def create_topic(self, topic: Topic) -> None:
        for p in range(topic.partitions):
            self.get(topic.name, p)

    def delete_topic(self, name: str) -> None:
        for tp in [tp for tp in self.states if tp[0] == name]:
            state = self.states.pop(tp)
            state.deleted = True
            self._unflushed.discard(state)
            state.wake()
        self.manager.delete_topic(name)

    # ---- the write path ----------------------------------------------------------------------

    def submit(self, state: PartitionState, append: Append) -> None:
        """Queue a validated batch for ``state``'s log; ``append.on_done`` runs once it is written
        (and, with the sync policy, durable) or has failed."""
        pending = self._pending.get(state)
        if pending is None:
            pending = self._pending[state] = []
        pending.append(append)
        self._work.set()

    def when_durable(self, callback: Callable[[], None]) -> None:
        """Calls ``callback`` once everything submitted so far is written and durable per the policy."""
        self._callbacks.append(callback)
        self._work.set()

    def _write_round(self, work: dict[PartitionState, list[Append]]) -> set[PartitionState]:
        """Worker thread: append every queued batch, then (sync policy) fdatasync each log once."""
        for state, appends in work.items():
            for a in appends:
                try:
                    a.first, a.last = state.log.append_batch(a.raw)
                except Exception as exc:  # reported per batch; the log refused it whole
                    a.error = exc
        return _flush_logs(work) if self.sync_flush else set()

    async def _writer(self) -> None:
        while True:
            await self._work.wait()
            self._work = trio.Event()
            work, self._pending = self._pending, {}
            callbacks, self._callbacks = self._callbacks, []
            failed: set[PartitionState] = set()
            if work:
                failed = await trio.to_thread.run_sync(self._write_round, work)
            for state, appends in work.items():
                if any(a.error is not None or a.first != a.expected for a in appends):
                    self._resync(state)
                if state not in failed:
                    state.advance(state.log.end_offset if not state.deleted else state.high_watermark)
                if not self.sync_flush:
                    self._unflushed.add(state)
                for a in appends:
                    if state in failed and a.error is None:
                        a.error = OSError("the write could not be made durable")
                    a.on_done()
                    # The callback's closure refers back to this Append (through the request's
                    # list of appends): a reference cycle that only the cyclic collector would
                    # free, keeping each produced batch in memory until a full collection.
                    a.on_done = _answered
            for callback in callbacks:
                callback()

    def _resync(self, state: PartitionState) -> None:
        """A queued batch was refused by the log: the offsets handed to the batches behind it were
        guesses that did not hold, so predictions and producer state restart from the log."""
        if state.deleted:
            return
        state.next_offset = state.log.end_offset
        state.producers = ProducerStateTable()
        _rebuild_producers(state, int(time.time() * 1000))

    async def _flush_periodically(self) -> None:
        while True:
            await trio.sleep(self.flush_interval_ms / 1000)
            states, self._unflushed = self._unflushed, set()
            if states:
                await trio.to_thread.run_sync(_flush_logs, list(states))

    # ---- retention --------------------------------------------------------------------------

    def _retention_pass(self, states: list[PartitionState]) -> None:
        for state in states:
            try:
                removed = apply_retention(state.log)
                if removed:
                    logs.event("log.retention", topic=state.topic, partition=state.partition, segments=len(removed),
                               log_start_offset=state.log.log_start_offset)
                if state.log.config.compact:
                    stats = clean(state.log)
                    if stats is not None:
                        logs.event("log.compacted", topic=state.topic, partition=state.partition,
                                   bytes_before=stats.bytes_before, bytes_after=stats.bytes_after)
            except StorageError:
                continue  # deleted meanwhile
        self.manager.checkpoint()

    async def _retention(self) -> None:
        while True:
            await trio.sleep(self.retention_check_ms / 1000)
            now = int(time.time() * 1000)
            states = list(self.states.values())
            for state in states:
                state.producers.expire(now, PRODUCER_ID_EXPIRATION_MS)
            await trio.to_thread.run_sync(self._retention_pass, states)

    # ---- running ----------------------------------------------------------------------------

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        assert self.nursery is not None, "topic logs are not running"
        self.nursery.start_soon(fn, *args)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        started = time.perf_counter()
        count = await trio.to_thread.run_sync(self.open_all)
        logs.event("topic_logs.opened", partitions=count, seconds=round(time.perf_counter() - started, 3))
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            nursery.start_soon(self._writer)
            if not self.sync_flush:
                nursery.start_soon(self._flush_periodically)
            nursery.start_soon(self._retention)
            task_status.started()

    def close(self) -> None:
        """Flush and close every log and write the checkpoints that make the next start quick."""
        self.manager.close()
        self.states.clear()


# ---- reading end offsets without a broker -----------------------------------------------------
