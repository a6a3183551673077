"""KIP-848 consumer groups with raw-protocol members (ConsumerGroupHeartbeat, no client library).

    python -m bench.consumer_groups [--members 100 1000] [--interval-ms 500] [--seconds 5]

1. convergence: N members join one consumer group at once (epoch 0, one connection each) and
   then behave as clients do: heartbeat every heartbeat interval (the broker's, set here to
   --interval-ms), apply the assignment each answer carries and report what they own, and send a
   heartbeat at once when their assignment changed. Printed: time from the last join answer until
   every member holds its target (the group Stable, every member at the group's assignment epoch),
   in ms and in heartbeat intervals, and the broker's CPU;
2. heartbeat rate: 50 members of a stable consumer group heartbeat back-to-back (one request in
   flight per connection), beside 50 members of a classic group doing the same with Heartbeat v4:
   heartbeats/s and broker CPU per heartbeat for each, and their ratio.
"""

from __future__ import annotations

import argparse
import resource
import time
import uuid
from typing import Any

import trio

from bench.groups import heartbeat_rate
from bench.harness import Broker
from kclient.wire_client import AsyncWireClient, decode_response
from protocol.messages import ApiKey
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.create_topics import CreateTopicsRequest

TOPIC = "bench-consumer-groups"
PARTITIONS = 1000
HB_V, DESCRIBE_V = 1, 1


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def decode(api_key: int, version: int, frame: bytes) -> Any:
    return decode_response(api_key, version, frame)[1]


class Member:
    def __init__(self, client: AsyncWireClient, group: str, rebalance_timeout_ms: int) -> None:
        self.client = client
        self.group = group
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[bytes, list[int]] = {}
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.joined_at = 0.0
        self.changed = trio.Event()

    def request(self) -> ConsumerGroupHeartbeatRequest:
        joining = self.epoch == 0
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if joining else -1,
            subscribed_topic_names=[TOPIC] if joining else None, subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=p)
                              for t, p in self.owned.items()])

    async def beat(self) -> None:
        joining = self.epoch == 0
        await self.client.send_raw(self.client.encode(ApiKey.ConsumerGroupHeartbeat, HB_V, self.request()))
        resp = decode(ApiKey.ConsumerGroupHeartbeat, HB_V, await self.client.recv_frame())
        if resp.error_code:
            raise RuntimeError(f"heartbeat answered {resp.error_code}: {resp.error_message}")
        if joining:
            self.joined_at = time.perf_counter()
        self.epoch = resp.member_epoch
        if resp.assignment is not None:
            owned = {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}
            if owned != self.owned:
                self.owned = owned
                self.changed.set()

    async def run(self, interval_s: float, stop: trio.Event) -> None:
        await self.beat()
        while not stop.is_set():
            with trio.move_on_after(interval_s):
                await self.changed.wait()  # acknowledge a new assignment at once, as clients do
            self.changed = trio.Event()
            if not stop.is_set():
                await self.beat()


async def converged(admin: AsyncWireClient, group: str) -> bool:
    resp = await admin.call(ApiKey.ConsumerGroupDescribe, DESCRIBE_V, ConsumerGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False))
    (g,) = resp.groups
    return g.group_state == "Stable" and all(m.member_epoch == g.assignment_epoch for m in g.members)


async def convergence(port: int, n: int, interval_ms: int) -> tuple[float, float]:
    """(ms from the last join answer until converged, that in heartbeat intervals)."""
    group = f"bench-cg-{n}"
    clients = [await AsyncWireClient.connect(port, f"m{i}") for i in range(n)]
    admin = await AsyncWireClient.connect(port, "admin")
    members = [Member(c, group, 60_000) for c in clients]
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(m.run, interval_ms / 1000, stop)
        while not all(m.joined_at for m in members):
            await trio.sleep(0.001)
        last_join = max(m.joined_at for m in members)
        while not await converged(admin, group):
            await trio.sleep(0.005)
        elapsed = time.perf_counter() - last_join
        stop.set()
    owned = [p for m in members for ps in m.owned.values() for p in ps]
    assert len(owned) == len(set(owned)) == PARTITIONS, "every partition owned by exactly one member"
    for c in [*clients, admin]:
        await c.stream.aclose()
    return elapsed * 1000, elapsed * 1000 / interval_ms


async def consumer_heartbeat_rate(port: int, n: int, seconds: float, broker_cpu: Any) -> tuple[float, float]:
    group = "bench-cg-rate"
    clients = [await AsyncWireClient.connect(port, f"r{i}") for i in range(n)]
    admin = await AsyncWireClient.connect(port, "admin")
    members = [Member(c, group, 60_000) for c in clients]
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(m.run, 0.05, stop)
        while not (all(m.joined_at for m in members) and await converged(admin, group)):
            await trio.sleep(0.01)
        stop.set()
    count = 0

    async def hammer(m: Member, deadline: float) -> None:
        nonlocal count
        data = m.client.encode(ApiKey.ConsumerGroupHeartbeat, HB_V, m.request())
        while time.perf_counter() < deadline:
            await m.client.send_raw(data)
            await m.client.recv_frame()
            count += 1

    b0, t0 = broker_cpu(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(hammer, m, t0 + seconds)
    wall = time.perf_counter() - t0
    for c in [*clients, admin]:
        await c.stream.aclose()
    return count / wall, (broker_cpu() - b0) / wall


async def create_topic(port: int) -> None:
    c = await AsyncWireClient.connect(port, "admin")
    await c.call(ApiKey.CreateTopics, 5, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=PARTITIONS, replication_factor=1,
                                                   assignments=[], configs=[])], timeout_ms=10_000))
    await c.stream.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, nargs="*", default=[100, 1000])
    parser.add_argument("--interval-ms", type=int, default=500, help="the broker's heartbeat interval")
    parser.add_argument("--seconds", type=float, default=5.0, help="heartbeat-rate window")
    args = parser.parse_args()
    broker = Broker(group_consumer_heartbeat_interval_ms=args.interval_ms,
                    group_consumer_min_heartbeat_interval_ms=min(args.interval_ms, 5000),
                    num_partitions=1)
    try:
        trio.run(create_topic, broker.port)
        for n in args.members:
            cpu0 = broker.cpu()
            ms, intervals = trio.run(convergence, broker.port, n, args.interval_ms)
            print(f"convergence: {n} members joining at once converged {ms:.0f} ms after the last join "
                  f"({intervals:.2f} heartbeat intervals of {args.interval_ms} ms); broker CPU "
                  f"{broker.cpu() - cpu0:.2f}s", flush=True)
        rate, cores = trio.run(consumer_heartbeat_rate, broker.port, 50, args.seconds, broker.cpu)
        classic_rate, classic_cores, _ = trio.run(heartbeat_rate, broker.port, 50, args.seconds, "bench-classic",
                                                  broker.cpu)
        per_consumer = cores / rate * 1e6
        per_classic = classic_cores / classic_rate * 1e6
        print(f"heartbeats, 50 members back-to-back: consumer group {rate:,.0f}/s ({per_consumer:.0f} µs broker "
              f"CPU each), classic group {classic_rate:,.0f}/s ({per_classic:.0f} µs each); a consumer-group "
              f"heartbeat costs {per_consumer / per_classic:.2f}x a classic one", flush=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
