"""The coordinator runtime on its own, running a toy coordinator (a tally per name) over the log
runtime and a disk whose flushes the test holds or fails: what every coordinator gets from it."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest
import trio
import trio.testing

from broker.cluster.node import ClusterNode
from broker.log_runtime.runtime import LogRuntime
from broker.runtime.coordinator import (
    RELOAD_DELAY_S,
    Append,
    Coordinator,
    CoordinatorRuntime,
    Done,
    ShardRuntime,
)
from broker.runtime.timer_requests import CancelTimer, SetTimer
from protocol.errors import DecodeError, ErrorCode
from protocol.record import Record
from protocol.record_batch import build_end_txn_marker, decode_records, iter_batches
from storage.config import LogConfig
from storage.fencing import Fence
from tests.unit.runtime.fake_log import FakeDisk

pytestmark = pytest.mark.timeout(30)

TOPIC = "__tally"
LOG = f"{TOPIC}-0"
TICK_S = 1.0


@dataclass
class TallyResult:
    replies: list[tuple[int, object]] = field(default_factory=list)
    records: list[tuple[str, int]] = field(default_factory=list)
    timers: list[SetTimer | CancelTimer] = field(default_factory=list)


class TallyShard:
    """A pure core: counts per name, each change a record; a timer counts "ticks"."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def replay(self, name: str, count: int) -> None:
        self.counts[name] = count

    def add(self, token: int, name: str) -> TallyResult:
        count = self.counts[name] = self.counts.get(name, 0) + 1
        return TallyResult(replies=[(token, count)], records=[(name, count)])

    def read(self, token: int, name: str) -> TallyResult:
        return TallyResult(replies=[(token, self.counts.get(name, 0))])

    def on_loaded(self, now_ms: int) -> list[SetTimer]:
        return [SetTimer("tick", now_ms + int(TICK_S * 1000))]

    def on_timer(self, key: str, now_ms: int) -> TallyResult:
        del key, now_ms
        count = self.counts["ticks"] = self.counts.get("ticks", 0) + 1
        return TallyResult(records=[("ticks", count)])


class Tally(Coordinator[TallyShard, TallyResult]):
    topic = TOPIC
    log_config = LogConfig()

    def __init__(self) -> None:
        self.loads = 0

    def new_shard(self, index: int) -> TallyShard:
        return TallyShard()

    unreadable_event = "tally.unreadable_record"

    def replay_record(self, slot: ShardRuntime[TallyShard, TallyResult], key: bytes, value: bytes | None) -> bool:
        if value is None or not value.isdigit():
            raise DecodeError("tally record", 0, f"not a count: {value!r}")
        slot.shard.replay(key.decode(), int(value))
        return True

    def writes(self, slot: ShardRuntime[TallyShard, TallyResult], result: TallyResult, now: int,
               started: float | None) -> list[Append]:
        if not result.records:
            return []
        return [Append([(n.encode(), str(c).encode(), now) for n, c in result.records], [n for n, _ in result.records])]

    def on_timer(self, slot: ShardRuntime[TallyShard, TallyResult], key: str,
                 now: int) -> tuple[TallyResult, Done | None]:
        return slot.shard.on_timer(key, now), None

    def on_loaded(self, slot: ShardRuntime[TallyShard, TallyResult], now: int) -> None:
        self.loads += 1


class SocketReply:
    """A reply slot over a socket pair whose prepared answer the sync thread may write (the
    contract ``broker.network.reply.Reply`` keeps)."""

    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.ours.setblocking(False)
        self.theirs.setblocking(False)
        self.prepared: bytes | None = None
        self.returns: list[tuple[int, bool]] = []
        self.sent_at = 0.0

    def prepare(self, response: object) -> bool:
        self.prepared = f"answer {response}".encode()
        return True

    def lend(self) -> tuple[int, bytes] | None:
        return None if self.prepared is None else (self.ours.fileno(), self.prepared)

    def returned(self, sent: int, durable: bool, sent_at: float = 0.0) -> None:
        self.returns.append((sent, durable))
        self.sent_at = sent_at

    def received(self) -> bytes:
        try:
            return self.theirs.recv(1024)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


@dataclass
class Setup:
    runtime: CoordinatorRuntime[TallyShard, TallyResult]
    slot: ShardRuntime[TallyShard, TallyResult]
    disk: FakeDisk
    clock: trio.testing.MockClock

    def add(self, name: str, reply: SocketReply | None = None) -> list[object]:
        """Sends an "add" write; the list gets its answer (``reply``: its reply slot)."""
        answers: list[object] = []
        self.slot.execute(lambda shard, token, now: shard.add(token, name), answers.append,
                          lambda code: ("error", code), name, reply=reply)
        return answers

    def read(self, name: str) -> list[object]:
        answers: list[object] = []
        self.slot.execute(lambda shard, token, now: shard.read(token, name), answers.append,
                          lambda code: ("error", code), name)
        return answers

    async def settle(self) -> None:
        """Lets the log runtime run its passes (on its threads) until the partition is settled."""
        part = self.slot.part
        assert part is not None
        with trio.fail_after(5):
            while not part.settled:
                await trio.sleep(0)
                await trio.testing.wait_all_tasks_blocked(0.001)


@asynccontextmanager
async def tally(tmp_path: Path, clock: trio.testing.MockClock) -> AsyncIterator[Setup]:
    disk = FakeDisk(clock.current_time)
    logs = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None,
                      opener=disk.open)
    runtime = CoordinatorRuntime(Tally(), logs, 1, clock=lambda: round(trio.current_time() * 1000))
    async with trio.open_nursery() as nursery:
        await nursery.start(logs.run)
        nursery.start_soon(runtime.run_timers)
        await runtime.load_all()
        try:
            yield Setup(runtime, runtime.shards[0], disk, clock)
        finally:
            disk.release_flushes()
            disk.fail_flushes(False)
            nursery.cancel_scope.cancel()
    logs.close()


async def blocked_on(disk: FakeDisk, calls: int) -> None:
    """Until ``calls`` flushes have started (a held one waits on its thread)."""
    with trio.fail_after(5):
        await disk.flush_calls.reach(calls)


@pytest.mark.trio
async def test_a_write_is_answered_only_once_durable(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with tally(tmp_path, mock_clock) as t:
        calls = t.disk.flush_calls.value
        t.disk.hold_flushes()
        answers = t.add("a")
        assert t.slot.shard.counts == {"a": 1}  # the operation ran at once
        await blocked_on(t.disk, calls + 1)
        await trio.testing.wait_all_tasks_blocked(0.01)
        assert answers == []
        t.disk.release_flushes()
        await t.settle()
        assert answers == [1]
        assert t.disk.durable[LOG] == len(t.disk.written[LOG])


@pytest.mark.trio
async def test_the_sync_thread_sends_a_prepared_answer_once_its_write_is_durable(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    reply = SocketReply()
    async with tally(tmp_path, mock_clock) as t:
        calls = t.disk.flush_calls.value
        t.disk.hold_flushes()
        answers = t.add("a", reply)
        await blocked_on(t.disk, calls + 1)
        await trio.testing.wait_all_tasks_blocked(0.01)
        assert reply.received() == b"" and reply.returns == []
        t.disk.release_flushes()
        await t.settle()
        # Written by the thread after the flush returned, then handed back, then released as usual.
        assert reply.received() == b"answer 1"
        assert reply.returns == [(len(b"answer 1"), True)]
        assert reply.sent_at > 0  # when it left, for the request's latency
        assert answers == [1]
    reply.close()


@pytest.mark.trio
async def test_a_prepared_answer_is_not_sent_when_its_write_fails(tmp_path: Path,
                                                                  mock_clock: trio.testing.MockClock) -> None:
    reply = SocketReply()
    async with tally(tmp_path, mock_clock) as t:
        t.disk.fail_flushes()
        answers = t.add("a", reply)
        with trio.fail_after(5):
            while not answers:
                await trio.sleep(0)
                await trio.testing.wait_all_tasks_blocked(0.001)
        assert answers == [("error", ErrorCode.NOT_COORDINATOR)]
        assert reply.returns == [(0, False)]
        assert reply.received() == b""
    reply.close()


@pytest.mark.trio
async def test_in_a_cluster_the_answer_waits_for_the_trio_thread(tmp_path: Path,
                                                                 mock_clock: trio.testing.MockClock) -> None:
    """Only the trio thread knows, once the pass is over, that the lease held throughout."""
    reply = SocketReply()
    async with tally(tmp_path, mock_clock) as t:
        t.runtime.logs.may_write = lambda: True
        answers = t.add("a", reply)
        await t.settle()
        assert answers == [1]
        assert reply.returns == [] and reply.received() == b""
    reply.close()


@pytest.mark.trio
async def test_a_read_waits_for_the_writes_of_its_key_before_it(tmp_path: Path,
                                                              mock_clock: trio.testing.MockClock) -> None:
    async with tally(tmp_path, mock_clock) as t:
        calls = t.disk.flush_calls.value
        t.disk.hold_flushes()
        t.add("a")
        await blocked_on(t.disk, calls + 1)
        read_a, read_b = t.read("a"), t.read("b")
        durable: list[bool] = []
        t.runtime.after_durable([(t.slot, None)], durable.append)
        await trio.testing.wait_all_tasks_blocked(0.01)
        # "a" shows a write in flight: held; "b" has none: answered at once.
        assert read_a == [] and read_b == [0] and durable == []
        t.disk.release_flushes()
        await t.settle()
        assert read_a == [1] and durable == [True]


@pytest.mark.trio
async def test_a_failed_write_answers_not_coordinator_and_reloads_from_the_log(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with tally(tmp_path, mock_clock) as t:
        first = t.add("a")
        await t.settle()
        assert first == [1]
        t.disk.fail_flushes()
        failed = t.add("a")
        with trio.fail_after(5):
            while not failed:
                await trio.sleep(0)
                await trio.testing.wait_all_tasks_blocked(0.001)
        assert failed == [("error", ErrorCode.NOT_COORDINATOR)]
        assert not t.slot.loaded and t.slot.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        t.disk.fail_flushes(False)
        mock_clock.jump(RELOAD_DELAY_S)
        with trio.fail_after(5):
            while not t.slot.loaded:
                await trio.sleep(0)
                await trio.testing.wait_all_tasks_blocked(0.001)
        # Rebuilt from what the log holds: the failed write's record is not there.
        assert t.slot.shard.counts == {"a": 1}
        assert t.add("a") == [] and t.slot.shard.counts == {"a": 2}


@pytest.mark.trio
async def test_replay_skips_a_record_it_cannot_read_and_goes_on(
        tmp_path: Path, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture) -> None:
    """The runtime's replay loop (every coordinator's but the group coordinator's): an unreadable
    record is logged once and skipped, control batches and keyless records are not the shard's,
    the records after them are replayed."""
    async with tally(tmp_path, mock_clock) as t:
        t.add("a")
        await t.settle()
        part = t.slot.part
        assert part is not None
        now = round(trio.current_time() * 1000)
        part.log.append([(b"b", b"not a count", now), (None, b"7", now)])
        part.log.append([(b"a", b"5", now)])
        part.log.append_batch(build_end_txn_marker(0, producer_id=1, producer_epoch=0, commit=True,
                                                   coordinator_epoch=0, timestamp=now))
        part.log.flush()
        t.slot.unload()
        assert not t.slot.loaded and t.runtime.loading == 1
        loaded = trio.Event()

        async def wait() -> None:
            await t.runtime.until_loaded()
            loaded.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert not loaded.is_set()
            await t.slot.load()
            with trio.fail_after(5):
                await loaded.wait()
        assert t.slot.shard.counts == {"a": 5} and t.slot.records_read == 2
        assert [r.getMessage() for r in caplog.records if "tally.unreadable_record" in r.getMessage()] != []


@pytest.mark.trio
async def test_a_timer_runs_as_a_write(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with tally(tmp_path, mock_clock) as t:
        calls = t.disk.flush_calls.value
        t.disk.hold_flushes()
        mock_clock.jump(TICK_S)
        await blocked_on(t.disk, calls + 1)
        assert t.slot.shard.counts == {"ticks": 1}
        assert not t.slot.settled_for("ticks")  # its record is in flight: reads of it wait
        t.disk.release_flushes()
        await t.settle()
        assert t.slot.settled_for("ticks")
        durable = t.disk.written[LOG][: t.disk.durable[LOG]]
        assert [r.key for raw in durable for r in _records(raw)] == [b"ticks"]


@pytest.mark.trio
async def test_lose_unloads(tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    async with tally(tmp_path, mock_clock) as t:
        calls = t.disk.flush_calls.value
        t.disk.hold_flushes()
        waiting = t.add("a")
        await blocked_on(t.disk, calls + 1)
        done: list[bool] = []
        t.slot.run_after_load(lambda shard, now: shard.on_timer("x", now), done.append)
        t.slot.lose()
        assert waiting == [("error", ErrorCode.NOT_COORDINATOR)] and done == [False]
        assert not t.slot.loaded and t.slot.part is None and t.slot.shard.counts == {}
        assert len(t.runtime.timers) == 0  # its timers stopped
        assert t.slot.error == ErrorCode.NOT_COORDINATOR
        # A write now runs nowhere, and says so.
        assert t.slot.write(lambda shard, now: shard.on_timer("x", now), done.append) is None and done[-1] is False


def _records(raw: bytes) -> list[Record]:
    return [r for batch in iter_batches(raw) for r in decode_records(batch)]


class DoubtfulLease:
    """The part of a cluster node the runtime asks: whether the lease can be trusted now, and the
    claims it gives up."""

    def __init__(self) -> None:
        self.trusted = False
        self.relinquished: list[tuple[str, int]] = []

    def may_write(self) -> bool:
        return self.trusted

    def relinquish(self, partition: tuple[str, int], reason: str) -> None:
        del reason
        self.relinquished.append(partition)


@pytest.mark.trio
async def test_a_load_refused_while_the_lease_is_in_doubt_hands_the_claim_back(
        tmp_path: Path, mock_clock: trio.testing.MockClock) -> None:
    """Owned, not loaded, and nothing under way would answer COORDINATOR_LOAD_IN_PROGRESS for as
    long as the claim lasts: the claim is given up instead, to be claimed and loaded afresh."""
    disk = FakeDisk(mock_clock.current_time)
    logs = LogRuntime(tmp_path, LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None,
                      opener=disk.open)
    lease = DoubtfulLease()
    # The claim's fence holds what the lease does: the open is refused while it is in doubt.
    logs.fence_for = lambda topic, index: Fence(f"{topic}-{index}", 5, valid=lease.may_write)
    runtime = CoordinatorRuntime(Tally(), logs, 1, clock=lambda: round(trio.current_time() * 1000),
                                 cluster=cast(ClusterNode, lease))
    slot = runtime.shards[0]
    async with trio.open_nursery() as nursery:
        await nursery.start(logs.run)
        slot.gain(5)
        for _ in range(500):  # the open runs on a worker thread: real time passes, not the mock clock's
            if lease.relinquished:
                break
            await trio.testing.wait_all_tasks_blocked(0.01)
        assert not slot.loaded and lease.relinquished == [(Tally().topic, 0)]
        nursery.cancel_scope.cancel()
    logs.close()
