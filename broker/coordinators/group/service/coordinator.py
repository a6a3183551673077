"""The group coordinator on the coordinator runtime (``broker.runtime.coordinator``): one
``GroupCoordinatorShard`` per ``__consumer_offsets`` partition, loaded from the replay snapshot and
the replay plan, its results written as offset records, transactional offset batches and markers,
its rebalance-journal events handed to the journal writer.

Reads (OffsetFetch, DescribeGroups, ListGroups) are computed at once from the shard's state and
released, like the replies of writes, only when every write of the group queued on the shard
before them is durable (``CoordinatorRuntime.after_durable``): a reader never sees what a crash
could still take away, and sees its own acknowledged writes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import trio

from broker.cluster.node import ClusterNode
from broker.coordinators.group.core.base.context import CoordinatorConfig, TopicView
from broker.coordinators.group.core.base.pending_offsets import TxnOffsetBatch
from broker.coordinators.group.core.base.result import Result, Transition
from broker.coordinators.group.core.base.timers import OFFSETS_EXPIRY_KEY
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service import replay_snapshot
from broker.coordinators.group.service.replay_snapshot import ReplaySnapshot, SnapshotRejected
from broker.log_runtime.runtime import Entry, LogRuntime, Partition
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.runtime.coordinator import (
    RELOAD_DELAY_S,
    Append,
    Coordinator,
    CoordinatorRuntime,
    Done,
    ShardRuntime,
)
from broker.runtime.countdown import Countdown
from broker.runtime.timers import wall_ms
from broker.topics.catalog import OFFSETS_TOPIC
from broker.topics.changes import PartitionsAdded, TopicChange, TopicCreated, TopicDeleted
from protocol.group_events import GroupEvent
from protocol.payloads.offsets_log_records import (
    ConsumerGroupMetadataRecord,
    OffsetCommitRecord,
    encode_record,
)
from protocol.record_batch import build_end_txn_marker, build_simple_batch
from storage.config import LogConfig
from storage.errors import StorageError

__all__ = ["RELOAD_DELAY_S", "SNAPSHOT_TAIL_RECORDS", "GroupShardRuntime", "GroupCoordinatorService"]

GroupShardRuntime = ShardRuntime[GroupCoordinatorShard, Result]
# An operation the broker itself starts (no request): the shard and "now" in, what to do out.
BrokerOp = Callable[[GroupCoordinatorShard, int], Result]
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
class ShardLoad:
    """What the last load of one partition read, and its replay snapshot as last read or written
    (the base of the next one)."""

    snapshot: ReplaySnapshot | None = None
    snapshot_records: int = 0  # read from the replay snapshot
    log_records: int = 0  # read from the log after it
    replayed: int = 0


def _delete_offsets(deleted: list[tuple[str, int]], shard: GroupCoordinatorShard, now: int) -> Result:
    del now
    return shard.on_partitions_deleted(deleted)


def _topics_changed(topics: set[str], shard: GroupCoordinatorShard, now: int) -> Result:
    return shard.on_topics_changed(topics, now)


def _ignore(ok: bool) -> None:
    del ok


class GroupCoordinatorService(Coordinator[GroupCoordinatorShard, Result]):
    """The group coordinator: its shards on the coordinator runtime, their replay snapshots, and
    what follows topic changes."""

    topic = OFFSETS_TOPIC

    def __init__(self, logs_runtime: LogRuntime, num_partitions: int, coordinator_config: CoordinatorConfig,
                 topics: TopicView, log_config: LogConfig, on_transition: Callable[[Transition], None],
                 clock: Callable[[], int] = wall_ms, cluster: ClusterNode | None = None,
                 journal: Callable[[Sequence[GroupEvent]], None] | None = None) -> None:
        self.logs = logs_runtime
        self.cluster = cluster
        self.num_partitions = num_partitions
        self.coordinator_config = coordinator_config
        self.topics = topics
        self.log_config = log_config
        self.on_transition = on_transition
        # Where the rebalance journal's events go (never waited for).
        self.journal = journal
        self.clock = clock
        self.loads = [ShardLoad() for _ in range(num_partitions)]
        self.runtime = CoordinatorRuntime(self, logs_runtime, num_partitions, clock, cluster)
        self.runtimes = self.runtime.shards
        self.timers = self.runtime.timers

    def set_group_timings(self, timings: Mapping[str, tuple[int | None, int | None]],
                          share_timings: Mapping[str, tuple[int | None, int | None]] | None = None) -> None:
        """Groups' own session timeouts and heartbeat intervals (group configs: consumer groups'
        and share groups') changed: every shard gets the new ones as part of its configuration,
        used from its next heartbeat."""
        self.coordinator_config = replace(self.coordinator_config, group_timings=dict(timings),
                                          share_group_timings=dict(share_timings or {}))
        for runtime in self.runtimes:
            runtime.shard.state.config = self.coordinator_config

    def set_group_configs(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Groups' own configs changed: in effect from each group's next heartbeat (and, for a
        streams group's assignment configs, with a new target assignment then, as Kafka does)."""
        self.coordinator_config = replace(self.coordinator_config, group_configs={
            g: dict(c) for g, c in configs.items()})
        for runtime in self.runtimes:
            runtime.shard.state.config = self.coordinator_config

    def new_shard(self, index: int) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(index, self.coordinator_config, self.topics, new_member_id)

    def partition_dir(self, partition: int) -> Path:
        return self.logs.data_dir / f"{OFFSETS_TOPIC}-{partition}"

    # ---- the coordinator's hooks --------------------------------------------------------------

    def replay(self, slot: GroupShardRuntime, part: Partition) -> int:
        shard = slot.shard
        index = slot.partition
        snapshot = self._read_snapshot(part, index)
        loaded = replay_snapshot.load(snapshot, part.log, shard.replay, shard.replay_txn_offset, shard.replay_marker)
        self.loads[index] = ShardLoad(snapshot, *loaded)
        state = shard.state
        if state.replay_anomalies:
            logs.warn("shard.replay_anomalies", partition=index, skipped=state.replay_anomalies,
                      last=state.last_anomaly)
        return loaded.snapshot_records + loaded.log_records

    @staticmethod
    def _read_snapshot(part: Partition, index: int) -> ReplaySnapshot | None:
        try:
            return replay_snapshot.read(part.log, index)
        except SnapshotRejected as exc:
            # A cache: the log is replayed in full instead (normal after compaction rewrote it).
            logs.event("replay_snapshot.ignored", partition=index, reason=str(exc))
            return None

    def on_loaded(self, slot: GroupShardRuntime, now: int) -> None:
        loaded = Result()
        state = slot.shard.state
        state.journal.collect(state, loaded, now)
        if loaded.events and self.journal is not None:
            self.journal(loaded.events)
        index = slot.partition
        load = self.loads[index]
        seconds = slot.load_seconds
        METRICS.load_seconds.labels(str(index)).set(seconds)
        METRICS.load_records.labels(str(index), "snapshot").set(load.snapshot_records)
        METRICS.load_records.labels(str(index), "log").set(load.log_records)
        logs.debug("shard.loaded", partition=index, records=slot.records_read, replayed=load.replayed,
                   snapshot_records=load.snapshot_records, log_records=load.log_records, seconds=round(seconds, 4))
        if slot.epoch is not None:
            METRICS.cluster_takeover_load_seconds.observe(seconds)
            logs.event("shard.took_over", partition=index, epoch=slot.log_epoch, records=slot.records_read,
                       snapshot_records=load.snapshot_records, log_records=load.log_records,
                       seconds=round(seconds, 4))

    def writes(self, slot: GroupShardRuntime, result: Result, now: int, started: float | None) -> list[Append]:
        """Observes the result (assignments computed, the journal, state transitions), then
        returns its records and then its transactional writes, in that order."""
        state = slot.shard.state
        if started is not None and state.assignments:
            op_seconds = time.perf_counter() - started
            for group_id, epoch, assignor, members in state.assignments:
                METRICS.consumer_assignments.labels(assignor).inc()
                METRICS.consumer_assignment_seconds.observe(op_seconds)
                logs.event("consumer_group.assignment", group=group_id, epoch=epoch, assignor=assignor,
                           members=members, seconds=round(op_seconds, 6))
            state.assignments.clear()
        state.journal.collect(state, result, now)
        if result.events and self.journal is not None:
            self.journal(result.events)
        for tr in result.transitions:
            self.on_transition(tr)
        if not result.records and not result.txn_writes:
            return []
        appends: list[Append] = []
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
            records = result.records
            appends.append(Append(entries, [records[0].group] if len(records) == 1 else {r.group for r in records}))
        for write in result.txn_writes:
            raw: bytes
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
            appends.append(Append(raw, groups))
        return appends

    def on_timer(self, slot: GroupShardRuntime, key: str, now: int) -> tuple[Result, Done | None]:
        result = slot.shard.on_timer(key, now)
        if key == OFFSETS_EXPIRY_KEY:
            METRICS.offset_expirations.inc(sum(1 for r in result.records if isinstance(r, OffsetCommitRecord)))
        return result, None

    # ---- topic changes ----------------------------------------------------------------------

    def on_topic_change(self, change: TopicChange, settlement: Countdown) -> None:
        """Subscribed to the broker's topic changes (``broker.topics.changes``).

        A deleted topic's committed offsets are tombstoned in every group of every shard, as
        Kafka's ``GroupCoordinatorService.onPartitionsDeleted`` does; the change settles once the
        tombstones are durable, so DeleteTopics answers after the offsets are gone for good. Every
        change is then passed to the shards' ``on_topics_changed``: the hook where KIP-848 groups
        subscribed to the topic refresh their target assignment."""
        if isinstance(change, TopicDeleted):
            deleted = [(change.topic, p) for p in range(change.partitions)]
            for slot in self.runtimes:
                slot.run_after_load(partial(_delete_offsets, deleted),
                                    partial(self._offsets_deleted, slot, deleted, settlement.hold()))
        if isinstance(change, (TopicCreated, PartitionsAdded, TopicDeleted)):
            topics = {change.topic}
            for slot in self.runtimes:
                if slot.loaded:
                    slot.run_after_load(partial(_topics_changed, topics), _ignore)

    def _offsets_deleted(self, slot: GroupShardRuntime, deleted: list[tuple[str, int]],
                         release: Callable[[], None], ok: bool) -> None:
        if not ok:
            # The shard is reloading from a log that still holds these offsets: write the
            # tombstones again once it has loaded. The topic is deleted either way, so the
            # request that deleted it does not wait for the retry (Kafka logs and moves on too).
            logs.warn("offsets.delete_failed", partition=slot.partition, topic=deleted[0][0])
            slot.after_load.append((partial(_delete_offsets, deleted), _ignore))
        release()

    # ---- serving ------------------------------------------------------------------------------

    @property
    def loading(self) -> int:
        return self.runtime.loading

    def serving_runtimes(self) -> list[GroupShardRuntime]:
        return self.runtime.serving()

    def after_durable(self, reads: Sequence[tuple[GroupShardRuntime, str | None]], callback: Done) -> None:
        self.runtime.after_durable(reads, callback)

    # ---- the replay snapshot ----------------------------------------------------------------

    def snapshot_due(self, slot: GroupShardRuntime, tail_records: int) -> bool:
        """At least ``tail_records`` durable offsets of the log lie past the snapshot (all of them
        when there is none, or when compaction or retention has changed what it covered), and, when
        more than one is asked for, at least SNAPSHOT_TAIL_SHARE of what the snapshot holds."""
        part = slot.part
        if not slot.loaded or part is None or part.closed or not slot.serving:
            return False
        log = part.log
        load = self.loads[slot.partition]
        snapshot = load.snapshot
        if snapshot is not None and not log.covers(snapshot.coverage):
            load.snapshot = snapshot = None
        covered = snapshot.end_offset if snapshot is not None else log.log_start_offset
        share = int(snapshot.records * SNAPSHOT_TAIL_SHARE) if snapshot is not None and tail_records > 1 else 0
        return log.recovery_point - covered >= max(tail_records, share, 1)

    def write_snapshot(self, slot: GroupShardRuntime) -> ReplaySnapshot | None:
        """Builds and writes the snapshot from the log's durable bytes (blocking: a worker thread
        or shutdown); None when there was nothing to write or the log failed meanwhile."""
        part = slot.part
        if part is None:
            return None
        index = slot.partition
        started = time.perf_counter()
        try:
            snapshot = replay_snapshot.build(part.log, index, self.loads[index].snapshot)
            # One writer per partition directory: a node that lost the partition (or its lease)
            # meanwhile writes nothing there. (Even if it did, the snapshot describes bytes that
            # are in the log, or its coverage check fails.)
            if snapshot is not None and slot.serving and slot.part is part:
                replay_snapshot.write(part.log, snapshot)
            else:
                snapshot = None
        except (OSError, StorageError) as exc:
            logs.warn("replay_snapshot.write_failed", partition=index, error=repr(exc))
            return None
        if snapshot is not None:
            METRICS.snapshots_written.inc()
            logs.debug("replay_snapshot.written", partition=index, end_offset=snapshot.end_offset,
                       records=snapshot.records, seconds=round(time.perf_counter() - started, 4))
        return snapshot

    async def _write_snapshots_periodically(self) -> None:
        while True:
            await trio.sleep(SNAPSHOT_CHECK_S)
            for slot in self.runtimes:
                try:
                    if self.snapshot_due(slot, SNAPSHOT_TAIL_RECORDS):
                        snapshot = await trio.to_thread.run_sync(self.write_snapshot, slot)
                        if snapshot is not None:
                            self.loads[slot.partition].snapshot = snapshot
                except (OSError, StorageError) as exc:
                    # A snapshot only shortens the next load: failing to take one (out of file
                    # descriptors, a disk error) is reported and tried again, never the node's end.
                    logs.warn("shards.snapshot_failed", partition=slot.partition, error=repr(exc))

    def write_snapshots(self) -> None:
        """At shutdown, after serving stopped: a snapshot of every loaded shard whose log has
        durable records past its snapshot, so that the next start replays almost nothing."""
        for slot in self.runtimes:
            part = slot.part
            if part is None or part.closed or part.failed:
                continue
            try:
                part.log.flush()
            except (OSError, StorageError):
                continue  # the log runtime's close reports it
            if self.snapshot_due(slot, 1):
                snapshot = self.write_snapshot(slot)
                if snapshot is not None:
                    self.loads[slot.partition].snapshot = snapshot

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.runtime.run_timers)
            nursery.start_soon(self._write_snapshots_periodically)
            task_status.started()
            if self.cluster is not None:
                return  # partitions load as this node claims them (``ShardRuntime.gain``)
            started = time.perf_counter()
            await self.runtime.load_all()
            logs.event("shards.loaded", partitions=self.num_partitions,
                       seconds=round(time.perf_counter() - started, 3),
                       from_snapshot=sum(1 for load in self.loads if load.snapshot is not None),
                       snapshot_records=sum(load.snapshot_records for load in self.loads),
                       log_records=sum(load.log_records for load in self.loads))
