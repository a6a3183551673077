"""The transaction coordinator's runtime: ``__transaction_state`` partitions owned through the log
runtime, replay at start, operations applied to the pure coordinator with their records made
durable before any answer, the second phase of every ended transaction (markers, then Complete),
and the periodic abort of transactions past their timeout.

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
go to each partition's owner (``broker.transactions.markers``), carrying the owner epoch of the
transactional id's partition as the coordinator epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trio

from broker.cluster.node import ClusterNode
from broker.coordinator.partitioning import partition_for
from broker.log_runtime.runtime import Entry, LogRuntime, Partition
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.transactions.markers import COORDINATOR_EPOCH, MarkerWriter
from broker.txn_coordinator.coordinator import MarkerJob, TransactionCoordinator, TxnResult
from broker.txn_coordinator.metadata import TxnState
from protocol.errors import DecodeError, ErrorCode
from protocol.record_batch import decode_records
from protocol.transaction_log_records import (
    TRANSACTION_STATE_TOPIC,
    decode_transaction_record,
    encode_transaction_record,
)
from storage.config import LogConfig
from storage.layout import partition_dir_name

MARKER_RETRY_S = 0.2
RELOAD_DELAY_S = 0.1


class _PartitionOwner:
    """What the log runtime tells when a write to one ``__transaction_state`` partition failed
    (cluster mode: each partition is reloaded on its own)."""

    def __init__(self, service: TransactionService, index: int) -> None:
        self.service = service
        self.index = index

    def on_write_failed(self, exc: Exception) -> None:
        del exc  # the log runtime has logged it
        self.service.partition_failed(self.index)


class TransactionService:
    def __init__(self, runtime: LogRuntime, coordinator: TransactionCoordinator, markers: MarkerWriter,
                 num_partitions: int, log_config: LogConfig, clock: Callable[[], int],
                 abort_check_interval_ms: int, id_expiry_check_interval_ms: int = 3_600_000,
                 cluster: ClusterNode | None = None) -> None:
        self.runtime = runtime
        self.cluster = cluster
        self.coordinator = coordinator
        self.markers = markers
        self.num_partitions = num_partitions
        self.log_config = log_config
        self.clock = clock
        self.abort_check_interval_ms = abort_check_interval_ms
        self.id_expiry_check_interval_ms = id_expiry_check_interval_ms
        self.parts: dict[int, Partition] = {}
        self.loaded = False
        self.in_flight: set[tuple[str, int, int]] = set()  # marker jobs being written
        # Callbacks waiting for a marker job's transaction to complete (EndTxn answers).
        self.completion_waiters: dict[tuple[str, int, int], list[Callable[[bool], None]]] = {}
        # Cluster mode: the partitions this node owns (index -> owner epoch), those loaded, and a
        # count of ownership changes per partition (a load or a marker retry of an earlier tenure
        # is dropped). One load at a time per partition.
        self.owned: dict[int, int] = {}
        self.loaded_parts: set[int] = set()
        self.tenure: dict[int, int] = {}
        self.load_locks: dict[int, trio.Lock] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def error_for(self, transactional_id: str) -> int:
        """Whether this node coordinates ``transactional_id`` now: 0, NOT_COORDINATOR (another node
        does, or none yet: the client finds the coordinator again) or COORDINATOR_LOAD_IN_PROGRESS."""
        if self.cluster is None:
            return ErrorCode.NONE if self.loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        index = self.partition_for(transactional_id)
        if index not in self.owned or not self.cluster.owns((TRANSACTION_STATE_TOPIC, index)):
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE if index in self.loaded_parts else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The epoch markers of ``transactional_id``'s transactions carry."""
        if self.cluster is None:
            return COORDINATOR_EPOCH
        return self.owned.get(self.partition_for(transactional_id), COORDINATOR_EPOCH) & 0x7FFFFFFF

    # ---- loading ----------------------------------------------------------------------------

    def _open_and_replay(self) -> list[Partition]:
        opened = []
        replayed = 0
        for topic, index in self.runtime.manager.existing_partitions():
            if topic != TRANSACTION_STATE_TOPIC or index >= self.num_partitions:
                continue
            part = self.runtime.open(topic, index, self.log_config, owner=self)
            for batch in part.log.batches():
                if batch.is_control:
                    continue
                for record in decode_records(batch):
                    if record.key is None:
                        continue
                    try:
                        self.coordinator.replay(decode_transaction_record(record.key, record.value))
                    except DecodeError as exc:
                        logs.warn("transactions.unreadable_record", partition=index, error=str(exc))
                        continue
                    replayed += 1
            opened.append(part)
        logs.debug("transactions.replayed", partitions=len(opened), records=replayed)
        return opened

    async def load(self) -> None:
        started = time.perf_counter()
        for part in await trio.to_thread.run_sync(self._open_and_replay):
            self.parts[part.index] = self.runtime.adopt(part)
        self.loaded = True
        unfinished = self.coordinator.unfinished()
        logs.event("transactions.loaded", transactional_ids=len(self.coordinator.txns), unfinished=len(unfinished),
                   seconds=round(time.perf_counter() - started, 3))
        for job in unfinished:
            self.write_markers(job)

    def on_write_failed(self, exc: Exception) -> None:
        """A ``__transaction_state`` write failed: every partition is closed and the coordinator
        rebuilt from what the logs hold (requests meanwhile answer COORDINATOR_LOAD_IN_PROGRESS)."""
        del exc
        if not self.loaded:
            return
        self.loaded = False
        for part in list(self.parts.values()):
            self.runtime.close_partition(part)
        self.parts.clear()
        self.coordinator.txns.clear()
        self.runtime.spawn(self._reload)

    async def _reload(self) -> None:
        await trio.sleep(RELOAD_DELAY_S)
        await self.load()

    # ---- ownership (cluster mode) ---------------------------------------------------------------

    def gain(self, index: int, epoch: int) -> None:
        """This node now owns ``__transaction_state`` partition ``index``: load it from storage
        (whatever an earlier tenure left in memory is dropped first)."""
        self.tenure[index] = self.tenure.get(index, 0) + 1
        self._unload(index)
        self.owned[index] = epoch
        self.runtime.spawn(self._load_partition, index)

    def lose(self, index: int) -> None:
        """Stop coordinating the partition's transactional ids at once: another node owns it."""
        self.tenure[index] = self.tenure.get(index, 0) + 1
        self.owned.pop(index, None)
        self._unload(index)

    async def release(self, index: int) -> None:
        """Controlled hand-over: what was queued becomes durable (and is answered), then unload."""
        self.owned.pop(index, None)
        part = self.parts.get(index)
        if part is not None:
            await part.settle(5)
        self.lose(index)

    def partition_failed(self, index: int) -> None:
        """A write to the partition failed: unload it and, if still ours, load it again from storage."""
        epoch = self.owned.get(index)
        self.lose(index)
        if epoch is not None:
            self.runtime.spawn(self._regain, index, epoch, self.tenure[index])

    async def _regain(self, index: int, epoch: int, tenure: int) -> None:
        await trio.sleep(RELOAD_DELAY_S)
        if self.tenure.get(index) == tenure and self.cluster is not None and \
                self.cluster.owns((TRANSACTION_STATE_TOPIC, index)):
            self.gain(index, epoch)

    def _unload(self, index: int) -> None:
        self.loaded_parts.discard(index)
        part = self.parts.pop(index, None)
        if part is not None:
            self.runtime.close_partition(part)
        for txn_id in [t for t in self.coordinator.txns if self.partition_for(t) == index]:
            del self.coordinator.txns[txn_id]
        for key in [k for k in self.in_flight if self.partition_for(k[0]) == index]:
            self.in_flight.discard(key)
        for key in [k for k in self.completion_waiters if self.partition_for(k[0]) == index]:
            for waiter in self.completion_waiters.pop(key):
                waiter(False)

    def _open_and_replay_one(self, index: int, epoch: int) -> tuple[Partition | None, TransactionCoordinator, int]:
        """Opens partition ``index`` at owner ``epoch`` and replays it into a coordinator of its own
        (merged on the trio thread). A partition never written has no log yet: it is created on
        its first write (``_part``). Blocking."""
        loaded = TransactionCoordinator(self.coordinator.new_producer_id, self.coordinator.max_timeout_ms,
                                        self.coordinator.id_expiration_ms)
        if not (self.runtime.manager.log_dir / partition_dir_name(TRANSACTION_STATE_TOPIC, index)).is_dir():
            return None, loaded, 0
        part = self.runtime.open(TRANSACTION_STATE_TOPIC, index, self.log_config, owner=_PartitionOwner(self, index))
        part.log.begin_epoch(epoch)
        replayed = 0
        for batch in part.log.batches():
            if batch.is_control:
                continue
            for record in decode_records(batch):
                if record.key is None:
                    continue
                try:
                    loaded.replay(decode_transaction_record(record.key, record.value))
                except DecodeError as exc:
                    logs.warn("transactions.unreadable_record", partition=index, error=str(exc))
                    continue
                replayed += 1
        return part, loaded, replayed

    async def _load_partition(self, index: int) -> None:
        lock = self.load_locks.setdefault(index, trio.Lock())
        async with lock:
            epoch = self.owned.get(index)
            if epoch is None or index in self.loaded_parts:
                return
            tenure = self.tenure.get(index)
            started = time.perf_counter()
            part, loaded, replayed = await trio.to_thread.run_sync(self._open_and_replay_one, index, epoch)
            if self.tenure.get(index) != tenure or index not in self.owned:
                # Lost while loading: close what was opened, coordinate nothing.
                if part is not None:
                    part.log.close()
                    self.runtime.manager.forget(TRANSACTION_STATE_TOPIC, index)
                return
            if part is not None:
                self.parts[index] = self.runtime.adopt(part)
            self.coordinator.txns.update(loaded.txns)
            self.loaded_parts.add(index)
            unfinished = loaded.unfinished()
            ongoing = sum(1 for meta in loaded.txns.values() if meta.state is TxnState.ONGOING)
            (logs.event if replayed else logs.debug)("transactions.took_over", partition=index, epoch=epoch, records=replayed,
                       transactional_ids=len(loaded.txns), unfinished=len(unfinished), ongoing=ongoing,
                       seconds=round(time.perf_counter() - started, 4))
            for job in unfinished:
                self.write_markers(job)

    # ---- applying operations -----------------------------------------------------------------

    def _part(self, index: int) -> Partition:
        part = self.parts.get(index)
        if part is None:
            if self.cluster is None:
                part = self.runtime.open(TRANSACTION_STATE_TOPIC, index, self.log_config, owner=self)
            else:
                part = self.runtime.open(TRANSACTION_STATE_TOPIC, index, self.log_config,
                                         owner=_PartitionOwner(self, index))
                part.log.begin_epoch(self.owned[index])
            part = self.runtime.adopt(part)
            self.parts[index] = part
        return part

    def apply(self, result: TxnResult, transactional_id: str | None, done: Callable[[bool], None],
              *, until_complete: bool = False) -> None:
        """Queues the result's records; ``done(ok)`` once they, and every write queued before them
        on the partitions they or ``transactional_id`` live in, are durable. Marker jobs start then;
        with ``until_complete``, ``done`` waits for them to complete too (EndTxn: see the handler)."""
        now = self.clock()
        by_partition: dict[int, list[Entry]] = {}
        for record in result.records:
            key, value = encode_transaction_record(record)
            by_partition.setdefault(self.partition_for(record.transactional_id), []).append((key, value, now))
        waits: list[Partition] = []
        if self.cluster is not None and any(index not in self.loaded_parts or index not in self.owned
                                            for index in by_partition):
            done(False)  # the partition was lost (or is being handed over): its new owner answers the retry
            return
        for index, entries in by_partition.items():
            part = self._part(index)
            self.runtime.append_records(part, entries)
            waits.append(part)
        if transactional_id is not None:
            own = self.parts.get(self.partition_for(transactional_id))
            if own is not None and own not in waits:
                waits.append(own)
        markers = result.markers
        remaining = [len(waits)]

        def one(ok: bool) -> None:
            if remaining[0] <= 0:
                return
            if not ok:
                remaining[0] = 0
                done(False)
                return
            remaining[0] -= 1
            if remaining[0] == 0:
                finish()

        def finish() -> None:
            if until_complete and markers:
                left = [len(markers)]

                def completed(ok: bool) -> None:
                    if left[0] <= 0:
                        return
                    left[0] = left[0] - 1 if ok else 0
                    if left[0] == 0:
                        done(ok)

                for job in markers:
                    self.write_markers(job, completed)
                return
            done(True)
            for job in markers:
                self.write_markers(job)

        if not waits:
            finish()
            return
        for part in waits:
            part.when_durable(one)

    # ---- the second phase ------------------------------------------------------------------

    def write_markers(self, job: MarkerJob, on_complete: Callable[[bool], None] | None = None) -> None:
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
        index = self.partition_for(job.transactional_id)
        tenure = self.tenure.get(index)
        epoch = self.coordinator_epoch(job.transactional_id)

        def written(tp: Any, ok: bool) -> None:
            if key not in self.in_flight or self.tenure.get(index) != tenure:
                return  # the partition was lost (or reloaded): its next load writes the markers
            if not ok:
                logs.warn("transactions.marker_failed", transactional_id=job.transactional_id, topic=tp[0],
                          partition=tp[1])
                self.runtime.spawn(self._retry, job, tp, written, epoch)
                return
            left.discard(tp)
            if not left:
                self._complete(job, key)

        self.markers.write_all(job, job.partitions, written, epoch)

    async def _retry(self, job: MarkerJob, tp: Any, written: Callable[[Any, bool], None], epoch: int) -> None:
        await trio.sleep(MARKER_RETRY_S)
        self.markers.write_all(job, [tp], written, epoch)

    def _complete(self, job: MarkerJob, key: tuple[str, int, int]) -> None:
        self.in_flight.discard(key)
        if not self.loaded or (self.cluster is not None and
                               self.partition_for(job.transactional_id) not in self.loaded_parts):
            for waiter in self.completion_waiters.pop(key, []):
                waiter(False)
            return  # the reload writes the markers again
        waiters = self.completion_waiters.pop(key, [])

        def durable(ok: bool) -> None:
            if ok and result.records:
                (METRICS.transactions_committed if job.commit else METRICS.transactions_aborted).inc()
            for waiter in waiters:
                waiter(ok)

        result = self.coordinator.markers_written(job, self.clock())
        self.apply(result, job.transactional_id, durable)
        logs.debug("transactions.completed", transactional_id=job.transactional_id,
                   result="commit" if job.commit else "abort", partitions=len(job.partitions))

    # ---- running ----------------------------------------------------------------------------

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Loads, then aborts expired transactions every ``abort_check_interval_ms`` and forgets
        expired transactional ids every ``id_expiry_check_interval_ms``."""
        task_status.started()
        if self.cluster is None:
            await self.load()
        else:
            # Partitions load one by one as this node claims them (``gain``).
            self.loaded = True
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._every, self.id_expiry_check_interval_ms, self._forget_expired_ids)
            await self._every(self.abort_check_interval_ms, self._abort_expired_transactions)

    async def _every(self, interval_ms: int, step: Callable[[int], TxnResult]) -> None:
        """Runs ``step(now)`` every ``interval_ms`` once loaded, and writes the records it returns."""
        while True:
            await trio.sleep(interval_ms / 1000)
            if self.loaded:
                result = step(self.clock())
                if result.records:
                    self.apply(result, None, lambda ok: None)

    def _forget_expired_ids(self, now: int) -> TxnResult:
        result = self.coordinator.expire_transactional_ids(now)
        if result.records:
            METRICS.transactional_ids_expired.inc(len(result.records))
            logs.event("transactions.ids_expired", count=len(result.records),
                       transactional_ids=",".join(r.transactional_id for r in result.records[:10]))
        return result

    def _abort_expired_transactions(self, now: int) -> TxnResult:
        result = self.coordinator.expire(now)
        for job in result.markers:
            METRICS.transactions_timed_out.inc()
            logs.event("transactions.timed_out", transactional_id=job.transactional_id,
                       producer_id=job.producer_id, producer_epoch=job.producer_epoch)
        return result
