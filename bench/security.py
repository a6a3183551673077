"""OffsetCommit requests/s and heartbeats/s over SASL_SSL against PLAINTEXT, one broker, one run.

    python -m bench.security [--seconds 5] [--rounds 3]

One broker listens on PLAINTEXT and SASL_SSL (a test CA made with trustme). Each case keeps 4
connections x 8 requests in flight for ``--seconds`` from a separate process (a thread per
connection; TLS through Python's ssl), after a SASL PLAIN login on the SASL_SSL connections:
simple-consumer OffsetCommits of 4 partitions, and Heartbeats of four stable one-member groups.
Prints requests/s per case and round, then the medians and the SASL_SSL/PLAINTEXT ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import socket
import ssl
import statistics
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import Broker
from kclient.wire_client import WireClient
from protocol.frames import RequestHeader, frame_request
from protocol.messages import ApiKey
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.join_group import JoinGroupRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.messages.sync_group import SyncGroupRequest
from testkit.ports import free_port

CONNECTIONS = 4
IN_FLIGHT = 8
P = OffsetCommitRequest.Topic.Partition


def commit_frames(conn: int) -> list[bytes]:
    frames = []
    for k in range(64):
        body = OffsetCommitRequest(group_id=f"bench-simple-{conn}", generation_id_or_member_epoch=-1, member_id="",
                                   topics=[OffsetCommitRequest.Topic(name="bench", partitions=[
                                       P(partition_index=i, committed_offset=k * 4 + i, committed_metadata="")
                                       for i in range(4)])])
        frames.append(frame_request(RequestHeader(ApiKey.OffsetCommit, 9, k, "bench"),
                                    OffsetCommitRequest.encode(body, 9), True))
    return frames


def heartbeat_frames(member: tuple[str, int, str]) -> list[bytes]:
    group, generation, member_id = member
    body = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)
    return [frame_request(RequestHeader(ApiKey.Heartbeat, 4, k, "bench"), HeartbeatRequest.encode(body, 4), True)
            for k in range(64)]


def connect(port: int, ca: str | None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ca is None:
        return sock
    tls = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname="localhost")
    client = WireClient.over(tls, "bench")
    assert client.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert client.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
        auth_bytes=b"\0bench\0bench-secret")).error_code == 0
    return tls


def pump(sock: socket.socket, frames: list[bytes], seconds: float, counts: list[int], slot: int) -> None:
    """Keeps IN_FLIGHT requests outstanding; counts the responses."""
    buf = bytearray()
    nxt = 0
    deadline = time.perf_counter() + seconds
    sock.sendall(b"".join(frames[(nxt + j) % len(frames)] for j in range(IN_FLIGHT)))
    nxt += IN_FLIGHT
    outstanding = IN_FLIGHT
    while outstanding:
        data = sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the broker closed a connection")
        buf += data
        pos = n = 0
        while len(buf) - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos < 4 + size:
                break
            pos += 4 + size
            n += 1
        del buf[:pos]
        counts[slot] += n
        outstanding -= n
        if n and time.perf_counter() < deadline:
            sock.sendall(b"".join(frames[(nxt + j) % len(frames)] for j in range(n)))
            nxt += n
            outstanding += n


def _child(port: int, ca: str | None, frame_sets: list[list[bytes]], seconds: float, out: Any) -> None:
    socks = [connect(port, ca) for _ in frame_sets]
    counts = [0] * len(frame_sets)
    threads = [threading.Thread(target=pump, args=(s, f, seconds, counts, i)) for i, (s, f) in
               enumerate(zip(socks, frame_sets, strict=True))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put(sum(counts) / seconds)


def run_case(port: int, ca: str | None, frame_sets: list[list[bytes]], seconds: float) -> float:
    ctx = multiprocessing.get_context("fork")
    results: Any = ctx.Queue()
    child = ctx.Process(target=_child, args=(port, ca, frame_sets, seconds, results))
    child.start()
    rate = float(results.get())
    child.join()
    return rate


def join(port: int, group: str) -> tuple[str, int, str]:
    with WireClient("127.0.0.1", port) as c:
        member = ""
        while True:
            j = c.call(ApiKey.JoinGroup, 9, JoinGroupRequest(
                group_id=group, session_timeout_ms=300000, rebalance_timeout_ms=60000, member_id=member,
                protocol_type="consumer", protocols=[JoinGroupRequest.Protocol(name="range", metadata=b"\0\0")]))
            member = j.member_id
            if j.error_code != 79:
                break
        s = c.call(ApiKey.SyncGroup, 5, SyncGroupRequest(
            group_id=group, generation_id=j.generation_id, member_id=member, protocol_type="consumer",
            protocol_name="range", assignments=[SyncGroupRequest.Assignment(member_id=member, assignment=b"")]))
        assert s.error_code == 0, s
        return group, j.generation_id, member


def main() -> None:
    import trustme

    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kcoord-bench-security-"))
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "ca.pem"))
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(tmp / "broker.pem"))
    plain, secure = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secure}"
    broker = Broker(port=plain, listeners=listeners, advertised_listeners=listeners,
                    ssl_keystore_location=str(tmp / "broker.pem"), sasl_bootstrap_users="bench:bench-secret")
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
        admin.create_topics([NewTopic("bench", 4, 1)])["bench"].result(10)
        members = [join(plain, f"bench-members-{i}") for i in range(CONNECTIONS)]
        commits = [commit_frames(i) for i in range(CONNECTIONS)]
        heartbeats = [heartbeat_frames(m) for m in members]
        cases = {("OffsetCommit", "PLAINTEXT"): (plain, None, commits),
                 ("OffsetCommit", "SASL_SSL"): (secure, str(tmp / "ca.pem"), commits),
                 ("Heartbeat", "PLAINTEXT"): (plain, None, heartbeats),
                 ("Heartbeat", "SASL_SSL"): (secure, str(tmp / "ca.pem"), heartbeats)}
        runs: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
        print(f"{CONNECTIONS} connections x {IN_FLIGHT} in flight, {args.seconds:g} s per case", flush=True)
        for r in range(args.rounds):
            for case, (port, cafile, frames) in cases.items():
                rate = run_case(port, cafile, frames, args.seconds)
                runs[case].append(rate)
                print(f"round {r + 1}  {case[0]:12} {case[1]:10} {rate:9,.0f} req/s", flush=True)
        print("medians:")
        for api in ("OffsetCommit", "Heartbeat"):
            base = statistics.median(runs[(api, "PLAINTEXT")])
            sec = statistics.median(runs[(api, "SASL_SSL")])
            print(f"  {api:12} PLAINTEXT {base:9,.0f} req/s   SASL_SSL {sec:9,.0f} req/s   "
                  f"SASL_SSL/PLAINTEXT {sec / base:.0%}", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
