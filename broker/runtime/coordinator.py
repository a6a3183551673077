"""One runtime for every coordinator: ``CoordinatorRuntime`` runs a pure core's shards, one per
partition of the coordinator's internal topic (``__consumer_offsets`` for groups,
``__transaction_state`` for transactions).

For each partition (``ShardRuntime``) it owns the partition (always on a single broker; in a
cluster while this node holds its claim: ``gain``, ``release``, ``lose``), loads it by replaying
its log into a fresh shard (``load``; the coordinator's ``replay`` does the reading), runs write
operations (the operation runs on the shard now, its records are queued on the partition in the
log runtime, and its replies leave only once those records, and every write queued before them,
are durable), answers reads at the last durable write (``after_durable``), fires the shard's
timers as write operations, and unloads (every parked request hears NOT_COORDINATOR, timers stop,
the log closes, the state goes). A write the log did not take unloads the shard and loads it again
from what the log really holds.

What differs between coordinators is in their ``Coordinator`` (``broker/coordinators/group/service/coordinator.py``,
``broker/coordinators/transaction/service/coordinator.py``): how a partition is replayed, how results become records, what
happens once a shard has loaded. The cores stay pure: an operation is ``op(shard, ..., now)`` and
returns a result of replies, records and timers.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import trio

from broker.cluster.node import ClusterNode
from broker.log_runtime.runtime import BatchWrite, DurableReply, Entry, LogRuntime, Partition
from broker.observability import logs
from broker.runtime.countdown import Countdown
from broker.runtime.timer_requests import CancelTimer, SetTimer
from broker.runtime.timers import TimerService, steady_ms, wall_ms
from protocol.errors import DecodeError, ErrorCode
from protocol.record_batch import build_simple_batch, decode_records
from storage.config import LogConfig
from storage.errors import StorageError
from storage.layout import partition_dir_name

RELOAD_DELAY_S = 0.1


class CoordinatorShard(Protocol):
    """What the runtime asks of every pure core's shard itself (the rest goes through its
    ``Coordinator``): the timers to arm once a replay has rebuilt it."""

    def on_loaded(self, now_ms: int) -> Sequence[SetTimer]: ...


class OpResult(Protocol):
    """An operation's result as the runtime reads it: replies to parked requests (by token) and
    timers to arm or cancel. Its records, which must be durable before any reply leaves, are the
    coordinator's to turn into writes (``Coordinator.writes``)."""

    @property
    def replies(self) -> Sequence[tuple[int, object]]: ...

    @property
    def timers(self) -> Sequence[SetTimer | CancelTimer]: ...


S = TypeVar("S", bound=CoordinatorShard)
R = TypeVar("R", bound=OpResult)
Done = Callable[[bool], None]


class Append(NamedTuple):
    """One write of an operation: records (written in the log runtime's shared record path) or a
    record batch of its own; ``keys`` name what it changes (a group, a transactional id): a read
    of one key waits only for the writes of that key."""

    data: list[Entry] | bytes
    keys: Collection[str]


class PreparedReply(DurableReply, Protocol):
    """A request's reply slot, given to ``execute`` with its ``set`` as ``deliver``."""

    def prepare(self, response: Any) -> bool:
        """Encode ``response`` now, to be released when its records are durable (by ``set`` with
        the same response, or sent by the sync thread that makes them durable); False when only
        ``set`` may release it."""


@dataclass(slots=True)
class Parked:
    deliver: Callable[[Any], None]
    on_error: Callable[[int], Any]
    reply: PreparedReply | None = None


class Coordinator(Generic[S, R]):
    """One coordinator's part: its topic, its shards, and the hooks the runtime calls."""

    topic: str
    log_config: LogConfig
    # A partition whose log does not exist yet is created by its first write, not by its load.
    create_on_write = False

    def new_shard(self, index: int) -> S:
        raise NotImplementedError

    # What replay logs for a record it cannot read (skipped; the replay goes on).
    unreadable_event = "coordinator.unreadable_record"

    def replay_record(self, slot: ShardRuntime[S, R], key: bytes, value: bytes | None) -> bool:
        """Decodes one record of the log and replays it into ``slot.shard``: False when it holds
        nothing the shard keeps. Raises ``DecodeError`` for a record it cannot read."""
        raise NotImplementedError

    def replay(self, slot: ShardRuntime[S, R], part: Partition) -> int:
        """Replays ``part``'s log into ``slot.shard``, record by record through ``replay_record``
        (control batches and keyless records skipped); returns the records replayed. Blocking: runs
        on a worker thread. A coordinator with a faster way to load (groups: the replay snapshot and
        the replay plan) overrides it."""
        replayed = 0
        for batch in part.log.batches():
            if batch.is_control:
                continue
            for record in decode_records(batch):
                if record.key is None:
                    continue
                try:
                    if self.replay_record(slot, record.key, record.value):
                        replayed += 1
                except DecodeError as exc:
                    logs.warn(self.unreadable_event, partition=slot.partition, error=str(exc))
        return replayed

    def writes(self, slot: ShardRuntime[S, R], result: R, now: int, started: float | None) -> list[Append]:
        """The writes that make ``result`` durable, in log order; called once for every result,
        before anything of it is written, it is also where the coordinator observes results
        (metrics, the journal). ``started``: ``time.perf_counter()`` when a request's operation
        began (None for other operations)."""
        raise NotImplementedError

    def on_timer(self, slot: ShardRuntime[S, R], key: str, now: int) -> tuple[R, Done | None]:
        """Fires the shard's timer ``key``: the result to write and, optionally, what to call once
        it is durable (or has failed)."""
        raise NotImplementedError

    def on_loaded(self, slot: ShardRuntime[S, R], now: int) -> None:
        """The shard has just loaded (its timers are armed): the coordinator's own follow-ups."""

    def on_unloaded(self, slot: ShardRuntime[S, R]) -> None:
        """The shard has just unloaded."""


def _nothing() -> None:
    pass


def _always() -> bool:
    return True


class ShardRuntime(Generic[S, R]):
    """One partition of a coordinator: its shard, its log, its ownership."""

    def __init__(self, runtime: CoordinatorRuntime[S, R], partition: int) -> None:
        self.runtime = runtime
        self.coordinator = runtime.coordinator
        self.partition = partition
        self.shard: S = runtime.coordinator.new_shard(partition)
        self.part: Partition | None = None
        self.loaded = False
        self.parked: dict[int, Parked] = {}
        # Key -> the partition's write sequence number of the last write that changed it. A read of
        # one key waits for that write only, not for every write queued on the shard: with many
        # groups per shard and commits arriving all the time, a shard is rarely without a write
        # in flight, and heartbeats would otherwise wait for a disk flush.
        self.key_writes: dict[str, int] = {}
        self.load_seconds = 0.0
        self.records_read = 0
        # Operations of the broker itself that arrived while the shard was not loaded: run right
        # after its load.
        self.after_load: list[tuple[Callable[[S, int], R], Done]] = []
        # Cluster mode: whether this node owns the partition, at which owner epoch (and the epoch
        # its log then took), and a count of ownership changes (a load that finishes after the
        # partition was lost is thrown away).
        self.owned = runtime.cluster is None
        self.epoch: int | None = None
        self.log_epoch: int | None = None
        self.tenure = 0
        # One load at a time: a partition lost and regained while loading is loaded again after
        # the first load has closed what it opened.
        self.load_lock = trio.Lock()

    @property
    def serving(self) -> bool:
        """This node coordinates the partition now (owns it, and its lease holds)."""
        return self.owned and self.runtime.may_write()

    @property
    def error(self) -> int:
        """Whether a request for this shard may run: NONE, NOT_COORDINATOR (another node
        coordinates it, or none yet: the client finds the coordinator again) or
        COORDINATOR_LOAD_IN_PROGRESS."""
        if not self.serving:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE if self.loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    # ---- loading ----------------------------------------------------------------------------

    def _open(self) -> Partition:
        """Opens (recovering) or creates the partition's log at this node's owner epoch. Blocking."""
        runtime = self.runtime
        part = runtime.logs.open(self.coordinator.topic, self.partition, self.coordinator.log_config, owner=self)
        if self.epoch is not None:
            self.log_epoch = part.log.begin_epoch(self.epoch)
        return part

    def _open_and_replay(self) -> tuple[Partition | None, int]:
        coordinator = self.coordinator
        manager = self.runtime.logs.manager
        if coordinator.create_on_write and not (manager.log_dir / partition_dir_name(coordinator.topic,
                                                                                     self.partition)).is_dir():
            return None, 0
        part = self._open()
        report = manager.reports.get((coordinator.topic, self.partition))
        if report is not None and not report.clean:
            logs.warn("log.recovered", topic=coordinator.topic, partition=self.partition,
                      dropped_bytes=report.bytes_dropped, details=report.summary())
        elif report is not None and (report.rebuilt_indexes or report.leftovers):
            logs.event("log.recovered", topic=coordinator.topic, partition=self.partition, details=report.summary())
        return part, coordinator.replay(self, part)

    async def load(self) -> None:
        try:
            async with self.load_lock:
                if self.owned and not self.loaded:
                    await self._load()
        finally:
            self.runtime.loads_changed()

    async def _load(self) -> None:
        started = time.perf_counter()
        tenure = self.tenure
        coordinator = self.coordinator
        try:
            part, count = await trio.to_thread.run_sync(self._open_and_replay)
        except (OSError, StorageError) as exc:
            # Fenced (the claim ended while opening) or the disk failed: what the replay built is
            # dropped; a shard still owned tries again from its files.
            self.shard = coordinator.new_shard(self.partition)
            logs.warn("shard.load_failed", topic=coordinator.topic, partition=self.partition, error=repr(exc))
            if tenure == self.tenure:
                self._retry_or_hand_back()
            return
        if tenure != self.tenure or not self.owned:
            # Lost while loading: another node owns it now; close what we opened, serve nothing.
            if part is not None:
                part.log.close()
                self.runtime.logs.manager.forget(coordinator.topic, self.partition)
            self.shard = coordinator.new_shard(self.partition)
            return
        if part is not None:
            self.part = self.runtime.logs.adopt(part)
        now = self.runtime.clock()
        timers = self.runtime.timers
        for timer in self.shard.on_loaded(now):
            timers.set(self.partition, timer.key, timer.deadline_ms)
        self.load_seconds = time.perf_counter() - started
        self.records_read = count
        self.loaded = True
        coordinator.on_loaded(self, now)
        queued, self.after_load = self.after_load, []
        for op, done in queued:
            self.run_after_load(op, done)

    # ---- operations ---------------------------------------------------------------------------

    def execute(self, op: Callable[[S, int, int], R], deliver: Callable[[Any], None],
                on_error: Callable[[int], Any], key: str | None = None, *,
                reply: PreparedReply | None = None) -> None:
        """A request's operation: ``op(shard, token, now)`` runs now (the shard is loaded: the
        caller checked ``error``); ``deliver`` gets the reply the result holds for ``token`` once
        its records, and every write queued before them, are durable (or later still, when the
        core parks the request), ``on_error(code)``'s reply if the shard unloads first.

        ``key`` names the one key (a group) the operation reads and writes: when it writes
        nothing, its replies wait only for that key's writes in flight (``settled_for``).

        ``reply``: the request's reply slot, when ``deliver`` is its ``set``. A reply that waits for
        the operation's own records is then encoded at once, and the sync thread whose fdatasync
        makes them durable may send it."""
        token = next(self.runtime.tokens)
        self.parked[token] = Parked(deliver, on_error, reply)
        now = self.runtime.clock()
        started = time.perf_counter()
        result = op(self.shard, token, now)
        self.apply(result, now, key, started=started)

    def write(self, op: Callable[[S, int], R], done: Done) -> R | None:
        """An operation answered through ``done``: ``op(shard, now)`` runs now and its result is
        returned; ``done(True)`` once its records (and every write queued before them) are durable,
        ``done(False)`` if they fail. On a shard not loaded, or not owned any more (lost, or being
        handed over), it runs not at all: ``done(False)`` and None."""
        if not (self.loaded and self.owned):
            done(False)
            return None
        now = self.runtime.clock()
        result = op(self.shard, now)
        self.apply(result, now, done=done)
        return result

    def run_after_load(self, op: Callable[[S, int], R], done: Done) -> None:
        """An operation of the broker itself: run now, or right after the load when the shard is not
        loaded; ``done`` as for ``write`` (after a failed write the shard is rebuilt from its log,
        without the operation's records). On a partition another node owns (cluster mode) it does
        nothing: that node runs it."""
        if not self.owned:
            done(True)
            return
        if not self.loaded:
            self.after_load.append((op, done))
            return
        self.write(op, done)

    def fire_timer(self, key: str, now: int) -> None:
        if self.loaded:
            result, done = self.coordinator.on_timer(self, key, now)
            self.apply(result, now, done=done)

    def apply(self, result: R, now: int, key: str | None = None, *, done: Done | None = None,
              started: float | None = None) -> None:
        """Arms the result's timers, queues its writes, and releases its replies (and ``done``)
        once they are durable."""
        if result.timers:
            timers = self.runtime.timers
            index = self.partition
            for t in result.timers:
                if isinstance(t, SetTimer):
                    timers.set(index, t.key, t.deadline_ms)
                else:
                    timers.cancel(index, t.key)
        part = self.part
        appends = self.coordinator.writes(self, result, now, started)
        if appends:
            if part is None:
                part = self._create()
            self._queue(part, appends)
        elif key is not None and self.settled_for(key):
            # Wrote nothing, and nothing of its key is in flight: the replies show durable state.
            for token, response in result.replies:
                self._deliver(token, response)
            if done is not None:
                done(True)
            return
        if part is None or part.settled:
            for token, response in result.replies:
                self._deliver(token, response)
            if done is not None:
                done(True)
            return
        logs_runtime = self.runtime.logs
        for token, response in result.replies:
            if appends:
                parked = self.parked.get(token)
                if parked is not None and parked.reply is not None and parked.reply.prepare(response):
                    logs_runtime.send_when_durable(part, parked.reply)
            part.when_durable(partial(self._deliver_if_durable, token, response))
        if done is not None:
            part.when_durable(done)

    def _create(self) -> Partition:
        """The partition's log on its first write (``Coordinator.create_on_write``): opened on the
        event loop, as creating an empty log takes no replay."""
        part = self.part = self.runtime.logs.adopt(self._open())
        return part

    def _queue(self, part: Partition, appends: list[Append]) -> None:
        """Queues the writes in order. Records go through the log runtime's record path (one batch
        per pass, shared with other operations) unless batches of their own are queued on the
        partition already: then they are queued as a batch of their own behind them, so the log
        holds everything in operation order."""
        logs_runtime = self.runtime.logs
        key_writes = self.key_writes
        for data, keys in appends:
            if isinstance(data, bytes):
                logs_runtime.append_batch(part, BatchWrite(data, -1, _nothing))
            elif part.batches:
                logs_runtime.append_batch(part, BatchWrite(build_simple_batch(data), -1, _nothing))
            else:
                logs_runtime.append_records(part, data)
            seq = part.queued_seq
            for key in keys:
                key_writes[key] = seq

    def settled_for(self, key: str) -> bool:
        """No write changing ``key`` is queued or in flight."""
        part = self.part
        if part is None or part.settled:
            # Every entry is stale: forget them all (this keeps the map as small as the set of
            # keys written to since the shard was last idle).
            self.key_writes.clear()
            return True
        seq = self.key_writes.get(key)
        return seq is None or seq <= part.durable_seq

    def _deliver_if_durable(self, token: int, response: object, ok: bool) -> None:
        # On a failed write the failure policy has already answered the request with an error.
        if ok:
            self._deliver(token, response)

    def _deliver(self, token: int, response: object) -> None:
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
        self._retry_or_hand_back()

    def _retry_or_hand_back(self) -> None:
        """The shard is owned but not loaded (a load or a write failed): load it again, or, while
        the lease cannot be trusted, give the claim up too (it is claimed afresh if the lease turns
        out to hold). Never owned and unloaded with nothing under way: clients would be told
        COORDINATOR_LOAD_IN_PROGRESS for as long as the claim lasts."""
        cluster = self.runtime.cluster
        if not self.owned:
            return
        if self.serving:
            self.runtime.logs.spawn(self.reload)
        elif cluster is not None:
            cluster.relinquish((self.coordinator.topic, self.partition), "not certainly the owner while loading")

    def unload(self) -> None:
        """Stop serving: every parked request hears NOT_COORDINATOR (clients find the coordinator
        again), timers stop, the log is closed, the state dropped."""
        self.loaded = False
        self.key_writes.clear()  # sequence numbers of the closed partition
        self.runtime.timers.cancel_shard(self.partition)
        for token, parked in list(self.parked.items()):
            parked.deliver(parked.on_error(ErrorCode.NOT_COORDINATOR))
            del self.parked[token]
        if self.part is not None:
            self.runtime.logs.close_partition(self.part)
            self.part = None
        self.shard = self.coordinator.new_shard(self.partition)
        self.coordinator.on_unloaded(self)

    async def reload(self) -> None:
        tenure = self.tenure
        await trio.sleep(RELOAD_DELAY_S)
        if tenure != self.tenure or self.loaded:
            return
        if self.serving:
            await self.load()
        else:
            self._retry_or_hand_back()

    # ---- ownership (cluster mode) ---------------------------------------------------------------

    def gain(self, epoch: int) -> None:
        self.tenure += 1
        self.owned = True
        self.epoch = epoch
        self.runtime.logs.spawn(self.load)

    def lose(self) -> None:
        self.tenure += 1
        self.owned = False
        self.runtime.loads_changed()
        queued, self.after_load = self.after_load, []
        self.unload()
        for _op, done in queued:
            done(False)

    async def release(self) -> None:
        """Controlled hand-over: take no new requests, let the writes already queued become durable
        (their clients are acknowledged), then stop serving."""
        self.owned = False
        self.runtime.loads_changed()
        part = self.part
        if part is not None:
            await part.settle(5)
        self.lose()


class CoordinatorRuntime(Generic[S, R]):
    """Every partition of one coordinator, their timers, and reads at the last durable write."""

    def __init__(self, coordinator: Coordinator[S, R], logs_runtime: LogRuntime, num_partitions: int,
                 clock: Callable[[], int] = wall_ms, cluster: ClusterNode | None = None) -> None:
        self.coordinator = coordinator
        self.logs = logs_runtime
        self.cluster = cluster
        self.may_write: Callable[[], bool] = cluster.may_write if cluster is not None else _always
        self.num_partitions = num_partitions
        # Wall-clock milliseconds: what operations see as "now" and what timer deadlines are
        # asked in; the timers count them down on trio's steady clock.
        self.clock = clock
        self.tokens = itertools.count(1)
        self.timers = TimerService(self._fire, clock, steady_ms)
        self.shards: list[ShardRuntime[S, R]] = [ShardRuntime(self, p) for p in range(num_partitions)]
        # Set (and replaced) whenever a load ends or a partition is given up: what ``until_loaded``
        # waits on.
        self._loads_changed = trio.Event()

    def _fire(self, partition: int, key: str, now: int) -> None:
        self.shards[partition].fire_timer(key, now)

    @property
    def loading(self) -> int:
        return sum(1 for s in self.shards if s.owned and not s.loaded)

    def loads_changed(self) -> None:
        self._loads_changed.set()
        self._loads_changed = trio.Event()

    async def until_loaded(self) -> None:
        """Returns once no partition this node owns is still loading."""
        while self.loading:
            await self._loads_changed.wait()

    def serving(self) -> list[ShardRuntime[S, R]]:
        return [s for s in self.shards if s.serving]

    async def load_all(self) -> None:
        """A single broker loads every partition, one at a time: each shard serves as soon as its
        own replay is done."""
        for slot in self.shards:
            await slot.load()

    def after_durable(self, reads: Sequence[tuple[ShardRuntime[S, R], str | None]], callback: Done) -> None:
        """``callback(True)`` once every write in flight that a read of ``reads`` could see is
        durable (at once when there is none), ``callback(False)`` as soon as one of them fails.
        Each read names a shard and the one key it reads, or None for the whole shard.

        This is how reads answer from durable state only: a read computed now shows the writes
        already applied to the shard; holding its answer until those writes are durable means no
        client sees a value that a crash could take away, and a client that was told its write
        succeeded always reads it back. (The alternative, answering at once from the state as of
        the last durable write, needs a second copy of every shard's state; the wait is at most
        one group-commit pass.) A read of one key waits for the shard's writes only while one of
        that key's is among them."""
        pending: list[Partition] = []
        for slot, key in reads:
            part = slot.part
            if part is None or (slot.settled_for(key) if key is not None else part.settled):
                continue
            if part not in pending:
                pending.append(part)
        if not pending:
            callback(True)
            return
        countdown = Countdown(len(pending), callback)
        for part in pending:
            part.when_durable(countdown.arrive)

    async def run_timers(self) -> None:
        await self.timers.run()

