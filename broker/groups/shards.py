"""The runtime around each coordinator shard: load by replay, run operations, hand their records
to the log runtime, release responses only once those records are durable, fire timers.

The coordinator itself is pure; this is where its records meet the log and its timers meet trio.
Reads (OffsetFetch, DescribeGroups, ListGroups) are computed at once from the shard's state and
released, like the replies of writes, only when every write queued on the shard before them is
durable: a reader never sees what a crash could still take away, and sees its own acknowledged
writes (see ``after_durable``).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from broker.cluster.node import ClusterNode
from broker.coordinator.context import CoordinatorConfig, RequestContext, TopicView
from broker.coordinator.pending_offsets import TxnOffsetBatch
from broker.coordinator.result import CancelTimer, Result, SetTimer, Transition
from broker.coordinator.shard import GroupCoordinatorShard
from broker.coordinator.timers import OFFSETS_EXPIRY_KEY
from broker.groups import replay_snapshot
from broker.groups.replay_snapshot import ReplaySnapshot, SnapshotRejected
from broker.groups.timers import TimerService, wall_ms
from broker.log_runtime.runtime import BatchWrite, Entry, LogRuntime, Partition
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.topics.catalog import OFFSETS_TOPIC
from broker.topics.changes import PartitionsAdded, Settlement, TopicChange, TopicCreated, TopicDeleted
from protocol.errors import ErrorCode
from protocol.group_events import GroupEvent
from protocol.offsets_log_records import ConsumerGroupMetadataRecord, OffsetCommitRecord, encode_record
from protocol.record_batch import build_end_txn_marker, build_simple_batch
from storage.config import LogConfig
from storage.errors import StorageError

ErrorBuilder = Callable[[int], Any]
Op = Callable[[GroupCoordinatorShard, RequestContext, int], Result]
# An operation the broker itself starts (no request): the shard and "now" in, what to do out.
BrokerOp = Callable[[GroupCoordinatorShard, int], Result]
RELOAD_DELAY_S = 0.1
# A shard's replay snapshot is rewritten once SNAPSHOT_TAIL_RECORDS offsets of its log lie past the
# snapshot's end (replaying them costs about a third of what loading the snapshot costs at 100,000
# keys), or half as many as the snapshot holds if that is more: a rewrite reads the whole snapshot
# again, and this keeps its cost per record written below ~3 record replays. Checked every
# SNAPSHOT_CHECK_S.
SNAPSHOT_TAIL_RECORDS = 50_000
SNAPSHOT_TAIL_SHARE = 0.5
SNAPSHOT_CHECK_S = 5.0


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
        self.part: Partition | None = None
        self.loaded = False
        self.parked: dict[int, Parked] = {}
        # Group id -> the partition's write sequence number of the last write that held one of
        # its records. A read of one group waits for that write only, not for every write queued
        # on the shard: with many groups per shard and commits arriving all the time, a shard is
        # rarely without a write in flight, and heartbeats would otherwise wait for a disk flush.
        self.group_writes: dict[str, int] = {}
        self.load_seconds = 0.0
        self.replayed = 0
        # Records the last load read from the replay snapshot and from the log after it.
        self.snapshot_records = 0
        self.log_records = 0
        # The snapshot file as last read or written: the base of the next one.
        self.snapshot: ReplaySnapshot | None = None
        # Broker operations that arrived while the shard was not loaded: run right after its load.
        self.after_load: list[tuple[BrokerOp, Callable[[bool], None]]] = []
        # Cluster mode: whether this node owns the partition, at which owner epoch, and a count of
        # ownership changes (a load that finishes after the partition was lost is thrown away).
        self.owned = manager.cluster is None
        self.epoch: int | None = None
        self.tenure = 0
        # One load at a time: a partition lost and regained while loading is loaded again after
        # the first load has closed what it opened.
        self.load_lock = trio.Lock()

    @property
    def serving(self) -> bool:
        """This node coordinates the partition's groups now (owns it, and its lease holds)."""
        return self.owned and self.manager.may_write()

    # ---- loading ----------------------------------------------------------------------------

    def _open_and_replay(self) -> tuple[Partition, int]:
        part = self.manager.logs.open(OFFSETS_TOPIC, self.partition, self.manager.log_config, owner=self)
        if self.epoch is not None:
            self.epoch = part.log.begin_epoch(self.epoch)
        report = self.manager.logs.manager.reports.get((OFFSETS_TOPIC, self.partition))
        if report is not None and not report.clean:
            logs.warn("log.recovered", partition=self.partition, dropped_bytes=report.bytes_dropped,
                      details=report.summary())
        elif report is not None and (report.rebuilt_indexes or report.leftovers):
            logs.event("log.recovered", partition=self.partition, details=report.summary())
        shard = self.shard
        snapshot = self._read_snapshot(part)
        loaded = replay_snapshot.load(snapshot, part.log, shard.replay, shard.replay_txn_offset, shard.replay_marker)
        self.snapshot = snapshot
        self.snapshot_records, self.log_records, self.replayed = loaded
        read = loaded.snapshot_records + loaded.log_records
        state = self.shard.state
        if state.replay_anomalies:
            logs.warn("shard.replay_anomalies", partition=self.partition, skipped=state.replay_anomalies,
                      last=state.last_anomaly)
        return part, read

    def _read_snapshot(self, part: Partition) -> ReplaySnapshot | None:
        try:
            return replay_snapshot.read(part.log, self.partition)
        except SnapshotRejected as exc:
            # A cache: the log is replayed in full instead (normal after compaction rewrote it).
            logs.event("replay_snapshot.ignored", partition=self.partition, reason=str(exc))
            return None

    async def load(self) -> None:
        async with self.load_lock:
            if self.owned and not self.loaded:
                await self._load()

    async def _load(self) -> None:
        started = time.perf_counter()
        tenure = self.tenure
        try:
            part, count = await trio.to_thread.run_sync(self._open_and_replay)
        except (OSError, StorageError) as exc:
            # Fenced (the claim ended while opening) or the disk failed: what the replay built is
            # dropped; a shard still owned tries again from its files.
            self.shard = self.manager.new_shard(self.partition)
            logs.warn("shard.load_failed", partition=self.partition, error=repr(exc))
            if tenure == self.tenure and self.serving:
                self.manager.logs.spawn(self.reload)
            return
        if tenure != self.tenure or not self.owned:
            # Lost while loading: another node owns it now; close what we opened, serve nothing.
            part.log.close()
            self.manager.logs.manager.forget(OFFSETS_TOPIC, self.partition)
            self.shard = self.manager.new_shard(self.partition)
            return
        self.part = self.manager.logs.adopt(part)
        now = self.manager.clock()
        for timer in self.shard.on_loaded(now):
            self.manager.timers.set(self.partition, timer.key, timer.deadline_ms)
        loaded = Result()
        self.shard.state.journal.collect(self.shard.state, loaded, now)
        if loaded.events and self.manager.journal is not None:
            self.manager.journal(loaded.events)
        self.load_seconds = time.perf_counter() - started
        METRICS.load_seconds.labels(str(self.partition)).set(self.load_seconds)
        METRICS.load_records.labels(str(self.partition), "snapshot").set(self.snapshot_records)
        METRICS.load_records.labels(str(self.partition), "log").set(self.log_records)
        self.loaded = True
        logs.debug("shard.loaded", partition=self.partition, records=count, replayed=self.replayed,
                   snapshot_records=self.snapshot_records, log_records=self.log_records,
                   seconds=round(self.load_seconds, 4))
        if self.epoch is not None:
            METRICS.cluster_takeover_load_seconds.observe(self.load_seconds)
            logs.event("shard.took_over", partition=self.partition, epoch=self.epoch, records=count,
                       snapshot_records=self.snapshot_records, log_records=self.log_records,
                       seconds=round(self.load_seconds, 4))
        queued, self.after_load = self.after_load, []
        for op, done in queued:
            self.run_broker_op(op, done)

    # ---- the replay snapshot ----------------------------------------------------------------

    def snapshot_due(self, tail_records: int) -> bool:
        """At least ``tail_records`` durable offsets of the log lie past the snapshot (all of them
        when there is none, or when compaction or retention has changed what it covered), and, when
        more than one is asked for, at least SNAPSHOT_TAIL_SHARE of what the snapshot holds."""
        part = self.part
        if not self.loaded or part is None or part.closed or not self.serving:
            return False
        log = part.log
        snapshot = self.snapshot
        if snapshot is not None and not log.covers(snapshot.coverage):
            self.snapshot = snapshot = None
        covered = snapshot.end_offset if snapshot is not None else log.log_start_offset
        share = int(snapshot.records * SNAPSHOT_TAIL_SHARE) if snapshot is not None and tail_records > 1 else 0
        return log.recovery_point - covered >= max(tail_records, share, 1)

    def write_snapshot(self) -> ReplaySnapshot | None:
        """Builds and writes the snapshot from the log's durable bytes (blocking: a worker thread
        or shutdown); None when there was nothing to write or the log failed meanwhile."""
        part = self.part
        if part is None:
            return None
        started = time.perf_counter()
        try:
            snapshot = replay_snapshot.build(part.log, self.partition, self.snapshot)
            # One writer per partition directory: a node that lost the partition (or its lease)
            # meanwhile writes nothing there. (Even if it did, the snapshot describes bytes that
            # are in the log, or its coverage check fails.)
            if snapshot is not None and self.serving and self.part is part:
                replay_snapshot.write(part.log, snapshot)
            else:
                snapshot = None
        except (OSError, StorageError) as exc:
            logs.warn("replay_snapshot.write_failed", partition=self.partition, error=repr(exc))
            return None
        if snapshot is not None:
            METRICS.snapshots_written.inc()
            logs.debug("replay_snapshot.written", partition=self.partition, end_offset=snapshot.end_offset,
                       records=snapshot.records, seconds=round(time.perf_counter() - started, 4))
        return snapshot

    # ---- the request path -------------------------------------------------------------------

    def execute(self, op: Op, deliver: Callable[[Any], None], version: int, client_id: str, client_host: str,
                on_error: ErrorBuilder, group: str | None = None,
                may_describe_topic: Callable[[str], bool] | None = None) -> None:
        """Runs ``op`` on the shard now; ``deliver`` gets its response once its records, and every
        write queued before them, are durable (or later still, when the coordinator parks it).

        ``group`` names the one group the operation reads and writes: when the operation writes
        nothing, its replies wait only for that group's writes in flight (see ``settled_for``).
        ``may_describe_topic`` is the sender's Describe right on topics (None: no authorizer)."""
        token = next(self.manager.tokens)
        self.parked[token] = Parked(deliver, on_error)
        ctx = RequestContext(token=token, api_version=version, client_id=client_id, client_host=client_host,
                             may_describe_topic=may_describe_topic)
        now = self.manager.clock()
        started = time.perf_counter()
        result = op(self.shard, ctx, now)
        if self.shard.state.assignments:
            self._note_assignments(time.perf_counter() - started)
        self.apply(result, now, group)

    def _note_assignments(self, seconds: float) -> None:
        for group_id, epoch, assignor, members in self.shard.state.assignments:
            METRICS.consumer_assignments.labels(assignor).inc()
            METRICS.consumer_assignment_seconds.observe(seconds)
            logs.event("consumer_group.assignment", group=group_id, epoch=epoch, assignor=assignor,
                       members=members, seconds=round(seconds, 6))
        self.shard.state.assignments.clear()

    def run_broker_op(self, op: BrokerOp, done: Callable[[bool], None]) -> None:
        """Runs ``op`` now, or right after the load when the shard is not loaded; ``done(True)``
        once its records (and every write queued before them) are durable, ``done(False)`` if the
        write failed (the shard is then rebuilt from its log, without the op's records). On a
        partition another node owns (cluster mode) it does nothing: that node runs it."""
        if not self.owned:
            done(True)
            return
        if not self.loaded:
            self.after_load.append((op, done))
            return
        now = self.manager.clock()
        self.apply(op(self.shard, now), now)
        part = self.part
        assert part is not None
        part.when_durable(done)

    def fire_timer(self, key: str, now: int) -> None:
        if self.loaded:
            result = self.shard.on_timer(key, now)
            if key == OFFSETS_EXPIRY_KEY:
                METRICS.offset_expirations.inc(sum(1 for r in result.records if isinstance(r, OffsetCommitRecord)))
            self.apply(result, now)

    def apply(self, result: Result, now: int, group: str | None = None) -> None:
        state = self.shard.state
        state.journal.collect(state, result, now)
        if result.events and self.manager.journal is not None:
            self.manager.journal(result.events)
        timers = self.manager.timers
        for t in result.timers:
            if isinstance(t, SetTimer):
                timers.set(self.partition, t.key, t.deadline_ms)
            elif isinstance(t, CancelTimer):
                timers.cancel(self.partition, t.key)
        for tr in result.transitions:
            self.manager.on_transition(tr)
        part = self.part
        assert part is not None
        if result.records or result.txn_writes:
            self._write(part, result, now)
        elif group is not None and result.replies and self.settled_for(group):
            # Wrote nothing, and nothing of its group is in flight: the replies show durable state.
            for token, response in result.replies:
                self._deliver(token, response)
            return
        if part.settled:
            for token, response in result.replies:
                self._deliver(token, response)
        else:
            for token, response in result.replies:
                part.when_durable(partial(self._deliver_if_durable, token, response))

    def _write(self, part: Partition, result: Result, now: int) -> None:
        """Queues the result's records, then its transactional writes, in that order. Records go
        through the runtime's record path (one batch per pass, shared with other operations)
        unless transactional batches are queued on the partition already: then they are queued
        as a batch of their own behind them, so the log holds everything in operation order."""
        logs_runtime = self.manager.logs
        group_writes = self.group_writes
        if result.records:
            commits = 0
            entries: list[Entry] = []
            for rec in result.records:
                if isinstance(rec, OffsetCommitRecord) and rec.value is not None:
                    commits += 1
                elif isinstance(rec, ConsumerGroupMetadataRecord) and rec.value is not None:
                    METRICS.consumer_epoch_bumps.inc()
                key, value = encode_record(rec)
                entries.append((key, value, now))
            if commits:
                METRICS.offset_commits.inc(commits)
            if part.batches:
                logs_runtime.append_batch(part, BatchWrite(build_simple_batch(entries), -1, _nothing))
            else:
                logs_runtime.append_records(part, entries)
            seq = part.queued_seq
            for rec in result.records:
                group_writes[rec.group] = seq
        for write in result.txn_writes:
            groups: tuple[str, ...]
            if isinstance(write, TxnOffsetBatch):
                raw = build_simple_batch([(*encode_record(r), now) for r in write.records],
                                         producer_id=write.producer_id, producer_epoch=write.producer_epoch,
                                         transactional=True)
                groups = tuple({r.group for r in write.records})
                METRICS.offset_commits.inc(len(write.records))
            else:
                raw = build_end_txn_marker(0, producer_id=write.producer_id, producer_epoch=write.producer_epoch,
                                           commit=write.commit, coordinator_epoch=write.coordinator_epoch,
                                           timestamp=now)
                groups = write.groups
            logs_runtime.append_batch(part, BatchWrite(raw, -1, _nothing))
            seq = part.queued_seq
            for g in groups:
                group_writes[g] = seq

    def settled_for(self, group: str) -> bool:
        """No write holding a record of ``group`` is queued or in flight."""
        part = self.part
        if part is None or part.settled:
            # Every entry is stale: forget them all (this keeps the map as small as the set of
            # groups written to since the shard was last idle).
            self.group_writes.clear()
            return True
        seq = self.group_writes.get(group)
        return seq is None or seq <= part.durable_seq

    def _deliver_if_durable(self, token: int, response: Any, ok: bool) -> None:
        # On a failed write the failure policy has already answered the request with an error.
        if ok:
            self._deliver(token, response)

    def _deliver(self, token: int, response: Any) -> None:
        parked = self.parked.pop(token, None)
        if parked is not None:
            parked.deliver(response)

    # ---- failures ---------------------------------------------------------------------------

    def on_write_failed(self, exc: Exception) -> None:
        """The log did not take a write: every request waiting on the shard gets a coordinator
        error (clients re-discover and retry); the shard serves again once ``reload`` has rebuilt
        it from what the log really holds."""
        del exc  # the log runtime has logged it
        self.unload()
        if self.serving:
            self.manager.logs.spawn(self.reload)
        elif self.owned and self.manager.cluster is not None:
            # Refused because the lease could have expired: give the claim up too (it is claimed
            # afresh if the lease turns out to hold), rather than stay owned and unloaded.
            self.manager.cluster.relinquish((OFFSETS_TOPIC, self.partition), "write refused: not certainly the owner")

    def unload(self) -> None:
        """Stop serving: every parked request and queued broker operation hears NOT_COORDINATOR
        (clients find the coordinator again), timers stop, the log is closed, the state dropped."""
        self.loaded = False
        self.group_writes.clear()  # sequence numbers of the closed partition
        self.manager.timers.cancel_shard(self.partition)
        for token, parked in list(self.parked.items()):
            parked.deliver(parked.on_error(ErrorCode.NOT_COORDINATOR))
            del self.parked[token]
        if self.part is not None:
            self.manager.logs.close_partition(self.part)
            self.part = None
        self.shard = self.manager.new_shard(self.partition)

    async def reload(self) -> None:
        await trio.sleep(RELOAD_DELAY_S)
        if self.serving:
            await self.load()

    # ---- ownership (cluster mode) ---------------------------------------------------------------

    def gain(self, epoch: int) -> None:
        self.tenure += 1
        self.owned = True
        self.epoch = epoch
        self.manager.logs.spawn(self.load)

    def lose(self) -> None:
        self.tenure += 1
        self.owned = False
        queued, self.after_load = self.after_load, []
        self.unload()
        for _op, done in queued:
            done(False)

    async def release(self) -> None:
        """Controlled hand-over: take no new requests, let the writes already queued become durable
        (their clients are acknowledged), then stop serving."""
        self.owned = False
        part = self.part
        if part is not None:
            await part.settle(5)
        self.lose()


def _nothing() -> None:
    pass


def _delete_offsets(deleted: list[tuple[str, int]], shard: GroupCoordinatorShard, now: int) -> Result:
    del now
    return shard.on_partitions_deleted(deleted)


def _topics_changed(topics: set[str], shard: GroupCoordinatorShard, now: int) -> Result:
    return shard.on_topics_changed(topics, now)


def _ignore(ok: bool) -> None:
    del ok


def _always() -> bool:
    return True


class ShardManager:
    def __init__(self, logs_runtime: LogRuntime, num_partitions: int, coordinator_config: CoordinatorConfig,
                 topics: TopicView, log_config: LogConfig, on_transition: Callable[[Transition], None],
                 clock: Callable[[], int] = wall_ms, cluster: ClusterNode | None = None,
                 journal: Callable[[Sequence[GroupEvent]], None] | None = None) -> None:
        self.logs = logs_runtime
        self.cluster = cluster
        self.may_write: Callable[[], bool] = cluster.may_write if cluster is not None else _always
        self.num_partitions = num_partitions
        self.coordinator_config = coordinator_config
        self.topics = topics
        self.log_config = log_config
        self.on_transition = on_transition
        # Where the rebalance journal's events go (never waited for).
        self.journal = journal
        self.tokens = itertools.count(1)
        # Wall-clock milliseconds: what operations see as "now" and what timer deadlines are in.
        self.clock = clock
        self.timers = TimerService(self._fire, clock)
        self.runtimes = [ShardRuntime(self, p) for p in range(num_partitions)]

    def set_group_timings(self, timings: Mapping[str, tuple[int | None, int | None]]) -> None:
        """Groups' own session timeouts and heartbeat intervals (group configs) changed: every
        shard gets the new ones as part of its configuration, used from its next heartbeat."""
        self.coordinator_config = replace(self.coordinator_config, group_timings=dict(timings))
        for runtime in self.runtimes:
            runtime.shard.state.config = self.coordinator_config

    def new_shard(self, partition: int) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(partition, self.coordinator_config, self.topics, new_member_id)

    def partition_dir(self, partition: int) -> Path:
        return self.logs.data_dir / f"{OFFSETS_TOPIC}-{partition}"

    # ---- topic changes ----------------------------------------------------------------------

    def on_topic_change(self, change: TopicChange, settlement: Settlement) -> None:
        """Subscribed to the broker's topic changes (``broker.topics.changes``).

        A deleted topic's committed offsets are tombstoned in every group of every shard, as
        Kafka's ``GroupCoordinatorService.onPartitionsDeleted`` does; the change settles once the
        tombstones are durable, so DeleteTopics answers after the offsets are gone for good. Every
        change is then passed to the shards' ``on_topics_changed``: the hook where KIP-848 groups
        subscribed to the topic refresh their target assignment."""
        if isinstance(change, TopicDeleted):
            deleted = [(change.topic, p) for p in range(change.partitions)]
            for runtime in self.runtimes:
                runtime.run_broker_op(partial(_delete_offsets, deleted),
                                      partial(self._offsets_deleted, runtime, deleted, settlement.hold()))
        if isinstance(change, (TopicCreated, PartitionsAdded, TopicDeleted)):
            topics = {change.topic}
            for runtime in self.runtimes:
                if runtime.loaded:
                    runtime.run_broker_op(partial(_topics_changed, topics), _ignore)

    def _offsets_deleted(self, runtime: ShardRuntime, deleted: list[tuple[str, int]],
                         release: Callable[[], None], ok: bool) -> None:
        if not ok:
            # The shard is reloading from a log that still holds these offsets: write the
            # tombstones again once it has loaded. The topic is deleted either way, so the
            # request that deleted it does not wait for the retry (Kafka logs and moves on too).
            logs.warn("offsets.delete_failed", partition=runtime.partition, topic=deleted[0][0])
            runtime.after_load.append((partial(_delete_offsets, deleted), _ignore))
        release()

    def _fire(self, partition: int, key: str, now: int) -> None:
        self.runtimes[partition].fire_timer(key, now)

    @property
    def loading(self) -> int:
        return sum(1 for r in self.runtimes if r.owned and not r.loaded)

    def serving_runtimes(self) -> list[ShardRuntime]:
        return [r for r in self.runtimes if r.serving]

    def after_durable(self, reads: Sequence[tuple[ShardRuntime, str | None]],
                      callback: Callable[[bool], None]) -> None:
        """``callback(True)`` once every write in flight that a read of ``reads`` could see is
        durable (at once when there is none), ``callback(False)`` as soon as one of them fails.
        Each read names a shard and the one group it reads, or None for the whole shard.

        This is how reads answer from durable state only: a read computed now shows the writes
        already applied to the shard; holding its answer until those writes are durable means no
        client sees a value that a crash could take away, and a client that was told its commit
        succeeded always reads it back. (The alternative, answering at once from the state as of
        the last durable write, needs a second copy of every group's state; the wait is at most
        one group-commit pass.) A read of one group waits for the shard's writes only while one of
        that group's is among them."""
        pending: list[Partition] = []
        for runtime, group in reads:
            part = runtime.part
            if part is None or (runtime.settled_for(group) if group is not None else part.settled):
                continue
            if part not in pending:
                pending.append(part)
        if not pending:
            callback(True)
            return
        remaining = [len(pending)]

        def one(ok: bool) -> None:
            if remaining[0] <= 0:
                return
            if not ok:
                remaining[0] = 0
                callback(False)
                return
            remaining[0] -= 1
            if remaining[0] == 0:
                callback(True)

        for part in pending:
            part.when_durable(one)

    async def _write_snapshots_periodically(self) -> None:
        while True:
            await trio.sleep(SNAPSHOT_CHECK_S)
            for runtime in self.runtimes:
                if runtime.snapshot_due(SNAPSHOT_TAIL_RECORDS):
                    snapshot = await trio.to_thread.run_sync(runtime.write_snapshot)
                    if snapshot is not None:
                        runtime.snapshot = snapshot

    def write_snapshots(self) -> None:
        """At shutdown, after serving stopped: a snapshot of every loaded shard whose log has
        durable records past its snapshot, so that the next start replays almost nothing."""
        for runtime in self.runtimes:
            part = runtime.part
            if part is None or part.closed or part.failed:
                continue
            try:
                part.log.flush()
            except (OSError, StorageError):
                continue  # the log runtime's close reports it
            if runtime.snapshot_due(1):
                snapshot = runtime.write_snapshot()
                if snapshot is not None:
                    runtime.snapshot = snapshot

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.timers.run)
            nursery.start_soon(self._write_snapshots_periodically)
            task_status.started()
            if self.cluster is not None:
                return  # partitions load as this node claims them (``ShardRuntime.gain``)
            started = time.perf_counter()
            # One partition at a time: each shard serves as soon as its own replay is done.
            for runtime in self.runtimes:
                await runtime.load()
            logs.event("shards.loaded", partitions=self.num_partitions,
                       seconds=round(time.perf_counter() - started, 3),
                       from_snapshot=sum(1 for r in self.runtimes if r.snapshot is not None),
                       snapshot_records=sum(r.snapshot_records for r in self.runtimes),
                       log_records=sum(r.log_records for r in self.runtimes))
