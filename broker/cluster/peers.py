"""Requests from one kcoord node to another, over the Kafka protocol: the transaction coordinator
has partition owners write transaction markers (WriteTxnMarkers), and a partition owner asks a
transactional producer's coordinator whether a partition is in its transaction (AddPartitionsToTxn
v4, verify only; KIP-890). Kafka's brokers send each other the same requests.

One connection per node, to the address it registered in etcd (its first listener), requests
pipelined on it and answered in order. A request that fails (no such node, no connection, no
answer in time) answers None: the caller retries, finding the owner again.

**Only nodes.** WriteTxnMarkers and AddPartitionsToTxn v4+ are served to other nodes only. The nodes
share a secret that clients never see: it is created once in etcd (``<prefix>/secrets/peers``,
read by every node at start) and each node sends, as its client id, its node id and an HMAC of it
under that secret. A request whose client id does not carry a valid one is refused.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import os
import socket
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, EtcdError
from broker.cluster.node import ClusterNode
from broker.observability import logs
from protocol.errors import DecodeError
from protocol.frames import RequestHeader, frame_request
from protocol.messages import REQUESTS, RESPONSES

REQUEST_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 2.0
SECRET_RETRY_S = 0.5
CLIENT_ID_PREFIX = "kcoord-node-"


class PeerError(Exception):
    """The other node could not be reached or did not answer in time."""


class PeerSecret:
    """The secret the nodes share, and the client ids made and checked with it."""

    def __init__(self) -> None:
        self.secret: bytes | None = None

    async def load(self, client: EtcdClient, prefix: str) -> None:
        """Reads the secret from etcd, creating it if no node has yet; retries until etcd answers."""
        key = prefix.rstrip("/") + "/secrets/peers"
        while self.secret is None:
            try:
                await client.create_if_absent(key, base64.b64encode(os.urandom(32)), 0)
                kvs, _revision = await client.get_prefix(key)
                for kv in kvs:
                    if kv.key == key:
                        self.secret = base64.b64decode(kv.value)
            except (EtcdError, ValueError) as exc:
                logs.warn("cluster.peer_secret_unavailable", error=str(exc)[:200])
                await trio.sleep(SECRET_RETRY_S)

    def _mac(self, node_id: int) -> str:
        assert self.secret is not None
        return hmac.new(self.secret, f"node-{node_id}".encode(), hashlib.sha256).hexdigest()[:32]

    def client_id(self, node_id: int) -> str:
        return f"{CLIENT_ID_PREFIX}{node_id}/{self._mac(node_id)}"

    def is_peer(self, client_id: str | None) -> bool:
        """The request comes from a node of this cluster."""
        if self.secret is None or not client_id or not client_id.startswith(CLIENT_ID_PREFIX):
            return False
        node, _, mac = client_id[len(CLIENT_ID_PREFIX):].partition("/")
        if not node.isdigit():
            return False
        return hmac.compare_digest(mac, self._mac(int(node)))


class _Connection:
    """One pipelined connection to a node; answers come back in the order requests went out."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.send_lock = trio.Lock()
        self.pending: deque[tuple[int, int, int, Callable[[Any | None], None]]] = deque()
        self.closed = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        pending, self.pending = self.pending, deque()
        for _corr, _key, _version, answer in pending:
            answer(None)
        self.stream.socket.close()

    async def read_forever(self) -> None:
        buf = bytearray()
        try:
            while True:
                while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf, 0)[0]:
                    chunk = await self.stream.receive_some(1 << 16)
                    if not chunk:
                        raise PeerError("connection closed")
                    buf += chunk
                (size,) = struct.unpack_from(">i", buf, 0)
                frame = bytes(buf[4:4 + size])
                del buf[:4 + size]
                if not self.pending:
                    raise PeerError("an answer nobody asked for")
                corr, api_key, version, answer = self.pending.popleft()
                if struct.unpack_from(">i", frame, 0)[0] != corr:
                    raise PeerError("answers out of order")
                response = RESPONSES[api_key]
                pos = 5 if response.is_flexible(version) else 4
                answer(response.decode(frame[pos:], version))
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, PeerError, DecodeError) as exc:
            if not self.closed:
                logs.debug("cluster.peer_connection_closed", error=repr(exc)[:200])
        finally:
            self.close()


class PeerClient:
    def __init__(self, cluster: ClusterNode, secret: PeerSecret) -> None:
        self.cluster = cluster
        self.secret = secret
        self.nursery: trio.Nursery | None = None
        self.connections: dict[tuple[int, str, int], _Connection] = {}
        self.connecting: dict[tuple[int, str, int], trio.Lock] = {}
        self._correlation = itertools.count(1)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def send(self, node_id: int, api_key: int, version: int, body: Any,
             on_answer: Callable[[Any | None], None]) -> None:
        """Sends ``body`` to ``node_id``; ``on_answer(response)``, or ``on_answer(None)`` when it
        could not be sent or was not answered in ``REQUEST_TIMEOUT_S``."""
        if self.nursery is None or self.secret.secret is None:
            on_answer(None)
            return
        self.nursery.start_soon(self._call, node_id, api_key, version, body, on_answer)

    async def _call(self, node_id: int, api_key: int, version: int, body: Any,
                    on_answer: Callable[[Any | None], None]) -> None:
        # The first answer counts (a connection that fails after answering calls again: dropped).
        sender, receiver = trio.open_memory_channel[Any](1)

        def answer(response: Any | None) -> None:
            with contextlib.suppress(trio.WouldBlock):
                sender.send_nowait(response)

        answered, result = False, None
        conn: _Connection | None = None
        try:
            with trio.move_on_after(REQUEST_TIMEOUT_S):
                conn = await self._connection(node_id)
                corr = next(self._correlation) & 0x7FFFFFFF
                request = REQUESTS[api_key]
                header = RequestHeader(api_key, version, corr, self.secret.client_id(self.cluster.node_id))
                data = frame_request(header, request.encode(body, version), request.is_flexible(version))
                async with conn.send_lock:
                    conn.pending.append((corr, api_key, version, answer))
                    await conn.stream.send_all(data)
                result = await receiver.receive()
                answered = True
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, PeerError) as exc:
            logs.debug("cluster.peer_request_failed", node=node_id, api_key=api_key, error=repr(exc)[:200])
        if not answered and conn is not None:
            conn.close()  # no answer in time: what follows on it would be out of step
        try:
            on_answer(result)
        except Exception:
            # What the answer set going failed; the other requests between the nodes go on.
            logs.event("cluster.peer_answer_failed", 40, exc_info=True, node=node_id, api_key=api_key)

    async def _connection(self, node_id: int) -> _Connection:
        address = self.cluster.nodes.get(node_id)
        if address is None:
            raise PeerError(f"node {node_id} is not registered")
        key = (node_id, *address)
        lock = self.connecting.setdefault(key, trio.Lock())
        async with lock:
            conn = self.connections.get(key)
            if conn is not None and not conn.closed:
                return conn
            with trio.fail_after(CONNECT_TIMEOUT_S):
                stream = await trio.open_tcp_stream(*address)
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(stream)
            self.connections[key] = conn
            assert self.nursery is not None
            self.nursery.start_soon(conn.read_forever)
            return conn
