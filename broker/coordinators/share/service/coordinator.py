"""The share coordinator on the coordinator runtime (``broker.runtime.coordinator``): one
``ShareCoordinatorShard`` per ``__share_group_state`` partition, replayed at load (a single
broker: every partition at start; a cluster node: each partition as it claims it), its records
made durable before any answer, its cold-partition snapshot timer.

A share partition's key (group, topic id, partition) lives in partition
``partition_for("group:topic id:partition")`` of ``__share_group_state``. ``send`` runs one
Read/Write/Initialize/DeleteShareGroupState or ReadShareGroupStateSummary request, every key of
which hashes to one partition, on that partition's shard: its answer is delivered once the
records it wrote (and every write before them) are durable, None when this node does not
coordinate the partition (or it unloads first).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any, TypeAlias

import trio

from broker.cluster.node import ClusterNode
from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.share.core.shard import Key, ShareCoordinatorShard, ShareResult
from broker.coordinators.share.core.state import ShareGroupOffset
from broker.log_runtime.runtime import Entry, LogRuntime
from broker.observability import logs
from broker.runtime.coordinator import Append, Coordinator, CoordinatorRuntime, Done, ShardRuntime
from protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from protocol.payloads import share_state_records
from storage.config import LogConfig

STATE_TOPIC = "__share_group_state"

# A string: at run time the messages are tables, which do not combine with ``|``.
StateRequest: TypeAlias = ("ReadShareGroupStateRequest | WriteShareGroupStateRequest | "
                           "InitializeShareGroupStateRequest | DeleteShareGroupStateRequest | "
                           "ReadShareGroupStateSummaryRequest")
# The answer to a StateRequest (its response message), or None when it could not be served here.
Deliver = Callable[[Any], None]
ShareShardRuntime = ShardRuntime[ShareCoordinatorShard, ShareResult]


def coordinator_key(key: Key) -> str:
    """The share partition's key as Kafka's share coordinator hashes it (and FindCoordinator with
    key type 2 names it): ``group:topic id:partition``, the topic id as Kafka prints a Uuid
    (URL-safe base64 without padding)."""
    return f"{key[0]}:{base64.urlsafe_b64encode(key[1]).rstrip(b'=').decode()}:{key[2]}"


def request_key(request: StateRequest) -> Key:
    """The first key a request names (every key of one request hashes to one partition)."""
    topic = request.topics[0]
    return request.group_id, topic.topic_id, topic.partitions[0].partition


class ShareCoordinatorService(Coordinator[ShareCoordinatorShard, ShareResult]):
    topic = STATE_TOPIC
    create_on_write = True

    def __init__(self, logs_runtime: LogRuntime, num_partitions: int, log_config: LogConfig,
                 clock: Callable[[], int], *, updates_per_snapshot: int = 500,
                 cold_snapshot_interval_ms: int = 300_000, cluster: ClusterNode | None = None) -> None:
        self.num_partitions = num_partitions
        self.log_config = log_config
        self.cluster = cluster
        self.updates_per_snapshot = updates_per_snapshot
        self.cold_snapshot_interval_ms = cold_snapshot_interval_ms
        self.runtime = CoordinatorRuntime(self, logs_runtime, num_partitions, clock, cluster)
        self.shards = self.runtime.shards
        self.started = False
        # Told of each key whose state a DeleteShareGroupState deleted here, once durable.
        self.on_deleted: list[Callable[[Key], None]] = []

    def new_shard(self, index: int) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(index, self.updates_per_snapshot, self.cold_snapshot_interval_ms)

    # ---- routing ------------------------------------------------------------------------------

    def partition_for(self, key: Key) -> int:
        return partition_for(coordinator_key(key), self.num_partitions)

    def slot_for(self, key: Key) -> ShareShardRuntime:
        return self.shards[self.partition_for(key)]

    def send(self, request: StateRequest, deliver: Deliver) -> None:
        """Runs ``request`` on the shard of its keys; ``deliver(response)`` once durable, or
        ``deliver(None)`` when this node does not serve that shard now."""
        key = request_key(request)
        slot = self.slot_for(key)
        if slot.error:
            deliver(None)
            return
        if key not in slot.shard.states:
            self._move_misplaced(key, slot)

        def op(shard: ShareCoordinatorShard, token: int, now: int) -> ShareResult:
            if isinstance(request, WriteShareGroupStateRequest):
                return shard.write_state(token, request, now)
            if isinstance(request, ReadShareGroupStateRequest):
                return shard.read_state(token, request, now)
            if isinstance(request, InitializeShareGroupStateRequest):
                return shard.initialize_state(token, request, now)
            if isinstance(request, DeleteShareGroupStateRequest):
                return shard.delete_state(token, request, now)
            return shard.read_state_summary(token, request, now)

        if isinstance(request, DeleteShareGroupStateRequest) and self.on_deleted:
            answer = deliver

            def deleted(response: Any) -> None:
                if response is not None and response.results[0].partitions[0].error_code == 0:
                    for listener in self.on_deleted:
                        listener(key)
                answer(response)

            deliver = deleted
        slot.execute(op, deliver, lambda code: None, key=coordinator_key(key))

    def _move_misplaced(self, key: Key, slot: ShareShardRuntime) -> None:
        """The release before this one hashed a share partition's key with its topic id in hex,
        not as Kafka prints it: state it wrote may sit in another partition this node loaded.
        It is moved to the key's partition (a snapshot there, then a tombstone where it was)
        before the request runs, so nothing an earlier release acknowledged is delivered again."""
        for other in self.shards:
            state = other.shard.states.get(key) if other is not slot and other.loaded and other.serving else None
            if state is None:
                continue

            def forget_old(ok: bool, old: ShareShardRuntime = other) -> None:
                if ok:  # the old copy goes only once the new one is durable
                    old.write(lambda shard, now: shard.forget(key), lambda done: None)

            def adopt(shard: ShareCoordinatorShard, now: int, found: ShareGroupOffset = state) -> ShareResult:
                return shard.adopt(key, found)

            slot.write(adopt, forget_old)
            logs.event("share.state_moved", group=key[0], partition=key[2], from_partition=other.partition,
                       to_partition=slot.partition)
            return

    def states(self, group: str | None = None) -> dict[Key, Any]:
        """The durable state of every share partition this node coordinates (of ``group``)."""
        out: dict[Key, Any] = {}
        for slot in self.shards:
            if slot.loaded and slot.serving:
                out.update((k, v) for k, v in slot.shard.states.items() if group is None or k[0] == group)
        return out

    # ---- the coordinator's hooks --------------------------------------------------------------

    unreadable_event = "share.unreadable_record"

    def replay_record(self, slot: ShareShardRuntime, key: bytes, value: bytes | None) -> bool:
        rec = share_state_records.decode(key, value)
        if rec is None:
            return False
        slot.shard.replay(rec)
        return True

    def writes(self, slot: ShareShardRuntime, result: ShareResult, now: int, started: float | None) -> list[Append]:
        del slot, started  # nothing observed here
        if not result.records:
            return []
        entries: list[Entry] = []
        keys: list[str] = []
        for rec in result.records:
            k, v = share_state_records.encode(rec)
            entries.append((k, v, now))
            keys.append(coordinator_key((rec.group, rec.topic_id, rec.partition)))
        return [Append(entries, keys)]

    def on_timer(self, slot: ShareShardRuntime, key: str, now: int) -> tuple[ShareResult, Done | None]:
        return slot.shard.on_timer(key, now), None

    def on_loaded(self, slot: ShareShardRuntime, now: int) -> None:
        del now
        if slot.epoch is not None:
            logs.event("share.coordinator_took_over", partition=slot.partition, epoch=slot.epoch,
                       records=slot.records_read, share_partitions=len(slot.shard.states))

    # ---- running and ownership ----------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Runs the shards' timers; a single broker loads every partition first."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.runtime.run_timers)
            if self.cluster is None:
                started = time.perf_counter()
                await self.runtime.load_all()
                logs.event("share.loaded", share_partitions=sum(len(s.shard.states) for s in self.shards),
                           seconds=round(time.perf_counter() - started, 3))
            self.started = True
            task_status.started()

    def gain(self, index: int, epoch: int) -> None:
        self.shards[index].gain(epoch)

    def lose(self, index: int) -> None:
        self.shards[index].lose()

    async def release(self, index: int) -> None:
        await self.shards[index].release()
