"""OffsetCommit throughput and latency with raw pipelined clients.

    python bench/commits.py [--seconds 5] [--flush sync|interval]

Runs (a) simple-consumer commits (generation -1) and (b) commits by members of a stable group,
each with 4 connections x 8 requests in flight x 4 partitions per request, then (c) one
connection with one request in flight for latency. Prints requests/s, partition commits/s, p50
and p99 latency, broker CPU (cores) and RSS.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import AsyncClient, Broker
from protocol.messages import ApiKey
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.sync_group import SyncGroupRequest

P = OffsetCommitRequest.Topic.Partition


def commit_request(group: str, generation: int, member: str, base: int, conn: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        topics=[OffsetCommitRequest.Topic(name="bench", partitions=[
            P(partition_index=conn * 4 + i, committed_offset=base + i, committed_metadata="") for i in range(4)])])


async def join_member(port: int, group: str) -> tuple[AsyncClient, int, str]:
    c = await AsyncClient.connect(port, "member")
    member = ""
    while True:
        j = await c.call(ApiKey.JoinGroup, 9, JoinGroupRequest(
            group_id=group, session_timeout_ms=60000, rebalance_timeout_ms=60000, member_id=member,
            protocol_type="consumer", protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"\x00\x00")]))
        member = j.member_id
        if j.error_code == 79:
            continue
        break
    s = await c.call(ApiKey.SyncGroup, 5, SyncGroupRequest(
        group_id=group, generation_id=j.generation_id, member_id=member, protocol_type="consumer",
        protocol_name="range", assignments=[SyncGroupRequest.Assignment(member_id=member, assignment=b"")]))
    assert s.error_code == 0, s
    return c, j.generation_id, member


async def load(port: int, seconds: float, conns: int, in_flight: int, member: bool) -> tuple[int, list[float]]:
    latencies: list[float] = []
    done = 0

    async def one(idx: int) -> None:
        nonlocal done
        if member:
            client, generation, member_id = await join_member(port, f"bench-members-{idx}")
            group = f"bench-members-{idx}"
        else:
            client, generation, member_id, group = await AsyncClient.connect(port), -1, "", f"bench-simple-{idx}"
        deadline = time.perf_counter() + seconds
        sent_at: list[float] = []
        offset = 0

        async def sender() -> None:
            nonlocal offset
            for _ in range(in_flight):
                offset += 4
                sent_at.append(time.perf_counter())
                await client.send_raw(client.encode(ApiKey.OffsetCommit, 9,
                                                    commit_request(group, generation, member_id, offset, idx)))

        await sender()
        while sent_at:
            await client.recv_frame()
            now = time.perf_counter()
            latencies.append(now - sent_at.pop(0))
            done += 1
            if now < deadline:
                offset += 4
                sent_at.append(time.perf_counter())
                await client.send_raw(client.encode(ApiKey.OffsetCommit, 9,
                                                    commit_request(group, generation, member_id, offset, idx)))

    async with trio.open_nursery() as nursery:
        for i in range(conns):
            nursery.start_soon(one, i)
    return done, latencies


def run_case(broker: Broker, name: str, seconds: float, conns: int, in_flight: int, member: bool) -> None:
    c0, t0 = broker.cpu(), time.perf_counter()
    done, lat = trio.run(load, broker.port, seconds, conns, in_flight, member)
    wall = time.perf_counter() - t0
    lat.sort()
    p50 = lat[len(lat) // 2] * 1000
    p99 = lat[int(len(lat) * 0.99)] * 1000
    print(f"{name:46} {done / seconds:9,.0f} req/s {4 * done / seconds:9,.0f} offsets/s  p50 {p50:6.2f} ms  "
          f"p99 {p99:6.2f} ms  broker CPU {(broker.cpu() - c0) / wall:.2f} cores  RSS {broker.rss():.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--flush", choices=["sync", "interval"], default="sync")
    args = parser.parse_args()
    broker = Broker(log_flush_policy=args.flush)
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
        admin.create_topics([NewTopic("bench", 16, 1)])["bench"].result(10)
        print(f"flush policy: {args.flush}")
        run_case(broker, "simple commits, 4 conns x 8 in flight x 4 parts", args.seconds, 4, 8, member=False)
        run_case(broker, "member commits, 4 conns x 8 in flight x 4 parts", args.seconds, 4, 8, member=True)
        run_case(broker, "one connection, one request in flight", args.seconds, 1, 1, member=False)
        lat = []
        for _ in range(3):
            _done, ls = trio.run(load, broker.port, 1.0, 1, 1, False)
            lat.append(statistics.median(ls) * 1000)
        print(f"one in flight, p50 over 3 runs: {', '.join(f'{x:.3f}' for x in lat)} ms")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
