"""The whole broker shell in the test's own trio run: real router, handlers, shards, log runtime
and connections, with partition logs from a ``FakeDisk`` and the coordinator's clock on trio's
``MockClock``.

Clients talk to it over a socket pair served by a real ``Connection``, so a test sees exactly the
bytes a client would, in the order it would. Time moves only when the test jumps the mock clock:
flushes run on real threads, and an event loop waiting for a thread looks idle, so autojumping
would let virtual time run on during every flush.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from broker.configs.node_config import BrokerConfig
from broker.network.connection import Connection
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo
from broker.server import Broker
from kclient import wire_client as wire
from kclient.wire_client import decode_response
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_protocol import ConsumerProtocolSubscription
from protocol.messages.describe_groups import DescribeGroupsRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.sync_group import SyncGroupRequest
from protocol.payloads.consumer_protocol import encode_subscription
from protocol.record_batch import build_simple_batch
from tests.unit.runtime.fake_log import FakeDisk

# The coordinator's wall clock is this many ms plus trio's (mock) time, so records carry
# realistic timestamps and timer deadlines move with the mock clock.
EPOCH_MS = 1_700_000_000_000
OFFSETS_LOG = "__consumer_offsets-0"
TOPIC = "t"
Call = tuple[int, int, Any]  # (api key, version, request body)


def mock_wall_ms() -> int:
    return EPOCH_MS + round(trio.current_time() * 1000)


async def real_pause(seconds: float = 0.002) -> None:
    """Lets worker threads (log opens, flushes) run while virtual time stands still."""
    await trio.to_thread.run_sync(time.sleep, seconds)


# ---- requests ----------------------------------------------------------------------------------

def commit(group: str, offset: int, *, partition: int = 0, generation: int = -1, member_id: str = "") -> Call:
    return ApiKey.OffsetCommit, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, topics=[
            OffsetCommitRequest.Topic(name=TOPIC, partitions=[OffsetCommitRequest.Topic.Partition(
                partition_index=partition, committed_offset=offset, committed_metadata="")])])


def offset_fetch(group: str) -> Call:
    return ApiKey.OffsetFetch, 8, OffsetFetchRequest(groups=[OffsetFetchRequest.Group(group_id=group, topics=None)])


def describe(*groups: str) -> Call:
    return ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=list(groups), include_authorized_operations=False)


def list_groups() -> Call:
    return ApiKey.ListGroups, 4, ListGroupsRequest(states_filter=[])


def api_versions() -> Call:
    return ApiKey.ApiVersions, 3, ApiVersionsRequest(client_software_name="inproc", client_software_version="1")


def join(group: str, member_id: str = "", *, session_ms: int = 10_000, rebalance_ms: int = 30_000) -> Call:
    meta = encode_subscription(ConsumerProtocolSubscription(topics=[TOPIC]), 0)
    return ApiKey.JoinGroup, 5, JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=[JoinGroupRequest.Protocol(name="range", metadata=meta)])


def sync(group: str, member_id: str, generation: int, assignments: dict[str, bytes]) -> Call:
    return ApiKey.SyncGroup, 3, SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
        assignments=[SyncGroupRequest.Assignment(member_id=m, assignment=a) for m, a in assignments.items()])


def heartbeat(group: str, member_id: str, generation: int) -> Call:
    return ApiKey.Heartbeat, 4, HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                                 group_instance_id=None)


def produce(topic: str, value: bytes, *, partition: int = 0) -> Call:
    raw = build_simple_batch([(None, value, EPOCH_MS)])
    return ApiKey.Produce, 9, ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=raw)])])


# ---- reading answers ---------------------------------------------------------------------------

def committed(response: Any) -> tuple[int, dict[int, int]]:
    """(group error, {partition: offset}) of a v8+ OffsetFetch answer for one group."""
    group = response.groups[0]
    return int(group.error_code), {p.partition_index: p.committed_offset for t in group.topics for p in t.partitions}


def produced(response: Any) -> tuple[int, int]:
    """(error, base offset) of a Produce answer for one partition."""
    part = response.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def commit_code(response: Any) -> int:
    return int(response.topics[0].partitions[0].error_code)


def decode_reply(api_key: int, reply: Reply) -> Any:
    """The body in a filled reply slot (as the connection would send it)."""
    assert reply.data is not None, "the reply slot is empty"
    return decode_response(api_key, reply.version, reply.data[4:])[1]


def encode_request(correlation: int, call: Call, client_id: str = "inproc") -> bytes:
    api_key, version, body = call
    return wire.encode_request(api_key, version, correlation, client_id, body)


# ---- clients -----------------------------------------------------------------------------------

class Client:
    """The client end of a socket pair whose other end a ``Connection`` serves."""

    def __init__(self, sock: socket.socket, conn: Connection) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self.conn = conn  # the server side, for tests that look at its reply slots
        self.correlation = itertools.count(1)
        self.asked: dict[int, tuple[int, int]] = {}
        self.buf = bytearray()

    def send(self, *calls: Call) -> list[int]:
        """Sends the requests in one write (pipelined); their correlation ids."""
        ids, frames = [], []
        for call in calls:
            correlation = next(self.correlation)
            self.asked[correlation] = (call[0], call[1])
            ids.append(correlation)
            frames.append(encode_request(correlation, call))
        self.sock.sendall(b"".join(frames))  # small enough for the socket buffer
        return ids

    def has_answer(self) -> bool:
        """Whether any response bytes have arrived (without waiting)."""
        try:
            chunk = self.sock.recv(1 << 16)
        except BlockingIOError:
            return bool(self.buf)
        assert chunk, "the broker closed the connection"
        self.buf += chunk
        return True

    async def recv(self) -> tuple[int, Any]:
        """The next response: (correlation id, decoded body)."""
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf, 0)
                if len(self.buf) >= 4 + size:
                    frame = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    (correlation,) = struct.unpack_from(">i", frame, 0)
                    api_key, version = self.asked.pop(correlation)
                    return decode_response(api_key, version, frame)
            await trio.lowlevel.wait_readable(self.sock)
            try:
                chunk = self.sock.recv(1 << 16)
            except BlockingIOError:
                continue  # readiness can be reported spuriously
            assert chunk, "the broker closed the connection"
            self.buf += chunk

    async def call(self, call: Call) -> Any:
        (sent,) = self.send(call)
        correlation, body = await self.recv()
        assert correlation == sent
        return body


class Node:
    """A running in-process broker: its parts, its fake disk, and clients connected to it."""

    def __init__(self, broker: Broker, disk: FakeDisk, nursery: trio.Nursery) -> None:
        self.broker = broker
        self.disk = disk
        self.nursery = nursery
        self.clients: list[Client] = []
        self._conn_ids = itertools.count(1)

    def connect(self) -> Client:
        ours, theirs = socket.socketpair()
        conn_id = next(self._conn_ids)
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        conn = Connection(stream, self.broker.router, ConnectionInfo(conn_id, "127.0.0.1", 40_000 + conn_id),
                          self.broker.config.get_int("socket.request.max.bytes"), self.broker._on_response,
                          self.broker.readiness)
        self.nursery.start_soon(conn.run)
        client = Client(theirs, conn)
        self.clients.append(client)
        return client

    async def until(self, condition: Callable[[], bool], what: str, limit_s: float = 10.0) -> None:
        """Waits in real time (virtual time stands still) for work on worker threads."""
        deadline = time.monotonic() + limit_s
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await real_pause()

    async def until_asleep_until(self, at: float) -> None:
        """Until some task sleeps until virtual time ``at`` and none sooner: a periodic task is
        back asleep, its deadline set from the time it went to sleep."""
        def asleep() -> bool:
            left = trio.lowlevel.current_statistics().seconds_to_next_deadline
            return abs(left - (at - trio.current_time())) < 1e-9

        await self.until(asleep, f"a task to sleep until {at}")

    async def until_loaded(self) -> None:
        await self.until(lambda: self.broker.app.shards.loading == 0, "the shards to load")


@asynccontextmanager
async def running_broker(tmp_path: Path, clock: trio.testing.MockClock,
                         overrides: dict[str, str] | None = None) -> AsyncIterator[Node]:
    """A broker with one ``__consumer_offsets`` partition (every group on one shard) and topic "t"."""
    settings = {
        "log.dirs": str(tmp_path / "data"),
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.enable": "false",
        **(overrides or {}),
    }
    config = BrokerConfig.load(overrides=[f"{k}={v}" for k, v in settings.items()], environ={})
    disk = FakeDisk(clock.current_time)
    broker = Broker(config, log_opener=disk.open, clock=mock_wall_ms)
    broker.app.catalog.create(TOPIC, 4)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.app.logs.run)
            await nursery.start(broker.app.shards.run)
            nursery.start_soon(broker.readiness.run)
            node = Node(broker, disk, nursery)
            await node.until_loaded()
            try:
                yield node
            finally:
                for client in node.clients:
                    client.sock.close()
                nursery.cancel_scope.cancel()
    finally:
        # Nothing may stay held or failing: closing flushes every log.
        disk.fail_flushes(False)
        disk.release_flushes()
        await broker.close()
