"""One client connection: a reader that frames and dispatches requests as they arrive, and a
writer that sends their responses in arrival order, coalescing whatever is ready into one send."""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import TYPE_CHECKING

import trio

from broker import logs
from broker.metrics import METRICS
from broker.reply import Reply
from broker.router import CloseConnection, ConnectionInfo, Router

if TYPE_CHECKING:
    from collections.abc import Callable

_RECV_BYTES = 256 * 1024
MAX_IN_FLIGHT = 512
_SIZE = struct.Struct(">i")


class Connection:
    def __init__(self, stream: trio.SocketStream, router: Router, info: ConnectionInfo,
                 max_request_bytes: int, on_response: Callable[[Reply], None] | None = None) -> None:
        self.stream = stream
        self.router = router
        self.info = info
        self.max_request_bytes = max_request_bytes
        self.on_response = on_response
        self.pending: deque[Reply] = deque()
        self.have_pending = trio.Event()
        self.room = trio.Event()
        self.closing = False
        self.fd = stream.socket.fileno()

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, nursery.cancel_scope)
                await self._reader()
                # Reader finished (EOF or bad request): let the writer drain what is owed, then stop.
                self.closing = True
                self.have_pending.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        finally:
            with trio.CancelScope(shield=True):
                await self.stream.aclose()

    async def _reader(self) -> None:
        buf = bytearray()
        while True:
            try:
                data = await self._receive()
            except (trio.BrokenResourceError, ConnectionError, OSError):
                return
            if not data:
                return
            METRICS.bytes_in.inc(len(data))
            buf += data
            while len(buf) >= 4:
                (size,) = _SIZE.unpack_from(buf, 0)
                if size < 0 or size > self.max_request_bytes:
                    self._bad(f"frame size {size} outside 0..{self.max_request_bytes}", "frame_size")
                    return
                if len(buf) < 4 + size:
                    break
                frame = bytes(buf[4 : 4 + size])
                del buf[: 4 + size]
                try:
                    reply = self.router.dispatch(frame, self.info)
                except CloseConnection as exc:
                    self._bad(str(exc), "bad_request")
                    return
                self.pending.append(reply)
                self.have_pending.set()
                while len(self.pending) >= MAX_IN_FLIGHT:
                    self.room = trio.Event()
                    await self.room.wait()

    async def _receive(self) -> bytes:
        """Waits for the socket to be readable, then reads. Clients mostly send one request and
        wait for its answer, so reading first (as a generic stream does) would usually find
        nothing and cost a wasted system call per request."""
        await trio.lowlevel.wait_readable(self.fd)
        try:
            return os.read(self.fd, _RECV_BYTES)
        except BlockingIOError:
            return await self.stream.receive_some(_RECV_BYTES)

    def _bad(self, reason: str, kind: str) -> None:
        METRICS.connections_closed_bad.labels(kind).inc()
        logs.warn("connection.closed", reason=reason, client=f"{self.info.client_host}:{self.info.client_port}",
                  conn=self.info.conn_id)

    async def _send(self, data: bytes) -> None:
        """Writes straight to the non-blocking socket when it has room (the common case), and
        lets trio wait for writability only for what does not fit. This connection has a single
        writer task, so nothing else sends on the socket concurrently."""
        try:
            sent = os.write(self.fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        if sent < len(data):
            await self.stream.send_all(memoryview(data)[sent:])

    async def _writer(self, scope: trio.CancelScope) -> None:
        out: list[bytes] = []
        while True:
            if not self.pending:
                if self.closing:
                    scope.cancel()
                    return
                self.have_pending = trio.Event()
                await self.have_pending.wait()
                continue
            head = self.pending[0]
            if not head.ready:
                await head.wait()
            # Send every filled slot at the head of the queue in one go.
            while self.pending and self.pending[0].ready:
                reply = self.pending.popleft()
                if reply.close:
                    self.closing = True
                    self.pending.clear()
                    break
                if reply.data:
                    out.append(reply.data)
                if self.on_response is not None:
                    self.on_response(reply)
            if len(self.pending) < MAX_IN_FLIGHT:
                self.room.set()
            if out:
                data = b"".join(out) if len(out) > 1 else out[0]
                out.clear()
                await self._send(data)
                METRICS.bytes_out.inc(len(data))
            if self.closing and not self.pending:
                scope.cancel()
                return
