"""Many consumer-group members at a steady pace: heartbeat and commit latency against member count.

    python -m bench.members [--members 2000 5000 10000] [--seconds 30] [--flush-policy sync|interval]
                            [--generators K] [--nodes N | --kafka]

Each member is a raw Kafka-protocol client on its own TCP connection (no client library), all of
them driven by one epoll loop in this process; the broker is a separate ``kcoord serve`` process.
Members come in groups of ten. All groups are formed first (JoinGroup, SyncGroup; members that
finished early heartbeat every 500 ms until their whole group holds one generation), then for
``--seconds`` every member heartbeats once a second and commits one offset every five seconds, at
phases spread evenly over those periods so that the load is smooth. Requests are pre-encoded (a
commit patches its offset into a template) and answers are checked by comparing bytes, so that the
load generator costs the shared cores as little as it can.

Printed per member count: heartbeat and commit latency (p50/p99/max, from the request's send to its
answer), spurious rebalances (a heartbeat after formation answering anything but NONE), commit
errors, whether OffsetFetch returns every member's last acknowledged offset at the end, requests/s,
the broker's CPU over the measuring window (from /proc/<pid>/stat) and per request, its RSS, and
this process's own saturation: its CPU and how late it sent what it meant to send (p99/max against
each request's schedule), flagged SATURATED past 0.9 of a core or a p99 lateness of a tenth of the
heartbeat interval, when the latencies measure the generator rather than the broker.

``--scrape-interval S`` scrapes the broker's /metrics every S seconds from the start of formation to
the end of the window, as Prometheus would (the lag series of every member's committed offset
included), and prints how long a scrape took and how large it was: the latencies then include
whatever a scrape costs the broker.

``--nodes N`` runs the load against `kcoord serve --nodes N` (N node processes on one directory and
a private etcd; each group's members connect to its coordinator, found with FindCoordinator; CPU
and RSS are the nodes' summed), ``--kafka`` against Apache Kafka 4.4 (one KRaft node, acknowledging
from the page cache), so that one script draws the curve of all three.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import heapq
import json
import multiprocessing
import os
import random
import resource
import select
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

from bench.harness import Broker, launch, loop_seconds, rss_mb, user_system, wait_spread
from kclient.wire_client import decode_response, encode_request
from protocol.errors import ErrorCode
from protocol.frames import response_header_size
from protocol.messages import ApiKey
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.sync_group import SyncGroupRequest
from testkit.kafka import KafkaProcess, kafka_libs
from testkit.ports import free_port

GROUP_SIZE = 10
TOPIC = "members-bench"
JOIN_V, SYNC_V, HEARTBEAT_V, COMMIT_V, FETCH_V = 9, 5, 4, 9, 8
SESSION_TIMEOUT_MS = 30_000
REBALANCE_TIMEOUT_MS = 60_000
FORMING_HEARTBEAT_S = 0.5
_SIZE = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_ERROR = struct.Struct(">h")
# Where an answer's body starts (the broker sends empty tag blocks); Heartbeat v4's body starts
# with throttle_time_ms, then its error code.
_HEARTBEAT_ERROR_AT = response_header_size(ApiKey.Heartbeat, True) + 4
_COMMIT_BODY_AT = response_header_size(ApiKey.OffsetCommit, True)
_OFFSET_SENTINEL = 0x0123456789ABCDEF

# What a member is doing.
JOINING, SYNCING, SYNCED = 0, 1, 2
# What a request in flight was.
JOIN, SYNC, HEARTBEAT, COMMIT = 0, 1, 2, 3


def encode(api_key: int, version: int, body: Any, correlation_id: int, client_id: str) -> bytes:
    return encode_request(api_key, version, correlation_id, client_id, body)


def decode(api_key: int, version: int, frame: bytes) -> Any:
    return decode_response(api_key, version, frame)[1]


def blocking_call(sock: socket.socket, api_key: int, version: int, body: Any) -> Any:
    sock.sendall(encode(api_key, version, body, 1, "members-bench-admin"))
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + _SIZE.unpack_from(buf)[0]:
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the broker closed the admin connection")
        buf += data
    return decode(api_key, version, buf[4 : 4 + _SIZE.unpack_from(buf)[0]])


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


class Group:
    __slots__ = ("name", "members", "started", "complete", "leader_view")

    def __init__(self, name: str) -> None:
        self.name = name
        self.members: list[Member] = []
        self.started = False
        self.complete = False
        # (generation, members the leader was given) from the leader's last JoinGroup answer.
        self.leader_view = (-1, 0)


class Member:
    __slots__ = ("group", "index", "sock", "fd", "client_id", "member_id", "generation", "state", "inflight",
                 "buf", "heartbeat_frame", "commit_frame", "commit_at", "commit_expected", "offset",
                 "acked_offset", "pending_offset", "epoch")

    def __init__(self, group: Group, index: int, sock: socket.socket) -> None:
        self.group = group
        self.index = index
        self.sock = sock
        self.fd = sock.fileno()
        self.client_id = f"m{index}"
        self.member_id = ""
        self.generation = -1
        self.state = JOINING
        self.inflight: deque[tuple[int, float, int, int]] = deque()  # (kind, sent at, offset, epoch)
        self.buf = bytearray()
        self.heartbeat_frame = b""
        self.commit_frame = bytearray()
        self.commit_at = 0
        self.commit_expected = b""
        self.offset = 0
        self.acked_offset = -1
        self.pending_offset = -1
        # Bumped on every rejoin: scheduled heartbeats and commits of an older epoch are dropped.
        self.epoch = 0


class Load:
    """The epoll loop, the schedule of heartbeats and commits, and what was measured."""

    def __init__(self, port: int, members: int, seed: int, heartbeat_s: float = 1.0, commit_s: float = 5.0,
                 first_group: int = 0) -> None:
        self.port = port
        self.heartbeat_s = heartbeat_s
        self.commit_s = commit_s
        self.rng = random.Random(seed)
        self.epoll = select.epoll()
        self.by_fd: dict[int, Member] = {}
        self.groups = [Group(f"mb-{first_group + g}") for g in range(members // GROUP_SIZE)]
        self.schedule: list[tuple[float, int, int, int, Member]] = []  # (due, seq, kind, epoch, member)
        self.seq = 0
        self.incomplete = len(self.groups)
        self.measuring_from = float("inf")
        self.measuring_until = float("inf")
        self.stopping = False
        self.latency: dict[int, list[float]] = {HEARTBEAT: [], COMMIT: []}
        # Heartbeats in the window: (sent, latency), for the per-second timeline.
        self.heartbeat_times: list[tuple[float, float]] = []
        self.answers_in_window = 0
        # How late each request of the window left against its schedule (s): a generator that
        # cannot keep up sends late, and its latencies then measure it rather than the broker.
        self.lateness: list[float] = []
        self.spurious: dict[str, int] = {}
        self.commit_errors: dict[str, int] = {}
        self.formation_rejoins = 0

    # ---- connections and I/O ------------------------------------------------------------------

    def coordinator_ports(self) -> dict[str, int]:
        """Each group's coordinator's port (FindCoordinator v4 to the bootstrap port, a hundred groups
        a request): on one broker its own, on several nodes the one that owns the group."""
        ports: dict[str, int] = {}
        # Kafka creates __consumer_offsets on the first FindCoordinator and answers
        # COORDINATOR_NOT_AVAILABLE until it has: asked again until every group has its answer.
        deadline = time.monotonic() + 120
        with socket.create_connection(("127.0.0.1", self.port)) as sock:
            while len(ports) < len(self.groups):
                left = [g.name for g in self.groups if g.name not in ports]
                for i in range(0, len(left), 100):
                    r = blocking_call(sock, ApiKey.FindCoordinator, 4, FindCoordinatorRequest(
                        key_type=0, coordinator_keys=left[i : i + 100]))
                    for c in r.coordinators:
                        if not c.error_code:
                            ports[c.key] = c.port
                        elif c.error_code not in (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                                  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) \
                                or time.monotonic() > deadline:
                            raise RuntimeError(f"FindCoordinator {c.key}: {ErrorCode(c.error_code).name}")
                if len(ports) < len(self.groups):
                    time.sleep(0.2)
        return ports

    def connect_all(self) -> None:
        ports = self.coordinator_ports()
        for g in self.groups:
            for i in range(GROUP_SIZE):
                sock = socket.create_connection(("127.0.0.1", ports[g.name]))
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
                m = Member(g, i, sock)
                g.members.append(m)
                self.by_fd[m.fd] = m
                self.epoll.register(m.fd, select.EPOLLIN)

    def send(self, m: Member, data: bytes | bytearray, kind: int, offset: int = -1) -> None:
        m.inflight.append((kind, time.perf_counter(), offset, m.epoch))
        try:
            sent = os.write(m.fd, data)
        except BlockingIOError:
            sent = 0
        if sent < len(data):
            # The socket buffer is full (the broker is far behind): finish this one blocking.
            m.sock.setblocking(True)
            m.sock.sendall(memoryview(data)[sent:])
            m.sock.setblocking(False)

    def poll(self, timeout: float) -> None:
        for fd, _ in self.epoll.poll(timeout, 1024):
            m = self.by_fd[fd]
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError(f"the broker closed the connection of {m.group.name}/{m.index}")
            buf = m.buf
            buf += data
            pos = 0
            while len(buf) - pos >= 4:
                (size,) = _SIZE.unpack_from(buf, pos)
                if len(buf) - pos < 4 + size:
                    break
                self.answer(m, bytes(buf[pos + 4 : pos + 4 + size]))
                pos += 4 + size
            del buf[:pos]

    # ---- formation ----------------------------------------------------------------------------

    def join(self, m: Member) -> None:
        m.state = JOINING
        m.epoch += 1
        self.send(m, encode(ApiKey.JoinGroup, JOIN_V, JoinGroupRequest(
            group_id=m.group.name, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            member_id=m.member_id, protocol_type="consumer",
            protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"\x00\x00")]), 0, m.client_id), JOIN)

    def on_join(self, m: Member, frame: bytes) -> None:
        r = decode(ApiKey.JoinGroup, JOIN_V, frame)
        if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            m.member_id = r.member_id
            self.join(m)
            return
        if r.error_code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID):
            self.formation_rejoins += 1
            m.member_id = "" if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID else m.member_id
            self.join(m)
            return
        if r.error_code:
            raise RuntimeError(f"JoinGroup of {m.group.name}/{m.index}: {ErrorCode(r.error_code).name}")
        m.member_id = r.member_id
        m.generation = r.generation_id
        m.state = SYNCING
        assignments = []
        if r.leader == m.member_id:
            m.group.leader_view = (r.generation_id, len(r.members))
            assignments = [SyncGroupRequest.Assignment(member_id=x.member_id, assignment=b"\x00") for x in r.members]
        self.send(m, encode(ApiKey.SyncGroup, SYNC_V, SyncGroupRequest(
            group_id=m.group.name, generation_id=m.generation, member_id=m.member_id, protocol_type="consumer",
            protocol_name=r.protocol_name, assignments=assignments), 0, m.client_id), SYNC)

    def on_sync(self, m: Member, frame: bytes) -> None:
        r = decode(ApiKey.SyncGroup, SYNC_V, frame)
        if r.error_code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID,
                            ErrorCode.ILLEGAL_GENERATION):
            self.formation_rejoins += 1
            m.member_id = "" if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID else m.member_id
            self.join(m)
            return
        if r.error_code:
            raise RuntimeError(f"SyncGroup of {m.group.name}/{m.index}: {ErrorCode(r.error_code).name}")
        m.state = SYNCED
        self.prepare_frames(m)
        g = m.group
        if not g.complete and all(x.state == SYNCED and x.generation == m.generation for x in g.members) and \
                g.leader_view == (m.generation, GROUP_SIZE):
            g.complete = True
            self.incomplete -= 1
            self.start_steady(g)
        else:
            self.at(time.perf_counter() + FORMING_HEARTBEAT_S, HEARTBEAT, m)

    def prepare_frames(self, m: Member) -> None:
        m.heartbeat_frame = encode(ApiKey.Heartbeat, HEARTBEAT_V, HeartbeatRequest(
            group_id=m.group.name, generation_id=m.generation, member_id=m.member_id), 0, m.client_id)
        body = OffsetCommitRequest(
            group_id=m.group.name, generation_id_or_member_epoch=m.generation, member_id=m.member_id,
            topics=[OffsetCommitRequest.Topic(name=TOPIC, partitions=[OffsetCommitRequest.Topic.Partition(
                partition_index=m.index, committed_offset=_OFFSET_SENTINEL, committed_metadata="")])])
        frame = encode(ApiKey.OffsetCommit, COMMIT_V, body, 0, m.client_id)
        m.commit_frame = bytearray(frame)
        m.commit_at = frame.index(_OFFSET.pack(_OFFSET_SENTINEL))
        ok = OffsetCommitResponse(topics=[OffsetCommitResponse.Topic(name=TOPIC, partitions=[
            OffsetCommitResponse.Topic.Partition(partition_index=m.index, error_code=0)])])
        # The answer to a successful commit, after the response header: compared as bytes.
        m.commit_expected = OffsetCommitResponse.encode(ok, COMMIT_V)

    def start_steady(self, g: Group) -> None:
        now = time.perf_counter()
        for m in g.members:
            m.epoch += 1  # ends the faster heartbeats of formation
            self.at(now + self.heartbeat_s * self.rng.random(), HEARTBEAT, m)
            self.at(now + self.commit_s * self.rng.random(), COMMIT, m)

    # ---- the steady load ----------------------------------------------------------------------

    def at(self, due: float, kind: int, m: Member) -> None:
        self.seq += 1
        heapq.heappush(self.schedule, (due, self.seq, kind, m.epoch, m))

    def run_due(self) -> None:
        now = time.perf_counter()
        schedule = self.schedule
        while schedule and schedule[0][0] <= now:
            due, _, kind, epoch, m = heapq.heappop(schedule)
            if self.stopping or epoch != m.epoch or m.state != SYNCED:
                continue
            if self.measuring_from <= due < self.measuring_until:
                self.lateness.append(time.perf_counter() - due)
            if kind == HEARTBEAT:
                self.send(m, m.heartbeat_frame, HEARTBEAT)
                self.at(due + (self.heartbeat_s if m.group.complete else FORMING_HEARTBEAT_S), HEARTBEAT, m)
            else:
                m.offset += 1
                m.commit_frame[m.commit_at : m.commit_at + 8] = _OFFSET.pack(m.offset)
                self.send(m, m.commit_frame, COMMIT, m.offset)
                self.at(due + self.commit_s, COMMIT, m)

    def answer(self, m: Member, frame: bytes) -> None:
        kind, sent, offset, epoch = m.inflight.popleft()
        if kind == HEARTBEAT:
            (code,) = _ERROR.unpack_from(frame, _HEARTBEAT_ERROR_AT)
            self.measured(kind, sent)
            if code and (epoch != m.epoch or m.state != SYNCED):
                # Several heartbeats were in flight and an earlier one already started a rejoin.
                self.formation_rejoins += 1
            elif code:
                if m.group.complete:
                    name = ErrorCode(code).name
                    self.spurious[name] = self.spurious.get(name, 0) + 1
                    m.group.complete = False
                    self.incomplete += 1
                else:
                    self.formation_rejoins += 1
                if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    # Removed (its session or the rebalance timed out) or behind: join afresh.
                    m.member_id = "" if code == ErrorCode.UNKNOWN_MEMBER_ID else m.member_id
                    self.join(m)
                elif code == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.join(m)
                else:
                    raise RuntimeError(f"heartbeat of {m.group.name}/{m.index}: {ErrorCode(code).name}")
        elif kind == COMMIT:
            self.measured(kind, sent)
            if frame[_COMMIT_BODY_AT:] == m.commit_expected:
                m.acked_offset = offset
            else:
                r = decode(ApiKey.OffsetCommit, COMMIT_V, frame)
                code = r.topics[0].partitions[0].error_code
                name = ErrorCode(code).name
                self.commit_errors[name] = self.commit_errors.get(name, 0) + 1
        elif kind == JOIN:
            self.on_join(m, frame)
        else:
            self.on_sync(m, frame)

    def measured(self, kind: int, sent: float) -> None:
        if self.measuring_from <= sent < self.measuring_until:
            latency = time.perf_counter() - sent
            self.latency[kind].append(latency)
            self.answers_in_window += 1
            if kind == HEARTBEAT:
                self.heartbeat_times.append((sent, latency))

    def saturation(self, cores: float) -> dict[str, Any]:
        """The generator's own load over the window: its CPU (``cores``), how late its requests
        left (p50/p99/max ms), and whether it was the bottleneck: past 0.9 of a core, or its
        p99 lateness past a tenth of the heartbeat interval (a heartbeat meant for every second
        leaving 100 ms late). Figures taken so are flagged, not trusted."""
        late = sorted(self.lateness)
        p99 = percentile(late, 0.99) * 1000
        return {
            "loadgen_cores": cores, "loadgen_late_p50_ms": percentile(late, 0.5) * 1000, "loadgen_late_p99_ms": p99,
            "loadgen_late_max_ms": (late[-1] if late else float("nan")) * 1000,
            "loadgen_saturated": cores >= 0.9 or p99 >= self.heartbeat_s * 100,
        }

    def in_flight(self) -> int:
        return sum(len(m.inflight) for g in self.groups for m in g.members)

    # ---- phases -------------------------------------------------------------------------------

    def form(self, wave: int, timeout: float) -> float:
        """Forms every group, ``wave`` groups starting at a time; returns the seconds it took."""
        started = time.perf_counter()
        deadline = started + timeout
        report = started + 5
        waiting = deque(self.groups)
        while self.incomplete:
            forming = len(self.groups) - len(waiting) - (len(self.groups) - self.incomplete)
            while waiting and forming < wave:
                g = waiting.popleft()
                g.started = True
                for m in g.members:
                    self.join(m)
                forming += 1
            self.poll(0.01)
            self.run_due()
            now = time.perf_counter()
            if now >= report:
                report = now + 5
                print(f"  forming: {len(self.groups) - self.incomplete}/{len(self.groups)} groups after "
                      f"{now - started:.0f}s", file=sys.stderr, flush=True)
            if now > deadline:
                raise RuntimeError(f"{self.incomplete} groups still not formed after {timeout:.0f}s")
        return time.perf_counter() - started

    def steady(self, until: float) -> None:
        while time.perf_counter() < until:
            timeout = max(0.0, min(self.schedule[0][0] - time.perf_counter(), 0.05)) if self.schedule else 0.05
            self.poll(timeout)
            self.run_due()

    def drain(self, timeout: float) -> None:
        self.stopping = True
        deadline = time.perf_counter() + timeout
        while self.in_flight():
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{self.in_flight()} requests still unanswered {timeout:.0f}s after the end")
            self.poll(0.05)

    def check_offsets(self) -> tuple[int, int]:
        """(members whose committed offset is their last acknowledged one, members checked)."""
        good = 0
        ports = self.coordinator_ports()
        for port in sorted(set(ports.values())):
            groups = [g for g in self.groups if ports[g.name] == port]
            with socket.create_connection(("127.0.0.1", port)) as sock:
                for i in range(0, len(groups), 100):
                    chunk = groups[i : i + 100]
                    r = blocking_call(sock, ApiKey.OffsetFetch, FETCH_V, OffsetFetchRequest(
                        groups=[OffsetFetchRequest.Group(group_id=g.name, topics=None) for g in chunk]))
                    for g, answer in zip(chunk, r.groups, strict=True):
                        got = {p.partition_index: p.committed_offset for t in answer.topics if t.name == TOPIC
                               for p in t.partitions}
                        good += sum(1 for m in g.members if got.get(m.index, -1) == m.acked_offset)
        return good, sum(len(g.members) for g in self.groups)

    def close(self) -> None:
        for g in self.groups:
            for m in g.members:
                m.sock.close()
        self.epoll.close()


def nodes_user_system(pids: list[int]) -> tuple[float, float]:
    """The same, summed over a broker's node processes."""
    both = [user_system(pid) for pid in pids]
    return sum(u for u, _ in both), sum(s for _, s in both)


def busiest_loop(pids: list[int], before: list[float], wall: float) -> float:
    """The largest share of one core a node's event loop used since ``before`` (its CPU seconds
    then, node by node): at 1.0 requests queue behind each other whatever the other cores do."""
    return max((loop_seconds(pid) - b for pid, b in zip(pids, before, strict=True)), default=0.0) / wall


class Subject(Protocol):
    """What the load runs against: one broker, or the nodes of a cluster on this host."""

    @property
    def port(self) -> int: ...

    @property
    def pids(self) -> list[int]: ...

    def rss(self) -> float: ...


class Nodes:
    """`kcoord serve --nodes N` on a temporary directory, with its private etcd: the subject of a
    run over several nodes. Its CPU and RSS are its node processes' (not etcd's, nor the
    launcher's)."""

    def __init__(self, count: int, flush_policy: str, overrides: dict[str, str]) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="kcoord-members-"))
        # At the default log level: the launcher logs its nodes' PIDs at INFO.
        props = {"log.flush.policy": flush_policy, **overrides}
        self.launcher, self.nodes = launch(self.tmp / "data", f"members{os.getpid()}", count, 10_000, props)
        try:
            wait_spread(self.nodes, timeout=120)
        except BaseException:
            self.stop()
            raise

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes]

    def rss(self) -> float:
        return sum(rss_mb(pid) for pid in self.pids)

    def stop(self) -> None:
        try:
            self.launcher.stop()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


class Kafka:
    """Apache Kafka 4.4 as the tests run it (``testkit.kafka.KafkaProcess``: one KRaft node, broker
    and controller in one JVM), on a temporary directory: the same load against the reference."""

    def __init__(self) -> None:
        libs = kafka_libs()
        if libs is None:
            raise SystemExit("Kafka is not fetched: run scripts/kafka.sh first")
        self.tmp = Path(tempfile.mkdtemp(prefix="kcoord-members-kafka-"))
        self.kafka = KafkaProcess(libs, self.tmp / "kafka").start(wait=180)

    @property
    def port(self) -> int:
        return self.kafka.port

    @property
    def pids(self) -> list[int]:
        assert self.kafka.proc is not None
        return [self.kafka.proc.pid]

    def rss(self) -> float:
        return rss_mb(self.pids[0])

    def stop(self) -> None:
        try:
            self.kafka.stop()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Scraper:
    """GET /metrics every ``interval`` seconds from a thread, as Prometheus does, each scrape timed."""

    def __init__(self, port: int, interval: float) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.took: list[float] = []
        self.sizes: list[int] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def _run(self) -> None:
        while not self.stopped.wait(self.interval):
            began = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=60) as answer:
                body = answer.read()
            self.took.append(time.perf_counter() - began)
            self.sizes.append(len(body))

    def __enter__(self) -> Scraper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(120)

    def summary(self) -> dict[str, Any]:
        took = sorted(self.took)
        return {"scrapes": len(took), "scrape_p50_ms": percentile(took, 0.5) * 1000 if took else float("nan"),
                "scrape_max_ms": took[-1] * 1000 if took else float("nan"),
                "scrape_kb": max(self.sizes, default=0) / 1024}


def run(members: int, seconds: float, warmup: float, flush_policy: str, root: Path | None,
        wave: int, seed: int, heartbeat_s: float = 1.0, commit_s: float = 5.0, timeline: bool = False,
        overrides: dict[str, str] | None = None, ready: Callable[[], bool] | None = None,
        generators: int = 1, nodes: int = 1, kafka: bool = False, scrape_s: float = 0.0) -> dict[str, Any]:
    """``ready``: asked between rounds of the load once the groups are formed, until it says yes
    (at most two minutes), before the warm-up: whatever else a comparison runs beside the broker
    (bench.console_cost's browser) is in place before anything is counted. ``generators``: the
    members spread over that many processes (``ready`` is then not asked). ``nodes``: more than one
    runs `kcoord serve --nodes N` (this checkout's), each group's members on its coordinator.
    ``kafka``: Apache Kafka instead (its default durability: acknowledged from the page cache).
    ``scrape_s``: /metrics scraped that often throughout (one kcoord node only)."""
    broker: Broker | Nodes | Kafka
    props: dict[str, Any] = dict(overrides or {})
    metrics_port = 0
    if scrape_s > 0:
        if kafka or nodes != 1:
            raise ValueError("scraping is measured on one kcoord node")
        metrics_port = free_port()
        props["metrics.listener"] = f"http://127.0.0.1:{metrics_port}"
    if kafka:
        broker = Kafka()
    elif nodes == 1:
        broker = Broker(root=root, log_flush_policy=flush_policy, **props)
    else:
        broker = Nodes(nodes, flush_policy, props)
    print(f"  broker pids {broker.pids}", file=sys.stderr, flush=True)
    try:
        with socket.create_connection(("127.0.0.1", broker.port)) as admin:
            r = blocking_call(admin, ApiKey.CreateTopics, 5, CreateTopicsRequest(topics=[
                CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=GROUP_SIZE, replication_factor=1,
                                                   assignments=[], configs=[])], timeout_ms=10000))
            if r.topics[0].error_code:
                raise RuntimeError(f"CreateTopics: {ErrorCode(r.topics[0].error_code).name}")
        with contextlib.ExitStack() as scraping:
            scraper = scraping.enter_context(Scraper(metrics_port, scrape_s)) if scrape_s > 0 else None
            if generators > 1:
                measured = _spread(broker, members, seconds, warmup, wave, seed, heartbeat_s, commit_s, generators)
            else:
                measured = _one_process(broker, members, seconds, warmup, wave, seed, heartbeat_s, commit_s, ready)
    finally:
        broker.stop()
    if timeline:
        print_timeline(measured.heartbeat_times, measured.measuring_from)
    hb, cm, wall = sorted(measured.heartbeats), sorted(measured.commits), measured.wall
    broker_user, broker_cpu = measured.broker_user, measured.broker_cpu
    answers = measured.answers
    return {
        "members": members, "broker": "Kafka" if kafka else "kcoord", "nodes": nodes, "seconds": round(wall, 2), "flush_policy": flush_policy,
        "heartbeat_interval": heartbeat_s, "commit_interval": commit_s,
        "connect_s": round(measured.connect_s, 2), "formation_s": round(measured.form_s, 2),
        "formation_rejoins": measured.formation_rejoins,
        "heartbeats": len(hb), "heartbeat_p50_ms": percentile(hb, 0.5) * 1000,
        "heartbeat_p99_ms": percentile(hb, 0.99) * 1000, "heartbeat_max_ms": (hb[-1] if hb else float("nan")) * 1000,
        "commits": len(cm), "commit_p50_ms": percentile(cm, 0.5) * 1000, "commit_p99_ms": percentile(cm, 0.99) * 1000,
        "commit_max_ms": (cm[-1] if cm else float("nan")) * 1000,
        "spurious_rebalances": sum(measured.spurious.values()), "spurious_by_error": measured.spurious,
        "commit_errors": measured.commit_errors, "offsets_correct": f"{measured.good}/{measured.checked}",
        "requests_per_s": answers / wall, "broker_cores": broker_cpu / wall,
        "broker_cpu_us_per_request": broker_cpu / max(answers, 1) * 1e6,
        "broker_user_us_per_request": broker_user / max(answers, 1) * 1e6, "broker_rss_mb": measured.rss,
        # A JVM's main thread is not where Kafka serves requests: only a kcoord node's loop counts.
        "loop_cores": None if kafka else measured.loop_cores,
        **measured.saturation, "generators": generators,
        **(scraper.summary() if scraper is not None else {}),
    }


@dataclass
class Measured:
    """What one run measured, from one generator process or merged from several. The broker's
    figures (CPU, RSS) are taken by the process that watches it."""

    connect_s: float
    form_s: float
    measuring_from: float
    wall: float
    heartbeats: list[float]
    commits: list[float]
    heartbeat_times: list[tuple[float, float]]
    answers: int
    spurious: dict[str, int]
    commit_errors: dict[str, int]
    formation_rejoins: int
    good: int
    checked: int
    saturation: dict[str, Any]
    broker_user: float = 0.0
    broker_cpu: float = 0.0
    rss: float = 0.0
    loop_cores: float = 0.0  # the busiest node's event loop, in cores

    @classmethod
    def of(cls, load: Load, connect_s: float, form_s: float, wall: float, generator_cores: float) -> Measured:
        """A finished load's figures (it is drained, its offsets checked here, and closed)."""
        load.drain(60)
        good, checked = load.check_offsets()
        load.close()
        return cls(connect_s, form_s, load.measuring_from, wall, load.latency[HEARTBEAT], load.latency[COMMIT],
                   load.heartbeat_times, load.answers_in_window, load.spurious, load.commit_errors,
                   load.formation_rejoins, good, checked, load.saturation(generator_cores))

    @classmethod
    def merged(cls, parts: list[Measured]) -> Measured:
        """Several generators' figures over one window, as if one had measured them: the busiest
        generator's saturation speaks for the load (one saturated process skews its members)."""
        def counts(of: list[dict[str, int]]) -> dict[str, int]:
            total: dict[str, int] = {}
            for d in of:
                for name, n in d.items():
                    total[name] = total.get(name, 0) + n
            return total

        saturations = [m.saturation for m in parts]
        worst = max(saturations, key=lambda r: (r["loadgen_saturated"], r["loadgen_late_p99_ms"]))
        return cls(
            max(m.connect_s for m in parts), max(m.form_s for m in parts), parts[0].measuring_from,
            max(m.wall for m in parts), [x for m in parts for x in m.heartbeats], [x for m in parts for x in m.commits],
            sorted(x for m in parts for x in m.heartbeat_times), sum(m.answers for m in parts),
            counts([m.spurious for m in parts]), counts([m.commit_errors for m in parts]),
            sum(m.formation_rejoins for m in parts), sum(m.good for m in parts), sum(m.checked for m in parts),
            {**worst, "loadgen_cores": max(r["loadgen_cores"] for r in saturations),
             "loadgen_late_max_ms": max(r["loadgen_late_max_ms"] for r in saturations),
             "loadgen_saturated": any(r["loadgen_saturated"] for r in saturations)})


def _one_process(broker: Subject, members: int, seconds: float, warmup: float, wave: int, seed: int,
                 heartbeat_s: float, commit_s: float, ready: Callable[[], bool] | None) -> Measured:
    load = Load(broker.port, members, seed, heartbeat_s, commit_s)
    t0 = time.perf_counter()
    load.connect_all()
    connect_s = time.perf_counter() - t0
    form_s = load.form(wave, timeout=max(120.0, members / 20))
    print(f"  formed in {form_s:.1f}s; warming up", file=sys.stderr, flush=True)
    if ready is not None:
        waited_until = time.perf_counter() + 120
        while not ready() and time.perf_counter() < waited_until:
            load.steady(time.perf_counter() + 0.5)
    # This process's own collector must not pause the clock either: what exists now lives
    # until the end.
    gc.collect()
    gc.freeze()
    load.steady(time.perf_counter() + warmup)  # nothing is counted before the window
    print("  measuring", file=sys.stderr, flush=True)
    loops = [loop_seconds(pid) for pid in broker.pids]
    (u0, s0), l0, w0 = nodes_user_system(broker.pids), self_cpu(), time.perf_counter()
    load.measuring_from, load.measuring_until = w0, w0 + seconds
    load.steady(load.measuring_until)
    wall = time.perf_counter() - w0
    u1, s1 = nodes_user_system(broker.pids)
    loop_cores = busiest_loop(broker.pids, loops, wall)
    load_cpu = self_cpu() - l0
    rss = broker.rss()
    measured = Measured.of(load, connect_s, form_s, wall, load_cpu / wall)
    measured.broker_user, measured.broker_cpu, measured.rss = u1 - u0, (u1 - u0) + (s1 - s0), rss
    measured.loop_cores = loop_cores
    return measured


def _generator(port: int, members: int, seed: int, heartbeat_s: float, commit_s: float, wave: int,
               first_group: int, conn: Connection) -> None:
    """One generator process's share of a spread load (its groups named from ``first_group``): forms
    them and says so, keeps them heartbeating until told the window, measures it, and sends back
    what it measured."""
    load = Load(port, members, seed, heartbeat_s, commit_s, first_group=first_group)
    t0 = time.perf_counter()
    load.connect_all()
    connect_s = time.perf_counter() - t0
    form_s = load.form(wave, timeout=max(120.0, members / 20))
    conn.send(form_s)
    while not conn.poll(0):
        load.steady(time.perf_counter() + 0.05)
    start, until = conn.recv()
    gc.collect()
    gc.freeze()
    load.steady(start)
    l0 = self_cpu()
    load.measuring_from, load.measuring_until = start, until
    load.steady(until)
    wall = time.perf_counter() - start
    conn.send(Measured.of(load, connect_s, form_s, wall, (self_cpu() - l0) / wall))


def _spread(broker: Subject, members: int, seconds: float, warmup: float, wave: int, seed: int,
            heartbeat_s: float, commit_s: float, generators: int) -> Measured:
    """The same load from ``generators`` processes, each with its share of the groups on its own
    core's worth of time, measuring the same window: for member counts one process cannot drive
    without sending late."""
    groups = members // GROUP_SIZE
    shares = [groups // generators + (1 if i < groups % generators else 0) for i in range(generators)]
    ctx = multiprocessing.get_context("fork")
    pipes, children, first = [], [], 0
    for i, share in enumerate(shares):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_generator, args=(broker.port, share * GROUP_SIZE, seed + i, heartbeat_s,
                                                    commit_s, max(1, wave // generators), first, child))
        proc.start()
        pipes.append(parent)
        children.append(proc)
        first += share
    try:
        formed = max(pipe.recv() for pipe in pipes)
        print(f"  formed in {formed:.1f}s by {generators} generators; warming up", file=sys.stderr, flush=True)
        start = time.perf_counter() + warmup
        for pipe in pipes:
            pipe.send((start, start + seconds))
        time.sleep(max(0.0, start - time.perf_counter()))
        print("  measuring", file=sys.stderr, flush=True)
        loops = [loop_seconds(pid) for pid in broker.pids]
        u0, s0 = nodes_user_system(broker.pids)
        time.sleep(max(0.0, start + seconds - time.perf_counter()))
        u1, s1 = nodes_user_system(broker.pids)
        loop_cores = busiest_loop(broker.pids, loops, seconds)
        rss = broker.rss()
        measured = Measured.merged([pipe.recv() for pipe in pipes])
    finally:
        for proc in children:
            proc.join(60)
            if proc.is_alive():
                proc.kill()
    measured.broker_user, measured.broker_cpu, measured.rss = u1 - u0, (u1 - u0) + (s1 - s0), rss
    measured.loop_cores = loop_cores
    return measured


def print_timeline(samples: list[tuple[float, float]], start: float) -> None:
    """Heartbeat latency second by second: whether slow answers come together (a pause) or not."""
    by_second: dict[int, list[float]] = {}
    for sent, latency in samples:
        by_second.setdefault(int(sent - start), []).append(latency)
    for second, values in sorted(by_second.items()):
        values.sort()
        slow = sum(1 for v in values if v > 0.020)
        print(f"  t={second:3}s heartbeats {len(values):6}  p50 {percentile(values, 0.5) * 1000:7.2f}  p99 "
              f"{percentile(values, 0.99) * 1000:7.2f}  max {values[-1] * 1000:7.1f} ms  over 20 ms: {slow}",
              file=sys.stderr)


def show(r: dict[str, Any]) -> None:
    print(f"{r['members']:6} members ({r['broker']}, {r['nodes']} node{'s' if r['nodes'] > 1 else ''}, "
          f"{'page cache' if r['broker'] == 'Kafka' else r['flush_policy']}, {r['seconds']:.0f}s, heartbeat every "
          f"{r['heartbeat_interval']:g}s, commit every {r['commit_interval']:g}s): "
          f"heartbeat p50 {r['heartbeat_p50_ms']:.2f} p99 {r['heartbeat_p99_ms']:.2f} max {r['heartbeat_max_ms']:.1f} ms; "
          f"commit p50 {r['commit_p50_ms']:.2f} p99 {r['commit_p99_ms']:.2f} max {r['commit_max_ms']:.1f} ms; "
          f"{r['requests_per_s']:,.0f} req/s; broker {r['broker_cores']:.2f} cores"
          + ("" if r.get("loop_cores") is None else
             f" (event loop {r['loop_cores']:.2f}{' on the busiest node' if r['nodes'] > 1 else ''})")
          + ", "
          f"{r['broker_cpu_us_per_request']:.0f} µs CPU/request ({r['broker_user_us_per_request']:.0f} in user "
          f"space), RSS {r['broker_rss_mb']:.0f} MB; "
          f"loadgen {r['loadgen_cores']:.2f} cores, requests sent late by p99 {r['loadgen_late_p99_ms']:.1f} "
          f"max {r['loadgen_late_max_ms']:.1f} ms{' (SATURATED: these figures measure the generator)' if r['loadgen_saturated'] else ''}; "
          f"spurious rebalances {r['spurious_rebalances']} "
          f"{r['spurious_by_error'] or ''}; commit errors {r['commit_errors'] or 0}; offsets correct "
          f"{r['offsets_correct']}; formed in {r['formation_s']:.1f}s ({r['formation_rejoins']} rejoins)"
          + (f"; /metrics scraped {r['scrapes']} times, {r['scrape_p50_ms']:.0f} ms p50, {r['scrape_max_ms']:.0f} ms max, "
             f"{r['scrape_kb']:,.0f} KB" if "scrapes" in r else ""),
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, nargs="+", default=[2000, 5000, 10000],
                        help="member counts to run (multiples of 10), one broker each")
    parser.add_argument("--seconds", type=float, default=30.0, help="measuring window")
    parser.add_argument("--warmup", type=float, default=5.0, help="steady load before the window")
    parser.add_argument("--flush-policy", choices=["sync", "interval"], default="sync")
    parser.add_argument("--wave", type=int, default=100, help="groups forming at once")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--heartbeat-interval", type=float, default=1.0, help="seconds between a member's heartbeats")
    parser.add_argument("--commit-interval", type=float, default=5.0, help="seconds between a member's commits")
    parser.add_argument("--broker-root", type=Path, default=None,
                        help="run the kcoord of another checkout (A/B comparisons)")
    parser.add_argument("--generators", type=int, default=1,
                        help="processes the members are spread over (one cannot drive tens of thousands without sending late)")
    parser.add_argument("--nodes", type=int, default=1,
                        help="run `kcoord serve --nodes N` (a private etcd; each group on its coordinator)")
    parser.add_argument("--kafka", action="store_true", help="run Apache Kafka 4.4 instead (after scripts/kafka.sh)")
    parser.add_argument("--scrape-interval", type=float, default=0.0, metavar="S",
                        help="scrape the broker's /metrics every S seconds throughout, as Prometheus would")
    parser.add_argument("--json", action="store_true", help="also print each result as a JSON line")
    parser.add_argument("--timeline", action="store_true", help="heartbeat latency per second, on stderr")
    parser.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                        help="a broker property (repeatable), e.g. metrics.listener=http://127.0.0.1:9464")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = max(args.members) + 4096
    if soft < need:
        # The broker inherits this limit: it needs one descriptor per member too, and more for its
        # logs (a flush syncs through a descriptor of its own); at the limit a flush fails, and
        # the shard is rebuilt from its log while its members hear NOT_COORDINATOR.
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard) if hard != resource.RLIM_INFINITY else need, hard))
    for n in args.members:
        r = run(n, args.seconds, args.warmup, args.flush_policy, args.broker_root, args.wave, args.seed,
                args.heartbeat_interval, args.commit_interval, args.timeline,
                dict(o.split("=", 1) for o in args.override), generators=args.generators, nodes=args.nodes,
                kafka=args.kafka, scrape_s=args.scrape_interval)
        show(r)
        if args.json:
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
