"""Bad input closes only the offending connection, is logged once, and everyone else is served."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from tests.integration.helpers.clients import create_topic, wait_for

pytestmark = pytest.mark.timeout(60)


def _closed_by_broker(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _request(api_key: int, version: int, corr: int = 1, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, corr, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


CASES = {
    "garbage": b"\x00\x00\x00\x10" + b"\xde\xad\xbe\xef" * 4,
    "negative length": struct.pack(">i", -5) + b"xxxx",
    "2 GiB length": struct.pack(">i", 2**31 - 1) + b"xxxx",
    "over socket.request.max.bytes": struct.pack(">i", 200 * 1024 * 1024),
    "unknown api key": _request(9999, 0),
    "unsupported version": _request(ApiKey.Heartbeat, 99),
    "truncated body": _request(ApiKey.Metadata, 1, body=b"\x00\x00\x00\x05\x00"),
    "short header": struct.pack(">i", 3) + b"\x00\x03\x00",
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_frame_closes_only_that_connection(broker, case: str) -> None:
    healthy = WireClient("127.0.0.1", broker.port)
    assert healthy.call(ApiKey.ApiVersions, 3, ApiVersionsRequest(client_software_name="t",
                                                                  client_software_version="1")).error_code == 0
    log_before = broker.log().count("connection.closed")
    bad = socket.create_connection(("127.0.0.1", broker.port))
    bad.sendall(CASES[case])
    assert _closed_by_broker(bad), f"{case}: connection was not closed"
    bad.close()
    # The other client, connected all along, is still served.
    md = healthy.call(ApiKey.Metadata, 12, MetadataRequest(topics=None))
    assert [b.node_id for b in md.brokers] == [1]
    healthy.close()
    wait_for(lambda: broker.log().count("connection.closed") >= log_before + 1, 60, "the close logged",
             seen=lambda: broker.log().count("connection.closed") - log_before)
    assert broker.log().count("connection.closed") == log_before + 1


def test_truncated_frame_then_eof_is_harmless(broker) -> None:
    s = socket.create_connection(("127.0.0.1", broker.port))
    s.sendall(_request(ApiKey.ApiVersions, 0)[:7])
    s.close()
    with WireClient("127.0.0.1", broker.port) as c:
        assert c.call(ApiKey.ApiVersions, 0, ApiVersionsRequest()).error_code == 0


def test_api_versions_unknown_version_answers_kip_511(broker) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as s:
        s.sendall(_request(ApiKey.ApiVersions, 77, corr=42))
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    assert struct.unpack_from(">i", data, 0)[0] == 42
    body = ApiVersionsResponse.decode(data[4:], 0)
    assert body.error_code == 35
    # As Kafka: the range of ApiVersions versions this broker serves, nothing else.
    top = ApiVersionsRequest.valid.high
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, top)]


def test_pipelined_requests_are_answered_in_order(broker) -> None:
    with WireClient("127.0.0.1", broker.port) as c:
        sent = [c.send(ApiKey.Metadata if i % 2 else ApiKey.ApiVersions, 4 if i % 2 else 2,
                       MetadataRequest(topics=[]) if i % 2 else ApiVersionsRequest()) for i in range(50)]
        got = [struct.unpack_from(">i", c.recv_frame(), 0)[0] for _ in sent]
    assert got == sent


def test_durable_and_immediate_replies_keep_request_order(broker) -> None:
    """Commits (answered only once their records are on disk) pipelined between requests that
    are answered on the spot, on two connections at once: each connection gets every reply, in
    the order it asked, and the commits are all there afterwards."""
    create_topic(f"127.0.0.1:{broker.port}", "ordered", 4)
    P = OffsetCommitRequest.Topic.Partition

    def commit(group: str, offset: int) -> OffsetCommitRequest:
        return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequest.Topic(name="ordered", partitions=[P(partition_index=0, committed_offset=offset)])])

    def one_connection(conn: int, out: dict[int, tuple[list[int], list[int]]]) -> None:
        with WireClient("127.0.0.1", broker.port) as c:
            frames = []
            for i in range(120):
                if i % 3 == 2:
                    frames.append(c.encode(ApiKey.ApiVersions, 2, ApiVersionsRequest()))
                else:
                    # Groups spread over shards, so one pass writes several logs.
                    frames.append(c.encode(ApiKey.OffsetCommit, 8, commit(f"order-{conn}-{i % 7}", i)))
            c.sock.sendall(b"".join(data for _, data in frames))
            got = [struct.unpack_from(">i", c.recv_frame(), 0)[0] for _ in frames]
            out[conn] = (got, [corr for corr, _ in frames])

    results: dict[int, tuple[list[int], list[int]]] = {}
    threads = [threading.Thread(target=one_connection, args=(n, results)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [0, 1]
    for got, sent in results.values():
        assert got == sent
    with WireClient("127.0.0.1", broker.port) as c:
        for conn in range(2):
            for g in range(7):
                fetched = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id=f"order-{conn}-{g}", topics=None))
                offsets = [p.committed_offset for t in fetched.topics for p in t.partitions]
                last = max(i for i in range(120) if i % 3 != 2 and i % 7 == g)
                assert offsets == [last]


def test_a_client_gone_with_replies_owed_disturbs_nobody(broker_factory) -> None:
    """Clients send a JoinGroup that stays parked for the initial delay and a commit, then vanish
    (reset). New connections, which may get the same descriptor numbers, receive only their own
    answers while the parked joins complete, and the broker goes on serving."""
    broker = broker_factory({"group.initial.rebalance.delay.ms": "1500"})
    create_topic(f"127.0.0.1:{broker.port}", "owed", 1)
    P = OffsetCommitRequest.Topic.Partition
    for i in range(5):
        gone = WireClient("127.0.0.1", broker.port)
        gone.send(ApiKey.JoinGroup, 3, JoinGroupRequest(
            group_id=f"owed-{i}", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"")]))
        gone.send(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
            group_id=f"owed-simple-{i}", generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.Topic(name="owed", partitions=[P(partition_index=0, committed_offset=i)])]))
        gone.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        gone.close()
    deadline = time.monotonic() + 3.0  # past the initial delay: the parked joins complete meanwhile
    while time.monotonic() < deadline:
        with WireClient("127.0.0.1", broker.port) as c:
            sent = [c.send(ApiKey.ApiVersions, 2, ApiVersionsRequest()) for _ in range(3)]
            got = [struct.unpack_from(">i", c.recv_frame(), 0)[0] for _ in sent]
            assert got == sent
            c.sock.settimeout(0.05)
            with pytest.raises(TimeoutError):
                c.sock.recv(1)  # nothing more than what was asked for
        time.sleep(0.05)  # the scenario: a client that comes back again and again for 3 s
    assert broker.proc.poll() is None
    assert "handler.failed" not in broker.log() and "Traceback" not in broker.log()


def test_a_burst_larger_than_one_read_is_answered_in_order(broker) -> None:
    """25,000 requests (over 600 KB) written in one go: the broker reads them in several full
    reads, holds back while 512 are in flight, and answers every one in order."""
    with WireClient("127.0.0.1", broker.port) as c:
        frames = [c.encode(ApiKey.ApiVersions, 2, ApiVersionsRequest()) for _ in range(25_000)]
        burst = b"".join(data for _, data in frames)
        assert len(burst) > 2 * 256 * 1024
        sender = threading.Thread(target=c.sock.sendall, args=(burst,))
        sender.start()
        got = [struct.unpack_from(">i", c.recv_frame(), 0)[0] for _ in frames]
        sender.join(30)
    assert got == [corr for corr, _ in frames]


def test_a_large_request_arriving_in_pieces_then_a_small_one(broker) -> None:
    """A 300 KB request sent in three pauses, with the next request right behind its tail."""
    with WireClient("127.0.0.1", broker.port) as c:
        big_corr, big = c.encode(ApiKey.ApiVersions, 3, ApiVersionsRequest(
            client_software_name="a" * 300_000, client_software_version="1"))
        small_corr, small = c.encode(ApiKey.ApiVersions, 2, ApiVersionsRequest())
        for piece in (big[:1000], big[1000:150_000]):
            c.sock.sendall(piece)
            time.sleep(0.2)  # the scenario: the request arrives in pieces, apart
        c.sock.sendall(big[150_000:] + small)
        got = [struct.unpack_from(">i", c.recv_frame(), 0)[0] for _ in range(2)]
        assert got == [big_corr, small_corr]
        # The connection goes on serving ordinary requests.
        assert c.call(ApiKey.ApiVersions, 2, ApiVersionsRequest()).error_code == 0


def test_advertised_versions_cover_what_clients_require(broker) -> None:
    with WireClient("127.0.0.1", broker.port) as c:
        body = c.call(ApiKey.ApiVersions, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    # librdkafka enables its balanced consumer only if these start at v0 (see the spec notes).
    for key in (ApiKey.FindCoordinator, ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat, ApiKey.LeaveGroup):
        assert ranges[key][0] == 0
    assert ranges[ApiKey.JoinGroup][1] >= 5  # static membership needs v5+
    assert ranges[ApiKey.ApiVersions] == (0, 5)
