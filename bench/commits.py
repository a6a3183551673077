"""OffsetCommit throughput and latency with raw pipelined clients.

    python -m bench.commits [--seconds 5] [--rounds 3] [--flush sync|interval]

Runs (a) simple-consumer commits (generation -1) and (b) commits by members of a stable group,
each with 4 connections x 8 requests in flight x 4 partitions per request, then (c) one
connection with one request in flight for latency. The load comes from a separate process that
sends pre-encoded requests and frames the responses, decoding only an answer whose bytes differ
from the last one free of errors (it raises if any carried an error code), so that it costs the
shared cores as little as possible; its CPU is printed beside the broker's. Prints requests/s, partition
commits/s, p50 and p99 latency, broker CPU (cores), load generator CPU and broker RSS; the last
lines give the median of each figure over the rounds.
"""

from __future__ import annotations

import argparse
import multiprocessing
import selectors
import socket
import statistics
import struct
import time
from collections.abc import Callable
from typing import Any

import trio

from bench.harness import Broker
from bench.members import blocking_call
from broker.network.reply import error_code_of
from kclient.wire_client import AsyncWireClient, decode_response
from protocol.errors import ErrorCode
from protocol.frames import RequestHeader, frame_request
from protocol.messages import ApiKey
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sync_group import SyncGroupRequest

P = OffsetCommitRequest.Topic.Partition
VERSION = 9
DISTINCT_REQUESTS = 64  # per connection, with different offsets and correlation ids, sent in turn
Committer = tuple[str, int, str]  # group, generation (-1 for a simple consumer), member id
_API_AND_VERSION = struct.Struct(">hh")  # a request frame's api key and version, after its size


def create_commit_topic(port: int) -> None:
    """The topic every committer commits to: a commit to a topic the broker does not know is answered
    UNKNOWN_TOPIC_OR_PARTITION without a write, which would measure the error path."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.create_topics([NewTopic("bench", 16, 1)])["bench"].result(30)


def commit_frames(committer: Committer, conn: int) -> list[bytes]:
    group, generation, member = committer
    frames = []
    for k in range(DISTINCT_REQUESTS):
        body = OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=generation, member_id=member,
            topics=[OffsetCommitRequest.Topic(name="bench", partitions=[
                P(partition_index=conn * 4 + i, committed_offset=k * 4 + i, committed_metadata="")
                for i in range(4)])])
        frames.append(frame_request(RequestHeader(ApiKey.OffsetCommit, VERSION, k, "bench"),
                                    OffsetCommitRequest.encode(body, VERSION), True))
    return frames


def check_committed(port: int, committers: list[Committer]) -> None:
    """Besides the generator's check of every answer: raises unless every partition the
    committers commit to (``commit_frames``' layout) has an offset stored, so that a load answered
    with errors is not taken for throughput."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        r = blocking_call(sock, ApiKey.OffsetFetch, 8, OffsetFetchRequest(
            groups=[OffsetFetchRequest.Group(group_id=g, topics=None) for g, _, _ in committers]))
    committed = {(g.group_id, p.partition_index): p.committed_offset
                 for g in r.groups for t in g.topics if t.name == "bench" for p in t.partitions}
    expected = {(group, conn * 4 + i) for conn, (group, _, _) in enumerate(committers) for i in range(4)}
    if not expected <= {k for k, v in committed.items() if v >= 0}:
        raise RuntimeError(f"OffsetCommit load left offsets missing: {sorted(committed.items())}")


async def join_member(port: int, group: str) -> tuple[AsyncWireClient, int, str]:
    c = await AsyncWireClient.connect(port, "member")
    member = ""
    while True:
        j = await c.call(ApiKey.JoinGroup, 9, JoinGroupRequest(
            group_id=group, session_timeout_ms=300000, rebalance_timeout_ms=60000, member_id=member,
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


class _Conn:
    def __init__(self, port: int, frames: list[bytes], check: bool) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.frames = frames
        self.next = 0
        self.sent_at: list[float] = []
        self.buf = bytearray()
        # Every answer's error codes are checked: an answer whose bytes after the correlation id
        # are those of the last answer found free of errors is one too; any other is decoded.
        self.check = check
        self.api_key, self.version = _API_AND_VERSION.unpack_from(frames[0], 4)
        self.good: bytes | None = None
        self.errors = 0
        self.first_error = 0

    def send(self, count: int, now: float) -> None:
        frames = self.frames
        data = b"".join(frames[(self.next + j) % len(frames)] for j in range(count))
        self.next += count
        self.sent_at.extend([now] * count)
        self.sock.setblocking(True)
        self.sock.sendall(data)
        self.sock.setblocking(False)

    def complete_frames(self) -> int:
        buf = self.buf
        pos = n = 0
        while len(buf) - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos < 4 + size:
                break
            if self.check and buf[pos + 8 : pos + 4 + size] != self.good:
                self._check(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
            n += 1
        del buf[:pos]
        return n

    def _check(self, frame: bytes) -> None:
        _correlation, body = decode_response(self.api_key, self.version, frame)
        code = error_code_of(body)
        if code:
            self.errors += 1
            self.first_error = self.first_error or code
        else:
            self.good = frame[4:]


def generate(port: int, committers: list[Committer], in_flight: int, seconds: float,
             frames_for: Callable[[Committer, int], list[bytes]] = commit_frames,
             check: bool = True) -> tuple[int, list[float], float]:
    """Keeps ``in_flight`` requests outstanding on each connection for ``seconds``; returns
    responses received, their latencies and this process's CPU seconds. ``frames_for`` gives the
    pre-encoded requests of each connection (OffsetCommits by default). Raises if any answer
    carried an error code (``check``: off for servers that answer with placeholder bytes), so
    that a load answered with errors is never taken for throughput."""
    cpu0 = time.process_time()
    sel = selectors.DefaultSelector()
    conns = [_Conn(port, frames_for(c, i), check) for i, c in enumerate(committers)]
    deadline = time.perf_counter() + seconds
    for c in conns:
        c.send(in_flight, time.perf_counter())
        sel.register(c.sock, selectors.EVENT_READ, c)
    latencies: list[float] = []
    done = 0
    open_conns = len(conns)
    while open_conns:
        for key, _ in sel.select():
            c = key.data
            try:
                data = c.sock.recv(1 << 16)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError("the broker closed a connection")
            c.buf += data
            n = c.complete_frames()
            now = time.perf_counter()
            latencies.extend(now - t for t in c.sent_at[:n])
            del c.sent_at[:n]
            done += n
            if n and now < deadline:
                c.send(n, now)
            elif not c.sent_at:
                sel.unregister(c.sock)
                c.sock.close()
                open_conns -= 1
    errors = sum(c.errors for c in conns)
    if errors:
        first = next(c.first_error for c in conns if c.first_error)
        raise RuntimeError(f"{errors} of {done} answers carried an error code (the first: {ErrorCode(first).name})")
    return done, latencies, time.process_time() - cpu0


def _child(port: int, committers: list[Committer], in_flight: int, seconds: float, out: Any) -> None:
    out.put(generate(port, committers, in_flight, seconds))


def run_case(broker: Broker, committers: list[Committer], in_flight: int, seconds: float) -> dict[str, float]:
    results: Any = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(
        target=_child, args=(broker.port, committers, in_flight, seconds, results))
    c0, t0 = broker.cpu(), time.perf_counter()
    child.start()
    done, lat, load_cpu = results.get()
    wall = time.perf_counter() - t0
    child.join()
    lat.sort()
    check_committed(broker.port, committers)
    return {"req/s": done / seconds, "offsets/s": 4 * done / seconds, "p50 ms": lat[len(lat) // 2] * 1000,
            "p99 ms": lat[int(len(lat) * 0.99)] * 1000, "broker cores": (broker.cpu() - c0) / wall,
            "loadgen cores": load_cpu / wall, "RSS MB": broker.rss()}


def prepare(broker: Broker) -> list[tuple[str, list[Committer], int]]:
    """The topic and the stable groups the cases commit for; each case's name, committers and
    requests in flight per connection. The members' groups are ``bench-members-0`` to ``-3``."""
    create_commit_topic(broker.port)

    async def join_all() -> list[Committer]:
        joined = []
        for i in range(4):
            client, generation, member = await join_member(broker.port, f"bench-members-{i}")
            await client.stream.aclose()
            joined.append((f"bench-members-{i}", generation, member))
        return joined

    members = trio.run(join_all)
    simple: list[Committer] = [(f"bench-simple-{i}", -1, "") for i in range(4)]
    return [("simple, 4 conns x 8 in flight x 4", simple, 8),
            ("members, 4 conns x 8 in flight x 4", members, 8),
            ("one connection, one in flight", simple[:1], 1)]


def show(name: str, r: dict[str, float]) -> None:
    print(f"{name:34} {r['req/s']:8,.0f} req/s {r['offsets/s']:8,.0f} offsets/s  p50 {r['p50 ms']:6.3f} ms  "
          f"p99 {r['p99 ms']:6.2f} ms  broker {r['broker cores']:.2f} cores  loadgen {r['loadgen cores']:.2f} "
          f"cores  RSS {r['RSS MB']:.0f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flush", choices=["sync", "interval"], default="sync")
    args = parser.parse_args()
    broker = Broker(log_flush_policy=args.flush)
    try:
        cases = prepare(broker)
        print(f"flush policy: {args.flush}")
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in cases}
        for _ in range(args.rounds):
            for name, committers, in_flight in cases:
                r = run_case(broker, committers, in_flight, args.seconds)
                runs[name].append(r)
                show(name, r)
        print(f"medians over {args.rounds} rounds:")
        for name, rs in runs.items():
            show(name, {k: statistics.median(r[k] for r in rs) for k in rs[0]})
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
