"""Consumer-group benchmarks with raw-protocol members (no client library in the way).

    python -m bench.groups [--members 100 500] [--heartbeat-seconds 5]

1. formation: N members join an empty group (initial delay 0) until every member holds its
   SyncGroup assignment of one generation;
2. leave: one member leaves a stable group; time until the others hold the next generation's
   assignment (members heartbeat every --heartbeat-interval-ms);
3. heartbeats: 50 members heartbeat back-to-back on their own connections;
4. confluent-kafka: 10 consumers join a 20-partition topic with the default initial delay.
Broker CPU and load-generator CPU are printed beside each figure.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import trio

from bench.harness import Broker
from kclient.wire_client import AsyncWireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.sync_group import SyncGroupRequest


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Member:
    def __init__(self, client: AsyncWireClient, group: str, index: int) -> None:
        self.client = client
        self.group = group
        self.index = index
        self.member_id = ""
        self.generation = -1
        self.assignment: bytes | None = None
        self.assigned_at = 0.0
        self.leaving = False

    async def join_and_sync(self) -> None:
        """Joins (and rejoins on REBALANCE_IN_PROGRESS) until it holds an assignment."""
        while True:
            join = await self.client.call(ApiKey.JoinGroup, 9, JoinGroupRequest(
                group_id=self.group, session_timeout_ms=30000, rebalance_timeout_ms=60000,
                member_id=self.member_id, protocol_type="consumer",
                protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"\x00\x00")]))
            if join.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if join.error_code:
                raise RuntimeError(f"join failed: {ErrorCode(join.error_code).name}")
            self.member_id = join.member_id
            assignments = []
            if join.leader == self.member_id:
                assignments = [SyncGroupRequest.Assignment(member_id=m.member_id, assignment=m.member_id.encode())
                               for m in join.members]
            sync = await self.client.call(ApiKey.SyncGroup, 5, SyncGroupRequest(
                group_id=self.group, generation_id=join.generation_id, member_id=self.member_id,
                protocol_type="consumer", protocol_name=join.protocol_name, assignments=assignments))
            if sync.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if sync.error_code:
                raise RuntimeError(f"sync failed: {ErrorCode(sync.error_code).name}")
            self.generation = join.generation_id
            self.assignment = sync.assignment
            self.assigned_at = time.perf_counter()
            return

    async def heartbeat_loop(self, interval_s: float, stop: trio.Event) -> None:
        while not stop.is_set() and not self.leaving:
            with trio.move_on_after(interval_s):
                await stop.wait()
            if stop.is_set() or self.leaving:
                return
            hb = await self.client.call(ApiKey.Heartbeat, 4, HeartbeatRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id))
            if hb.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                await self.join_and_sync()


async def form_group(port: int, n: int, group: str, interval_s: float) -> tuple[list[Member], float, trio.Event]:
    clients = [await AsyncWireClient.connect(port, f"bench-{i}") for i in range(n)]
    members = [Member(c, group, i) for i, c in enumerate(clients)]
    stop = trio.Event()
    done = trio.Event()

    async def run(m: Member) -> None:
        await m.join_and_sync()
        await m.heartbeat_loop(interval_s, stop)

    async def watch() -> None:
        while True:
            gens = {m.generation for m in members}
            if len(gens) == 1 and all(m.assignment for m in members):
                done.set()
                return
            await trio.sleep(0.001)

    start = time.perf_counter()
    nursery_holder: list[trio.Nursery] = []

    async def body(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery_holder.append(nursery)
            task_status.started()
            for m in members:
                nursery.start_soon(run, m)
            await watch()
            await stop.wait()

    return members, start, stop, body  # type: ignore[return-value]


async def formation(port: int, n: int, round_no: int) -> float:
    members, start, stop, body = await form_group(port, n, f"formation-{n}-{round_no}", 0.05)  # type: ignore[misc]
    elapsed = 0.0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(body)
        while not (len({m.generation for m in members}) == 1 and all(m.assignment for m in members)):
            await trio.sleep(0.001)
        elapsed = max(m.assigned_at for m in members) - start
        stop.set()
    for m in members:
        await m.client.stream.aclose()
    return elapsed


async def leave_rebalance(port: int, n: int, interval_ms: int) -> float:
    members, _start, stop, body = await form_group(port, n, f"leave-{n}", interval_ms / 1000)  # type: ignore[misc]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(body)
        while not (len({m.generation for m in members}) == 1 and all(m.assignment for m in members)):
            await trio.sleep(0.001)
        before = members[0].generation
        leaver = members[-1]
        leaver.leaving = True
        t0 = time.perf_counter()
        other = await AsyncWireClient.connect(port, "leaver")
        await other.call(ApiKey.LeaveGroup, 5, LeaveGroupRequest(
            group_id=leaver.group, members=[LeaveGroupRequest.MemberIdentity(member_id=leaver.member_id)]))
        rest = members[:-1]
        while not all(m.generation > before for m in rest):
            await trio.sleep(0.001)
        elapsed = max(m.assigned_at for m in rest) - t0
        stop.set()
    return elapsed


async def heartbeat_rate(port: int, n: int, seconds: float, group: str,
                         broker_cpu: Callable[[], float]) -> tuple[float, float, float]:
    """(heartbeats/s, broker cores, load generator cores) while ``n`` formed members heartbeat
    back-to-back, each on its own connection with one request in flight."""
    # Members heartbeat every 50 ms while the group forms: with no initial delay the first joiners
    # may complete a generation before the rest arrive, and they must notice the next rebalance.
    members, _start, stop, body = await form_group(port, n, group, 0.05)  # type: ignore[misc]
    count = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(body)
        while not (len({m.generation for m in members}) == 1 and all(m.assignment for m in members)):
            await trio.sleep(0.001)
        stop.set()

    async def hammer(m: Member, deadline: float) -> None:
        nonlocal count
        data = m.client.encode(ApiKey.Heartbeat, 4, HeartbeatRequest(
            group_id=m.group, generation_id=m.generation, member_id=m.member_id))
        while time.perf_counter() < deadline:
            await m.client.send_raw(data)
            await m.client.recv_frame()
            count += 1

    b0, l0, t0 = broker_cpu(), self_cpu(), time.perf_counter()
    async with trio.open_nursery() as inner:
        for m in members:
            inner.start_soon(hammer, m, t0 + seconds)
    wall = time.perf_counter() - t0
    for m in members:
        await m.client.stream.aclose()
    return count / seconds, (broker_cpu() - b0) / wall, (self_cpu() - l0) / wall


def confluent_join(bootstrap: str, consumers: int, partitions: int) -> float:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("bench-topic", partitions, 1)])["bench-topic"].result(10)
    assigned: dict[int, float] = {}
    lock = threading.Lock()
    stop = threading.Event()
    start = time.perf_counter()

    def run(i: int) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-confluent",
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            with lock:
                assigned[i] = time.perf_counter()

        c.subscribe(["bench-topic"], on_assign=on_assign)
        while not stop.is_set():
            c.poll(0.05)
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    # Everyone assigned in one final generation: wait until all assigned and stable for a moment.
    while len(assigned) < consumers:
        time.sleep(0.01)
    time.sleep(1.0)
    elapsed = max(assigned.values()) - start
    stop.set()
    for t in threads:
        t.join()
    return elapsed


def _log_time(line: str) -> float:
    return datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()


def join_phases(log: str, group: str) -> tuple[list[float], float]:
    """From the broker's transition log lines for ``group``: how long each join phase was held
    open, and how long after the last one ended the group became Stable."""
    held, started, ended, stable = [], None, 0.0, 0.0
    for line in log.splitlines():
        if "group.transition" not in line or f"group={group} " not in line:
            continue
        at = _log_time(line)
        if "to_state=PreparingRebalance" in line:
            started = at
        elif "to_state=CompletingRebalance" in line and started is not None:
            held.append(at - started)
            ended, started = at, None
        elif "to_state=Stable" in line:
            stable = at
    return held, stable - ended


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, nargs="*", default=[100, 500])
    parser.add_argument("--heartbeat-seconds", type=float, default=5.0)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    broker = Broker()
    try:
        for n in args.members:
            times, bcpu, lcpu = [], [], []
            for round_no in range(args.rounds):
                b0, l0 = broker.cpu(), self_cpu()
                times.append(trio.run(formation, broker.port, n, round_no))
                bcpu.append(broker.cpu() - b0)
                lcpu.append(self_cpu() - l0)
            print(f"formation {n:4} members: median {statistics.median(times) * 1000:7.1f} ms "
                  f"(runs {', '.join(f'{t * 1000:.0f}' for t in times)}) broker CPU {statistics.median(bcpu):.2f}s "
                  f"loadgen CPU {statistics.median(lcpu):.2f}s")
        b0, l0 = broker.cpu(), self_cpu()
        t = trio.run(leave_rebalance, broker.port, 50, args.heartbeat_interval_ms)
        print(f"leave: 49 remaining members rebalanced in {t * 1000:.0f} ms with a {args.heartbeat_interval_ms} ms "
              f"heartbeat interval (target < interval + 50 ms); broker CPU {broker.cpu() - b0:.2f}s "
              f"loadgen CPU {self_cpu() - l0:.2f}s")
        runs = [trio.run(heartbeat_rate, broker.port, 50, args.heartbeat_seconds, f"heartbeats-{i}", broker.cpu)
                for i in range(args.rounds)]
        print(f"heartbeats: 50 members back-to-back: median {statistics.median(r[0] for r in runs):,.0f}/s "
              f"(runs {', '.join(f'{r[0]:,.0f}' for r in runs)}); broker CPU "
              f"{statistics.median(r[1] for r in runs):.2f} cores, loadgen CPU "
              f"{statistics.median(r[2] for r in runs):.2f} cores")
    finally:
        broker.stop()

    broker = Broker(group_initial_rebalance_delay_ms=3000, log_level="INFO")
    try:
        b0 = broker.cpu()
        t = confluent_join(f"127.0.0.1:{broker.port}", 10, 20)
        held, final = join_phases(broker.log(), "bench-confluent")
        print(f"confluent-kafka: 10 consumers on 20 partitions all assigned after {t:.2f}s; broker CPU "
              f"{broker.cpu() - b0:.2f}s. Join phases (PreparingRebalance -> CompletingRebalance): "
              f"{', '.join(f'{h:.2f}s' for h in held)}; the last generation was Stable "
              f"{final * 1000:.0f} ms after its join phase ended. With the 3 s initial delay, Kafka "
              f"extends the first join phase by another 3 s when members join during it.")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
