"""The transaction coordinator on the coordinator runtime (``broker.runtime.coordinator``): one
``TransactionCoordinatorShard`` per ``__transaction_state`` partition, replayed at load, its
records made durable before any answer, the second phase of every ended transaction (markers,
then Complete), and the periodic abort of transactions past their timeout (a timer of each shard).

A transactional id lives in partition ``partition_for(transactional_id)`` of
``__transaction_state`` (Kafka's rule, ``transaction.state.log.num.partitions``), compacted like
``__consumer_offsets``. Partitions are created on their first write; at start every partition on
disk is replayed (restart == replay) and transactions left in PrepareCommit/PrepareAbort get their
markers written again before they complete.

**In a cluster** the ``__transaction_state`` partitions are owned like ``__consumer_offsets``'
(claimed through etcd, ``broker.cluster``): a node coordinates the transactional ids of the
partitions it owns. Claiming one loads it from storage (nothing of an earlier tenure is kept: the
partition's transactions were dropped when it was lost), then completes what was found in a
Prepare state; an Ongoing transaction is aborted by the timeout check like any other. Losing or
handing over a partition drops its transactions from memory and stops its marker retries. Markers
go to each partition's owner (``broker.coordinators.transaction.service.markers``), carrying the owner epoch of the
transactional id's partition as the coordinator epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trio

from broker.cluster.node import ClusterNode
from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.transaction.core.coordinator import TIMEOUT_KEY, MarkerJob, TxnResult
from broker.coordinators.transaction.core.metadata import TopicPartition, TxnMetadata, TxnState
from broker.coordinators.transaction.core.shard import EXPIRE_IDS_KEY, TransactionCoordinatorShard
from broker.coordinators.transaction.service.markers import COORDINATOR_EPOCH, MarkerWriter
from broker.log_runtime.runtime import Entry, LogRuntime
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.runtime.coordinator import Append, Coordinator, CoordinatorRuntime, Done, ShardRuntime
from broker.runtime.countdown import Countdown
from protocol.errors import ErrorCode
from protocol.payloads.transaction_log_records import (
    TRANSACTION_STATE_TOPIC,
    decode_transaction_record,
    encode_transaction_record,
)
from storage.config import LogConfig

MARKER_RETRY_S = 0.2

TxnShardRuntime = ShardRuntime[TransactionCoordinatorShard, TxnResult]
TxnOp = Callable[[TransactionCoordinatorShard, int], TxnResult]
# An operation's answer: its result, and whether it (and every write before it) is durable.
TxnDone = Callable[[TxnResult, bool], None]
MarkerKey = tuple[str, int, int]


class TransactionCoordinatorService(Coordinator[TransactionCoordinatorShard, TxnResult]):
    topic = TRANSACTION_STATE_TOPIC
    create_on_write = True

    def __init__(self, logs_runtime: LogRuntime, new_producer_id: Callable[[], int], markers: MarkerWriter,
                 num_partitions: int, log_config: LogConfig, clock: Callable[[], int],
                 id_expiry_check_interval_ms: int = 3_600_000, *,
                 max_timeout_ms: int, id_expiration_ms: int, cluster: ClusterNode | None = None,
                 transaction_version: int = 2, two_phase_commit: bool = False) -> None:
        """``transaction_version``: the cluster's finalized ``transaction.version`` (the records'
        version, and the protocol of the aborts the coordinator starts itself);
        ``two_phase_commit``: ``transaction.two.phase.commit.enable`` (KIP-939)."""
        self.logs = logs_runtime
        self.transaction_version = transaction_version
        self.two_phase_commit = two_phase_commit
        self.cluster = cluster
        self.new_producer_id = new_producer_id
        self.max_timeout_ms = max_timeout_ms
        self.id_expiration_ms = id_expiration_ms
        self.markers = markers
        self.num_partitions = num_partitions
        self.log_config = log_config
        self.clock = clock
        self.id_expiry_check_interval_ms = id_expiry_check_interval_ms
        self.started = False
        self.in_flight: set[MarkerKey] = set()  # marker jobs being written
        # Callbacks waiting for a marker job's transaction to complete (EndTxn answers).
        self.completion_waiters: dict[MarkerKey, list[Done]] = {}
        self.runtime = CoordinatorRuntime(self, logs_runtime, num_partitions, clock, cluster)
        self.shards = self.runtime.shards

    def new_shard(self, index: int) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(index, self.new_producer_id, self.max_timeout_ms, self.id_expiration_ms,
                                           self.id_expiry_check_interval_ms,
                                           self.transaction_version, two_phase_commit=self.two_phase_commit)

    # ---- routing ------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def slot_for(self, transactional_id: str) -> TxnShardRuntime:
        return self.shards[partition_for(transactional_id, self.num_partitions)]

    def shard_for(self, transactional_id: str) -> TransactionCoordinatorShard:
        """The coordinator of ``transactional_id``'s partition (check ``error_for`` first)."""
        return self.slot_for(transactional_id).shard

    def error_for(self, transactional_id: str) -> int:
        """Whether this node coordinates ``transactional_id`` now: 0, NOT_COORDINATOR (another node
        does, or none yet: the client finds the coordinator again) or COORDINATOR_LOAD_IN_PROGRESS."""
        return self.slot_for(transactional_id).error

    @property
    def loaded(self) -> bool:
        """A single broker has loaded every partition (a cluster node serves each as it loads it)."""
        return self.started and (self.cluster is not None or self.runtime.loading == 0)

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch markers of ``transactional_id``'s transactions carry."""
        slot = self.slot_for(transactional_id)
        if self.cluster is None or not slot.owned or slot.epoch is None:
            return COORDINATOR_EPOCH
        return slot.epoch & 0x7FFFFFFF

    def transaction(self, transactional_id: str) -> TxnMetadata | None:
        return self.shard_for(transactional_id).txns.get(transactional_id)

    def listed(self, states: set[str], producer_ids: set[int], min_duration_ms: int, now: int) -> list[TxnMetadata]:
        """ListTransactions over every partition this node serves, by transactional id."""
        out: list[TxnMetadata] = []
        for slot in self.shards:
            if slot.loaded and slot.serving:
                out.extend(slot.shard.listed(states, producer_ids, min_duration_ms, now))
        return sorted(out, key=lambda m: m.transactional_id)

    def after_durable(self, send: Callable[[], None]) -> None:
        """Reads answer once every write they could see is durable (or has failed)."""
        self.runtime.after_durable([(slot, None) for slot in self.shards if slot.part is not None],
                                   lambda _ok: send())

    # ---- the coordinator's hooks --------------------------------------------------------------

    unreadable_event = "transactions.unreadable_record"

    def replay_record(self, slot: TxnShardRuntime, key: bytes, value: bytes | None) -> bool:
        slot.shard.replay(decode_transaction_record(key, value))
        return True

    def _log_loaded(self, slot: TxnShardRuntime, unfinished: int) -> None:
        shard = slot.shard
        if slot.epoch is None:
            logs.debug("transactions.partition_loaded", partition=slot.partition, records=slot.records_read,
                       transactional_ids=len(shard.txns), unfinished=unfinished)
            return
        ongoing = sum(1 for meta in shard.txns.values() if meta.state is TxnState.ONGOING)
        (logs.event if slot.records_read else logs.debug)(
            "transactions.took_over", partition=slot.partition, epoch=slot.epoch, records=slot.records_read,
            transactional_ids=len(shard.txns), unfinished=unfinished, ongoing=ongoing,
            seconds=round(slot.load_seconds, 4))

    def on_loaded(self, slot: TxnShardRuntime, now: int) -> None:
        del now
        unfinished = slot.shard.unfinished()
        self._log_loaded(slot, len(unfinished))
        for job in unfinished:
            self.write_markers(job)

    def writes(self, slot: TxnShardRuntime, result: TxnResult, now: int, started: float | None) -> list[Append]:
        del slot, started  # nothing observed here
        if not result.records:
            return []
        entries: list[Entry] = []
        for record in result.records:
            key, value = encode_transaction_record(record)
            entries.append((key, value, now))
        return [Append(entries, ())]

    def on_timer(self, slot: TxnShardRuntime, key: str, now: int) -> tuple[TxnResult, Done | None]:
        result = slot.shard.on_timer(key, now)
        if key.startswith(TIMEOUT_KEY):
            for job in result.markers:
                METRICS.transactions_timed_out.inc()
                logs.event("transactions.timed_out", transactional_id=job.transactional_id,
                           producer_id=job.producer_id, producer_epoch=job.producer_epoch)
        elif key == EXPIRE_IDS_KEY and result.records:
            METRICS.transactional_ids_expired.inc(len(result.records))
            logs.event("transactions.ids_expired", count=len(result.records),
                       transactional_ids=",".join(r.transactional_id for r in result.records[:10]))
        markers = result.markers
        if not markers:
            return result, None

        def durable(ok: bool) -> None:
            if ok:
                for job in markers:
                    self.write_markers(job)

        return result, durable

    def on_unloaded(self, slot: TxnShardRuntime) -> None:
        """The partition's marker jobs stop (its next load writes them again) and whoever waited for
        them hears that they did not complete here."""
        index = slot.partition
        for key in [k for k in self.in_flight if self.partition_for(k[0]) == index]:
            self.in_flight.discard(key)
        for key in [k for k in self.completion_waiters if self.partition_for(k[0]) == index]:
            for waiter in self.completion_waiters.pop(key):
                waiter(False)

    # ---- ownership (cluster mode) ---------------------------------------------------------------

    def gain(self, index: int, epoch: int) -> None:
        """This node now owns ``__transaction_state`` partition ``index``: load it from storage."""
        self.shards[index].gain(epoch)

    def lose(self, index: int) -> None:
        """Stop coordinating the partition's transactional ids at once: another node owns it."""
        self.shards[index].lose()

    async def release(self, index: int) -> None:
        """Controlled hand-over: what was queued becomes durable (and is answered), then unload."""
        await self.shards[index].release()

    # ---- operations ---------------------------------------------------------------------------

    def write(self, transactional_id: str, op: TxnOp, done: TxnDone, *, until_complete: bool = False) -> None:
        """Runs ``op`` on ``transactional_id``'s shard now; ``done(result, ok)`` once its records,
        and every write queued before them on the partition, are durable. Marker jobs start then;
        with ``until_complete``, ``done`` waits for them to complete too (EndTxn: see the handler).
        A shard not loaded runs nothing: ``done`` hears NOT_COORDINATOR."""
        ran: list[TxnResult] = []

        def run(shard: TransactionCoordinatorShard, now: int) -> TxnResult:
            result = op(shard, now)
            ran.append(result)
            return result

        def durable(ok: bool) -> None:
            if not ran:
                done(TxnResult(error=ErrorCode.NOT_COORDINATOR), False)
                return
            result = ran[0]
            if not ok:
                done(result, False)
                return
            markers = result.markers
            if until_complete and markers:
                completed = Countdown(len(markers), lambda all_ok: done(result, all_ok))
                for job in markers:
                    self.write_markers(job, completed.arrive)
                return
            done(result, True)
            for job in markers:
                self.write_markers(job)

        self.slot_for(transactional_id).write(run, durable)

    # ---- the second phase ------------------------------------------------------------------

    def write_markers(self, job: MarkerJob, on_complete: Done | None = None) -> None:
        """Writes the job's marker to every partition (each by its owner), then completes the
        transaction; ``on_complete(ok)`` once the Complete record is durable."""
        key = (job.transactional_id, job.producer_id, job.producer_epoch)
        if on_complete is not None:
            self.completion_waiters.setdefault(key, []).append(on_complete)
        if key in self.in_flight:
            return
        self.in_flight.add(key)
        left = set(job.partitions)
        if not left:
            self._complete(job, key)
            return
        slot = self.slot_for(job.transactional_id)
        tenure = slot.tenure
        epoch = self.coordinator_epoch(job.transactional_id)

        def written(tp: TopicPartition, ok: bool) -> None:
            if key not in self.in_flight or slot.tenure != tenure:
                return  # the partition was lost (or reloaded): its next load writes the markers
            if not ok:
                logs.warn("transactions.marker_failed", transactional_id=job.transactional_id, topic=tp[0],
                          partition=tp[1])
                self.logs.spawn(self._retry, job, tp, written, epoch)
                return
            left.discard(tp)
            if not left:
                self._complete(job, key)

        self.markers.write_all(job, job.partitions, written, epoch)

    async def _retry(self, job: MarkerJob, tp: TopicPartition, written: Callable[[TopicPartition, bool], None],
                     epoch: int) -> None:
        await trio.sleep(MARKER_RETRY_S)
        self.markers.write_all(job, [tp], written, epoch)

    def _complete(self, job: MarkerJob, key: MarkerKey) -> None:
        self.in_flight.discard(key)
        waiters = self.completion_waiters.pop(key, [])

        def durable(result: TxnResult, ok: bool) -> None:
            if ok and result.records:
                (METRICS.transactions_committed if job.commit else METRICS.transactions_aborted).inc()
            for waiter in waiters:
                waiter(ok)

        # On a shard no longer loaded the write does not run (its reload writes the markers again).
        self.write(job.transactional_id, lambda shard, now: shard.markers_written(job, now), durable)
        logs.debug("transactions.completed", transactional_id=job.transactional_id,
                   result="commit" if job.commit else "abort", partitions=len(job.partitions))

    # ---- running ----------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Loads (a single broker: every partition; a cluster node: each as it claims it), then runs
        the shards' timers: the abort of each transaction at its timeout, the forgetting of expired transactional ids every ``id_expiry_check_interval_ms``."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.runtime.run_timers)
            task_status.started()
            if self.cluster is None:
                started = time.perf_counter()
                await self.runtime.load_all()
                loaded = [s for s in self.shards if s.loaded]
                logs.event("transactions.loaded", transactional_ids=sum(len(s.shard.txns) for s in loaded),
                           unfinished=sum(len(s.shard.unfinished()) for s in loaded),
                           seconds=round(time.perf_counter() - started, 3))
            self.started = True
