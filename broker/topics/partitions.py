"""The data plane's view of ordinary topics: what it keeps beside each partition log.

The logs themselves (``<log.dirs>/<topic>-<partition>/``) belong to the log runtime, which writes,
flushes, retains and compacts them and moves their high watermark once a write is durable. Here
each partition adds what produce needs: the offset the next queued batch will get, the idempotent
producers' sequence table, and the topic's message limits. Produce validates a batch's header,
checks its producer's sequence and queues it with the offset it will get; it is answered, and its
records become visible to consumers, when the runtime's pass that wrote it is durable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any

import trio

from broker.cluster.assignment import owning_partition
from broker.cluster.node import ClusterNode
from broker.log_runtime.runtime import BatchWrite, LogRuntime, Partition
from broker.observability import logs
from broker.topics.catalog import EVENTS_TOPIC, OFFSETS_TOPIC, Topic, TopicCatalog
from broker.topics.changes import TopicDeleted
from broker.topics.partition_txns import PartitionTxns
from broker.topics.producer_state import ProducerIdAllocator, ProducerStateTable, last_sequence
from protocol.errors import ErrorCode
from protocol.payloads.transaction_log_records import TRANSACTION_STATE_TOPIC
from protocol.record_batch import (
    CONTROL_MASK,
    TRANSACTIONAL_MASK,
    ControlType,
    CorruptBatchError,
    build_end_txn_marker,
    control_type_of,
    decode_records,
)
from storage.config import LogConfig
from storage.errors import FencedError, LogClosedError, StorageError
from storage.layout import partition_dir_name
from storage.partition_log import PartitionLog

TopicPartition = tuple[str, int]
PRODUCER_ID_FILE = "kcoord-producer-ids"
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
REOPEN_DELAY_S = 0.1
# How often a cluster node looks for directories of deleted topics that nobody removed (and at once
# when it learns of a deletion).
LEFTOVER_SCAN_S = 5.0
# Partitions owned through another key (the journal's) or by the coordinators: never leftovers.
SHARE_STATE_TOPIC = "__share_group_state"
_OWNED_ELSEWHERE = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC, EVENTS_TOPIC})
_LOG_CONFIG_NAMES = {f.name.replace("_", "."): f.name for f in fields(LogConfig)}


# Every topic config Apache Kafka 4.4 knows (what DescribeConfigs lists for a topic): a topic is
# created only with these, as Kafka refuses any other name with INVALID_CONFIG.
KAFKA_TOPIC_CONFIGS = frozenset({
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "errors.deadletterqueue.group.enable",
    "file.delete.delay.ms", "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
    "index.interval.bytes", "leader.replication.throttled.replicas", "local.retention.bytes",
    "local.retention.ms", "max.compaction.lag.ms", "max.decompressed.message.bytes", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable", "remote.log.delete.on.disable",
    "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
})


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


# Partition logs a new topic opens between two turns of the event loop (~5 ms of work).
_OPEN_PER_TURN = 2

class PartitionState:
    """One partition of an ordinary topic as the data plane sees it. Touched only on the trio
    thread (the log itself is thread-safe)."""

    __slots__ = ("topic", "topic_id", "partition", "part", "next_offset", "producers", "txns", "max_message_bytes",
                 "log_append_time", "deleted", "recover", "start_moving")

    def __init__(self, topic: str, partition: int, part: Partition, max_message_bytes: int,
                 log_append_time: bool, recover: Callable[[PartitionState], None], topic_id: bytes = b"") -> None:
        self.topic = topic
        # Which topic of that name: one deleted and created again is another topic, with other logs.
        self.topic_id = topic_id
        self.partition = partition
        self.part = part
        self.next_offset = part.log.end_offset  # where the next submitted batch will land
        self.producers = ProducerStateTable()
        self.txns = PartitionTxns()
        self.max_message_bytes = max_message_bytes
        self.log_append_time = log_append_time
        self.deleted = False
        self.recover = recover
        # A DeleteRecords moving this log's start, until the new start is durable and applied: a
        # read of the start that arrives meanwhile waits for it, as it would behind the request on
        # a Kafka broker (which serves a connection's requests one at a time).
        self.start_moving: trio.Event | None = None

    def on_write_failed(self, exc: Exception) -> None:
        """The runtime's failure policy: this partition's log is reopened from disk."""
        del exc  # the log runtime has logged it
        self.recover(self)

    @property
    def log(self) -> PartitionLog:
        return self.part.log

    @property
    def high_watermark(self) -> int:
        return self.part.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Kafka's: the first offset of the oldest open transaction, never below the log start
        (records deleted past an open transaction), or the high watermark."""
        hw = self.part.high_watermark
        return max(self.txns.last_stable_offset(hw), min(self.log.log_start_offset, hw))


def _marker_committed(log: PartitionLog, offset: int) -> tuple[bool, int] | None:
    """Whether the control batch at ``offset`` is a COMMIT (True) or ABORT (False) marker, and
    the epoch of the coordinator that wrote it."""
    for batch in log.batches(offset):
        for record in decode_records(batch):
            kind = control_type_of(record)
            if kind in (ControlType.COMMIT, ControlType.ABORT):
                value = record.value or b""
                epoch = int.from_bytes(value[2:6], "big", signed=True) if len(value) >= 6 else -1
                return kind == ControlType.COMMIT, epoch
        return None
    return None


def _rebuild_producers(state: PartitionState, now_ms: int) -> None:
    """Producer sequence state from the batch headers of recent segments, and the open and aborted
    transactions from the transactional batches and markers of the whole log."""
    table = state.producers
    events: list[tuple[int, int, bool, bool | None]] = []
    for seg in state.log.segments():
        if seg.size == 0:
            continue
        recent = now_ms - seg.max_timestamp <= PRODUCER_ID_EXPIRATION_MS
        for _pos, h in seg.scan_headers():
            pid = h[9]
            attributes = h[5]
            if attributes & TRANSACTIONAL_MASK and pid >= 0:
                if attributes & CONTROL_MASK:
                    marker = _marker_committed(state.log, h[0])
                    if marker is not None:
                        events.append((pid, h[0], True, marker[0]))
                        table.note_marker(pid, h[10], marker[1], h[8])
                    continue
                events.append((pid, h[0], False, None))
            if recent and pid >= 0 and h[11] >= 0:
                base = h[0]
                table.record(pid, h[10], h[11], last_sequence(h[11], h[6]), base, base + h[6], h[8])
    state.txns = PartitionTxns.rebuild(events)
    try:
        rewritten = state.log.reconcile_txn_index(state.txns.aborted)
    except OSError as exc:  # only the index is at stake; the next open tries again
        logs.warn("log.txn_index_failed", topic=state.topic, partition=state.partition, error=str(exc))
        return
    if rewritten:
        logs.event("log.txn_index_rewritten", topic=state.topic, partition=state.partition, segments=rewritten)


class TopicLogs:
    def __init__(self, runtime: LogRuntime, catalog: TopicCatalog, *, max_message_bytes: int,
                 cluster: ClusterNode | None = None) -> None:
        self.runtime = runtime
        # Cluster mode: this node serves only the partitions it owns, opened when it claims them
        # (one opening at a time per partition).
        self.cluster = cluster
        self.gain_locks: dict[TopicPartition, trio.Lock] = {}
        # Partitions this node claimed whose log is still being opened (the openings under way or
        # queued), and what waits for them to be served or given up: Metadata names this node the
        # leader from its claim on, so produce requests reach it before it serves (``when_opened``).
        self.opening: dict[TopicPartition, int] = {}
        self.opened_waiters: dict[TopicPartition, list[Callable[[], None]]] = {}
        self.catalog = catalog
        self.defaults = runtime.manager.config
        self.max_message_bytes = max_message_bytes
        # The broker's log.message.timestamp.type (a dynamic broker config).
        self.timestamp_type = "CreateTime"
        self.producer_ids = ProducerIdAllocator(runtime.data_dir / PRODUCER_ID_FILE, shared=cluster is not None)
        self.states: dict[TopicPartition, PartitionState] = {}
        # Cluster mode: directories of deleted topics last found on disk (``leftovers``).
        self._leftovers: list[TopicPartition] = []
        self._next_scan = 0.0
        runtime.retention_hooks.append(self._expire_producers)

    # ---- partitions -------------------------------------------------------------------------

    def config_for(self, topic: Topic) -> LogConfig:
        return topic_log_config(self.defaults, topic.configs)

    def _open(self, topic: Topic, partition: int, part: Partition | None = None) -> PartitionState:
        if part is None:
            part = self.runtime.open(topic.name, partition, self.config_for(topic), topic.topic_id)
        part = self.runtime.adopt(part)
        report = self.runtime.manager.reports.get((topic.name, partition))
        if report is not None and not report.clean:
            logs.warn("log.recovered", topic=topic.name, partition=partition, dropped_bytes=report.bytes_dropped,
                      details=report.summary())
        max_bytes = int(topic.configs.get("max.message.bytes", self.max_message_bytes))
        append_time = topic.configs.get("message.timestamp.type", self.timestamp_type) == "LogAppendTime"
        state = PartitionState(topic.name, partition, part, max_bytes, append_time, self._recover, topic.topic_id)
        part.owner = state
        self.states[(topic.name, partition)] = state
        return state

    def open_all(self) -> int:
        """Open (recovering as needed) every partition on disk that belongs to a known topic and
        rebuild its producer state. Blocking: runs before serving."""
        now = int(time.time() * 1000)
        count = 0
        if self.cluster is not None:
            return 0  # partitions open as this node claims them (``gain``)
        for name, partition in self.runtime.manager.existing_partitions():
            if name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC):
                continue  # the coordinators open their own partitions
            topic = self.catalog.get(name)
            if topic is not None and topic.internal:
                continue  # its owner opens it (the rebalance journal)
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
            if self.cluster is None:
                return state
            current = self.catalog.topics.get(topic)
            if current is None or current.topic_id != state.topic_id:
                return None  # an earlier topic of that name, which this node has not let go of yet
            return state if self.cluster.owns((topic, partition)) else None
        if self.cluster is not None:
            return None
        t = self.catalog.get(topic)
        if t is None or t.internal or not 0 <= partition < t.partitions:
            return None
        return self._open(t, partition)

    def record_at(self, topic: str, partition: int, offset: int) -> tuple[bytes | None, bytes | None] | None:
        """(key, value) of the record at ``offset`` of a partition this node serves, below its high
        watermark; None when it is not there (or cannot be read)."""
        state = self.get(topic, partition)
        if state is None or state.deleted or offset >= state.high_watermark:
            return None
        try:
            for batch in state.log.batches(offset):
                if batch.base_offset > offset:
                    return None
                if batch.last_offset >= offset:
                    for record in decode_records(batch):
                        if batch.base_offset + record.offset_delta == offset:
                            return record.key, record.value
                    return None
        except (OSError, StorageError, CorruptBatchError) as exc:
            logs.warn("log.read_failed", topic=topic, partition=partition, offset=offset, error=repr(exc))
        return None

    def readable(self, topic: Topic, partition: int) -> Partition | int:
        """The log runtime's partition that Fetch and ListOffsets read (up to its high watermark,
        the durable end), ``__consumer_offsets`` included, or the error code for it."""
        if topic.internal:
            if not 0 <= partition < topic.partitions:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if self.cluster is not None and not self.cluster.owns(owning_partition(topic.name, partition)):
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            part = self.runtime.get(topic.name, partition)
            # Not open yet: its shard is loading (or the journal is switched off).
            return part if part is not None else ErrorCode.LEADER_NOT_AVAILABLE
        state = self.get(topic.name, partition)
        if state is None:
            return self.not_served(topic, partition)
        return state.part

    def not_served(self, topic: Topic, partition: int) -> int:
        """Why a partition of a known topic has no state here: another node leads it (cluster
        mode) or it does not exist."""
        if self.cluster is not None and 0 <= partition < topic.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def create_topic(self, topic: Topic) -> None:
        if self.cluster is not None:
            self.cluster.poke()  # the owners claim the new partitions and open them
            self.resume_owned(topic.name)
            return
        self._open_soon(topic, 0)

    def grow_topic(self, topic: Topic, old_count: int) -> None:
        """Opens the logs of the partitions ``topic`` gained beyond ``old_count``."""
        if self.cluster is not None:
            self.cluster.poke()
            return
        self._open_soon(topic, old_count)

    def _open_soon(self, topic: Topic, start: int) -> None:
        """Opens a new topic's partition logs from ``start`` on, a few at a time in a task of its
        own: opened in one go, a topic of 1,000 partitions held the event loop (every group's
        heartbeats) for seconds. A request for a partition not opened yet opens it on the spot
        (``get``); opening twice is a no-op."""
        if self.runtime.nursery is None:  # not serving (tools, tests of the registry alone)
            for p in range(start, topic.partitions):
                self.get(topic.name, p)
            return
        self.runtime.spawn(self._open_range, topic, start)

    async def _open_range(self, topic: Topic, start: int) -> None:
        for p in range(start, topic.partitions):
            current = self.catalog.get(topic.name)
            if current is None or current.topic_id != topic.topic_id or p >= current.partitions:
                return  # deleted (or deleted and created again) meanwhile
            self.get(topic.name, p)
            if p % _OPEN_PER_TURN == _OPEN_PER_TURN - 1:
                await trio.sleep(0)

    def reconfigure(self, topic: Topic) -> None:
        """The topic's configs (or the broker defaults under them) changed: its open partitions
        follow at once (retention and compaction on their next pass, produce on its next batch)."""
        config = self.config_for(topic)
        max_bytes = int(topic.configs.get("max.message.bytes", self.max_message_bytes))
        append_time = topic.configs.get("message.timestamp.type", self.timestamp_type) == "LogAppendTime"
        for (name, _partition), state in self.states.items():
            if name == topic.name:
                state.log.reconfigure(config)
                state.max_message_bytes = max_bytes
                state.log_append_time = append_time

    def delete_topic(self, name: str) -> None:
        if self.cluster is not None:
            # Only a partition's owner changes its files: each owner, this node included, removes
            # its partitions' directories when it lets them go (``release``). Here this node only
            # stops serving what it owns of the topic.
            for tp in [tp for tp in self.states if tp[0] == name]:
                self.lose(tp)
            self._next_scan = 0.0
            self.cluster.poke()
            return
        for tp in [tp for tp in self.states if tp[0] == name]:
            self.states.pop(tp).deleted = True
        self.runtime.delete_topic(name)

    # ---- deleted topics in a cluster -----------------------------------------------------------

    def deleted_elsewhere(self, change: TopicDeleted) -> None:
        """Another node deleted a topic: stop serving what this node owns of it at once. Its
        directories go when this node releases the claims (the topic's partitions are no longer
        to be owned), or, for a topic created again meanwhile, when this node opens the new one."""
        for p in range(change.partitions):
            state = self.states.get((change.topic, p))
            if state is not None and state.topic_id == change.topic_id:
                self.lose((change.topic, p))
        self._next_scan = 0.0

    def resume_owned(self, name: str) -> None:
        """A topic was created: the partitions of it this node still holds claims for, from a
        topic of the same name deleted a moment ago, are opened afresh under those claims (the
        old topic's directory, if still there, is removed on the way)."""
        assert self.cluster is not None
        topic = self.catalog.get(name)
        if topic is None or self.runtime.nursery is None:
            return
        for p in range(topic.partitions):
            key = (name, p)
            epoch = self.cluster.mine.get(key)
            if epoch is not None and key not in self.states and self.cluster.owns(key):
                self.spawn_gain(key, epoch)

    def _live_topic_id(self, key: TopicPartition) -> bytes | None:
        """The topic id of the live partition ``key``, None if no topic has that partition."""
        topic = self.catalog.get(key[0])
        if topic is None or not 0 <= key[1] < topic.partitions:
            return None
        return topic.topic_id

    async def _discard_stale(self, key: TopicPartition) -> None:
        """Removes ``key``'s directory if it is a deleted topic's (its ``partition.metadata`` names
        a topic the catalog lists as deleted), under this node's claim, checked right before the
        rename: with the claim over, nothing is touched (the next claimant does it)."""
        assert self.cluster is not None
        fence = self.cluster.fence_for(key)
        if not fence.ok:
            return
        self.catalog.refresh()
        deleted = frozenset(self.catalog.deleted)
        lock = self.gain_locks.setdefault(key, trio.Lock())
        async with lock:
            try:
                removed = await trio.to_thread.run_sync(self.runtime.manager.delete_partition, key[0], key[1],
                                                        fence, deleted)
            except (OSError, StorageError) as exc:
                logs.warn("partition.delete_failed", topic=key[0], partition=key[1], error=repr(exc))
                removed = False
        if not lock.locked() and not lock.statistics().tasks_waiting:
            self.gain_locks.pop(key, None)
        if removed:
            logs.event("partition.deleted", topic=key[0], partition=key[1], epoch=fence.epoch)

    def leftovers(self) -> list[TopicPartition]:
        """Directories of deleted topics (``partition.metadata`` names a topic the catalog lists
        as deleted) that nobody owns, their owner dead before it removed them: listed among the
        partitions to own, so that the node that claims one, like any partition in etcd, removes
        it under that claim when it releases it (it is to be owned only while nobody owns it). A
        directory of a topic merely unknown here is left alone."""
        if self.cluster is None:
            return []
        now = time.monotonic()
        if now >= self._next_scan:
            self._next_scan = now + LEFTOVER_SCAN_S
            manager = self.runtime.manager
            self._leftovers = [
                (name, p) for name, p in manager.existing_partitions()
                if name not in _OWNED_ELSEWHERE and not self._is_live(name, p)
                and manager.recorded_topic_id(manager.log_dir / partition_dir_name(name, p)) in self.catalog.deleted]
        owners = self.cluster.owners
        found = [key for key in self._leftovers if key not in owners and not self._is_live(*key)
                 and os.path.isdir(self.runtime.data_dir / partition_dir_name(*key))]
        self._leftovers = sorted(found + [key for key in self._leftovers if key in owners])
        return found

    def _is_live(self, name: str, partition: int) -> bool:
        topic = self.catalog.topics.get(name)
        return topic is not None and (topic.internal or partition < topic.partitions)

    # ---- the write path ----------------------------------------------------------------------

    def submit(self, state: PartitionState, write: BatchWrite) -> None:
        """Queue a validated batch for ``state``'s log; ``write.on_done`` runs once it is written
        (and, with the sync policy, durable) or has failed."""
        done = write.on_done

        def finished() -> None:
            if write.error is not None or write.first != write.expected:
                self._resync(state)
            done()

        write.on_done = finished
        self.runtime.append_batch(state.part, write)

    def write_marker(self, state: PartitionState, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, transaction_version: int, done: Callable[[int], None]) -> None:
        """Queues a COMMIT/ABORT marker for ``producer_id``; ``done(error_code)`` once it is durable
        (NONE) or failed (KAFKA_STORAGE_ERROR), or at once with INVALID_PRODUCER_EPOCH when the
        producer's epoch here refuses it by ``transaction_version``'s rule. The transaction ends on
        the partition (its last stable offset moves past it) once the marker is durable, not before."""
        check = state.producers.check_marker(producer_id, producer_epoch, transaction_version,
                                             producer_id in state.txns.ongoing)
        if check.error_code:
            logs.warn("log.marker_refused", topic=state.topic, partition=state.partition,
                      error=ErrorCode(check.error_code).name, reason=check.message)
            done(check.error_code)
            return
        offset = state.next_offset
        state.next_offset += 1
        now = int(time.time() * 1000)
        raw = build_end_txn_marker(0, producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
                                   coordinator_epoch=coordinator_epoch, timestamp=now)
        write = BatchWrite(raw, offset, lambda: None)

        def finished() -> None:
            ok = write.error is None
            if ok:
                aborted = state.txns.on_marker(producer_id, write.first, commit)
                if aborted is not None:
                    try:
                        state.log.add_aborted_txn(aborted)
                    except (LogClosedError, OSError) as exc:  # the index is rewritten from the log at open
                        logs.warn("log.txn_index_failed", topic=state.topic, partition=state.partition,
                                  error=str(exc))
                state.producers.note_marker(producer_id, producer_epoch, coordinator_epoch, now)
            done(ErrorCode.NONE if ok else ErrorCode.KAFKA_STORAGE_ERROR)

        write.on_done = finished
        self.submit(state, write)

    def when_durable(self, state: PartitionState, callback: Callable[[], None]) -> None:
        """Calls ``callback`` once everything submitted to ``state`` so far is durable (or failed)."""
        state.part.when_durable(lambda _ok: callback())

    def _resync(self, state: PartitionState) -> None:
        """A queued batch was refused by the log: the offsets handed to the batches behind it were
        guesses that did not hold, so predictions and producer state restart from the log."""
        if state.deleted or state.part.failed or state.part.closed:
            # The log failed and is being reopened (or let go of): the reopening resyncs from the
            # log it opens, and until then produce is refused before any check (produce.submit).
            return
        state.next_offset = state.log.end_offset
        state.producers = ProducerStateTable()
        _rebuild_producers(state, int(time.time() * 1000))

    def _recover(self, state: PartitionState) -> None:
        key = (state.topic, state.partition)
        if self.cluster is not None and not self.cluster.owns(key):
            self.lose(key)
            self.cluster.relinquish(key, "write refused: not certainly the owner")
            return
        self.runtime.spawn(self._reopen, state)

    # ---- ownership (cluster mode) ---------------------------------------------------------------

    def spawn_gain(self, key: TopicPartition, epoch: int) -> None:
        """Opens ``key``'s log for the claim of ``epoch`` in the background; from now until the
        opening ends the partition counts as opening (``when_opened``)."""
        self.runtime.spawn(self.gain, key, epoch)
        self.opening[key] = self.opening.get(key, 0) + 1

    def when_opened(self, key: TopicPartition, callback: Callable[[], None]) -> None:
        """Calls ``callback`` once ``key`` is no longer being opened: served, or given up (the
        claim lost, or handed back). At once if it is not being opened."""
        if key in self.opening:
            self.opened_waiters.setdefault(key, []).append(callback)
        else:
            callback()

    async def gain(self, key: TopicPartition, epoch: int) -> None:
        """This node now owns ``key``: open its log (recovering it) at the new owner epoch, then
        serve it. Until then fetch answers NOT_LEADER_OR_FOLLOWER (clients retry), and produce
        requests wait (``when_opened``)."""
        try:
            await self._gain_locked(key, epoch)
        finally:
            left = self.opening.get(key, 1) - 1
            if left > 0:
                self.opening[key] = left
            else:
                self.opening.pop(key, None)
                for callback in self.opened_waiters.pop(key, []):
                    callback()

    async def _gain_locked(self, key: TopicPartition, epoch: int) -> None:
        assert self.cluster is not None
        lock = self.gain_locks.setdefault(key, trio.Lock())
        async with lock:
            stale = self.states.get(key)
            if stale is not None and stale.part.fence is not self.cluster.fence_for(key):
                # Served under an earlier claim of this node: nothing of that tenure (its segment
                # list, sizes, indexes, high watermark) may serve this one.
                self.lose(key)
            if key not in self.states:
                if self._claim_is(key, epoch):
                    await self._gain(key, epoch)
                else:
                    self._hand_back(key, epoch, "not certainly the owner when its log was to open")
        if not lock.locked() and not lock.statistics().tasks_waiting:
            self.gain_locks.pop(key, None)

    def _hand_back(self, key: TopicPartition, epoch: int | None, reason: str) -> None:
        """This node still holds the claim of ``key`` (at ``epoch``, if given) but does not serve it
        and will not open it (its lease could not be trusted a moment): give the claim up, so that
        it is claimed afresh and opened, rather than stay claimed and unserved. Metadata would go
        on naming this node the leader, and every client would be told NOT_LEADER_OR_FOLLOWER for
        as long as the claim lasts."""
        assert self.cluster is not None
        held = self.cluster.mine.get(key)
        if held is not None and (epoch is None or held == epoch) and key not in self.states:
            self.cluster.relinquish(key, reason)

    def _claim_is(self, key: TopicPartition, epoch: int) -> bool:
        """Whether this node holds ``key`` now under the claim of ``epoch`` (not a later one)."""
        assert self.cluster is not None
        return self.cluster.owns(key) and self.cluster.fence_for(key).epoch == epoch

    async def _gain(self, key: TopicPartition, epoch: int) -> None:
        assert self.cluster is not None
        topic = self.catalog.get(key[0])
        if topic is None or not 0 <= key[1] < topic.partitions:
            return

        # A deleted topic's directory where this topic's partition goes is replaced (under the claim).
        deleted = frozenset(self.catalog.deleted)
        fence = self.cluster.fence_for(key)

        def open_log() -> Partition:
            part = self.runtime.open(key[0], key[1], self.config_for(topic), topic.topic_id, deleted=deleted)
            if part.fence is not fence:
                # The claim of ``epoch`` ended while this thread waited, and a later one began: the
                # log was opened under that one, which opens its own. Let go of it untouched.
                part.log.abandon()
                raise FencedError(f"{key[0]}-{key[1]}: the claim at epoch {epoch} ended before its log opened")
            part.log.begin_epoch(epoch)
            return part

        try:
            part = await trio.to_thread.run_sync(open_log)
        except (OSError, StorageError) as exc:
            self._report_replaced(key, topic, epoch)
            # Fenced (the claim ended meanwhile) or the disk failed; a claim still held tries again.
            logs.warn("partition.open_failed", topic=key[0], partition=key[1], error=repr(exc))
            if self._claim_is(key, epoch):
                await trio.sleep(REOPEN_DELAY_S)
                self.spawn_gain(key, epoch)
            else:
                self._hand_back(key, epoch, "not certainly the owner while its log opened")
            return
        self._report_replaced(key, topic, epoch)
        if self.cluster.fence_for(key) is not fence or not self._claim_is(key, epoch) \
                or self.catalog.get(key[0]) is not topic:
            # Lost while opening (and perhaps claimed again: that claim opens the log afresh). What
            # was opened for this claim serves nothing.
            part.log.close()
            self.runtime.manager.forget(*key)
            if self.cluster.fence_for(key) is fence:
                self._hand_back(key, epoch, "not certainly the owner when its log opened")
            return
        state = self._open(topic, key[1], part)
        _rebuild_producers(state, int(time.time() * 1000))
        self.producer_ids.at_least(state.producers.max_producer_id())
        logs.event("partition.took_over", topic=key[0], partition=key[1], epoch=part.log.leader_epoch,
                   end_offset=part.log.end_offset)

    def _report_replaced(self, key: TopicPartition, topic: Topic, epoch: int) -> None:
        """Logs that opening ``key`` replaced a deleted topic's directory (``LogManager.replaced``)."""
        if key in self.runtime.manager.replaced:
            self.runtime.manager.replaced.discard(key)
            logs.event("partition.deleted", topic=key[0], partition=key[1], epoch=epoch,
                       replaced_by=topic.topic_id.hex())

    def lose(self, key: TopicPartition) -> None:
        state = self.states.pop(key, None)
        if state is not None:
            state.deleted = True  # no reopen: the partition is another node's now
            self.runtime.close_partition(state.part)

    async def release(self, key: TopicPartition) -> None:
        """Controlled hand-over: what was queued becomes durable (and is acknowledged), then close.
        A partition of a deleted topic has its directory removed, still under this node's claim."""
        state = self.states.get(key)
        if state is not None:
            await state.part.settle(5)
        self.lose(key)
        live = self._live_topic_id(key)
        if self.cluster is not None and (state is None or live is None or state.topic_id != live):
            await self._discard_stale(key)

    async def _reopen(self, state: PartitionState) -> None:
        """A write failed: reopen the log (recovery drops what was not written whole), then
        restart offset predictions and producer state from it. Produce answers
        KAFKA_STORAGE_ERROR meanwhile, which producers retry."""
        tenure = state.part.fence  # the claim this state serves (None on a single broker)
        self.runtime.close_partition(state.part)
        await trio.sleep(REOPEN_DELAY_S)
        topic = self.catalog.get(state.topic)
        key = (state.topic, state.partition)
        if state.deleted or topic is None or topic.topic_id != state.topic_id:
            return
        if self.cluster is not None and not self.cluster.owns(key):
            self.lose(key)
            self._hand_back(key, tenure.epoch if tenure is not None else None, "not certainly the owner to reopen")
            return
        try:
            part = await trio.to_thread.run_sync(
                self.runtime.open, state.topic, state.partition, self.config_for(topic), topic.topic_id, state)
        except (OSError, StorageError) as exc:
            logs.event("log.reopen_failed", 40, topic=state.topic, partition=state.partition, error=repr(exc))
            if self.cluster is not None and not self.cluster.owns(key):
                self.lose(key)
                self._hand_back(key, tenure.epoch if tenure is not None else None, "not certainly the owner to reopen")
                return
            self.runtime.spawn(self._reopen, state)
            return
        if state.deleted or (self.cluster is not None and (not self.cluster.owns(key) or part.fence is not tenure)):
            # Lost meanwhile (perhaps claimed again since: that claim opens its own log): let go of
            # what was opened, untouched.
            part.log.close()
            self.runtime.manager.forget(*key)
            if not state.deleted:
                self.lose(key)
                if tenure is not None and self.cluster is not None and self.cluster.fence_for(key) is tenure:
                    self._hand_back(key, tenure.epoch, "not certainly the owner when its log reopened")
            return
        state.part = self.runtime.adopt(part)
        self._resync(state)
        logs.event("log.reopened", topic=state.topic, partition=state.partition, end_offset=part.log.end_offset)

    def _expire_producers(self) -> None:
        now = int(time.time() * 1000)
        for state in self.states.values():
            state.producers.expire(now, PRODUCER_ID_EXPIRATION_MS)
            state.txns.forget_before(state.log.log_start_offset)

    # ---- running ----------------------------------------------------------------------------

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        self.runtime.spawn(fn, *args)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Opens the topic logs on disk (the runtime must be running), then reports ready."""
        started = time.perf_counter()
        count = await trio.to_thread.run_sync(self.open_all)
        logs.event("topic_logs.opened", partitions=count, seconds=round(time.perf_counter() - started, 3))
        task_status.started()
