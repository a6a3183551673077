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
from broker.readiness import ReadinessHub
from broker.reply import Reply
from broker.router import CloseConnection, ConnectionInfo, Router

if TYPE_CHECKING:
    from collections.abc import Callable

_RECV_BYTES = 256 * 1024
# Frames at least this large that are not complete in the read buffer are read in place, into a
# buffer the connection keeps unless the frame was larger than the second figure.
_DIRECT_READ_BYTES = 64 * 1024
_KEPT_FRAME_BUFFER_BYTES = 8 * 1024 * 1024
MAX_IN_FLIGHT = 512
_SIZE = struct.Struct(">i")
# Every read lands in this one buffer and is copied out before the reader next yields to trio, so
# all connections can share it. Reading into a fresh 256 KiB object instead costs an allocation of
# that size per request (an mmap/munmap pair in glibc), which showed as page faults and TLB flushes.
_READ_BUFFER = memoryview(bytearray(_RECV_BYTES))


class Connection:
    def __init__(self, stream: trio.SocketStream, router: Router, info: ConnectionInfo,
                 max_request_bytes: int, on_response: Callable[[Reply], None] | None = None,
                 hub: ReadinessHub | None = None) -> None:
        self.stream = stream
        self.router = router
        self.info = info
        self.max_request_bytes = max_request_bytes
        self.on_response = on_response
        self.pending: deque[Reply] = deque()
        self.have_pending = trio.Event()
        self.room = trio.Event()
        self.closing = False
        self.sending = False
        self.fd = stream.socket.fileno()
        self.hub = hub if hub is not None and hub.available else None
        self.more_to_read = False
        self.frame_buffer: bytearray | None = None

    async def run(self) -> None:
        if self.hub is not None:
            self.hub.register(self.fd)
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
            if self.hub is not None:
                self.hub.unregister(self.fd)
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
                frame: bytes | memoryview
                if len(buf) >= 4 + size:
                    with memoryview(buf) as view:
                        frame = bytes(view[4 : 4 + size])
                    del buf[: 4 + size]
                elif size >= _DIRECT_READ_BYTES:
                    try:
                        large = await self._read_frame(buf, size)
                    except (trio.BrokenResourceError, ConnectionError, OSError):
                        return
                    if large is None:
                        return
                    frame = large
                else:
                    break
                try:
                    reply = self.router.dispatch(frame, self.info)
                except CloseConnection as exc:
                    self._bad(str(exc), "bad_request")
                    return
                if not self.pending and not self.sending and reply.data is not None:
                    # Answered on the spot with nothing queued ahead of it (a heartbeat, a
                    # metadata request): write it now rather than waking the writer for it.
                    if not self._write_now(reply):
                        return
                    continue
                self.pending.append(reply)
                self.have_pending.set()
                while len(self.pending) >= MAX_IN_FLIGHT:
                    self.room = trio.Event()
                    await self.room.wait()

    async def _receive(self) -> memoryview:
        return _READ_BUFFER[: await self._receive_into(_READ_BUFFER)]

    async def _read_frame(self, buf: bytearray, size: int) -> memoryview | None:
        """The rest of a large frame, read straight into a buffer kept for this connection: a
        1 MiB produce request is then copied once, by the kernel, rather than at every step of
        reassembly, and no fresh megabyte is allocated (and faulted in) per request. The view is
        valid until the next large frame; decoding copies what it keeps. ``buf`` holds the
        frame's start (after its size prefix) and is emptied. None if the client closes first."""
        if self.frame_buffer is None or len(self.frame_buffer) < size:
            self.frame_buffer = bytearray(size)
        frame = memoryview(self.frame_buffer)[:size]
        have = len(buf) - 4
        frame[:have] = memoryview(buf)[4:]
        buf.clear()
        while have < size:
            n = await self._receive_into(frame[have:])
            if n == 0:
                return None
            METRICS.bytes_in.inc(n)
            have += n
        if size > _KEPT_FRAME_BUFFER_BYTES:
            self.frame_buffer = None
        return frame

    async def _receive_into(self, view: memoryview) -> int:
        """Waits for the socket to be readable, then reads into ``view``. Clients mostly send one
        request and wait for its answer, so reading first (as a generic stream does) would
        usually find nothing and cost a wasted system call per request."""
        hub = self.hub
        while True:
            if hub is None:
                await trio.lowlevel.wait_readable(self.fd)
            elif self.more_to_read:
                # A read that filled its buffer may have left data behind, and with edge-triggered
                # readiness no new edge announces data that was already there.
                await trio.lowlevel.checkpoint()
            else:
                await hub.wait_readable(self.fd)
            try:
                n = os.readv(self.fd, (view,))
            except BlockingIOError:
                self.more_to_read = False
                continue
            self.more_to_read = n == len(view)
            return n

    def _bad(self, reason: str, kind: str) -> None:
        METRICS.connections_closed_bad.labels(kind).inc()
        logs.warn("connection.closed", reason=reason, client=f"{self.info.client_host}:{self.info.client_port}",
                  conn=self.info.conn_id)

    def _write_now(self, reply: Reply) -> bool:
        """Writes a ready reply straight to the socket; what does not fit goes to the writer.
        False if the connection is broken."""
        assert reply.data is not None
        data = reply.data
        sent = 0
        if data:
            try:
                sent = self._write_some(data)
            except trio.BrokenResourceError:
                return False
            METRICS.bytes_out.inc(sent)
        if sent < len(data):
            reply.data = data[sent:]
            self.pending.append(reply)
            self.have_pending.set()
        elif self.on_response is not None:
            self.on_response(reply)
        return True

    def _write_some(self, data: bytes) -> int:
        """As much of ``data`` as the non-blocking socket takes now (0 when it is full)."""
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def _send(self, data: bytes) -> None:
        """Writes straight to the non-blocking socket when it has room (the common case), and
        lets trio wait for writability only for what does not fit. Only the writer task sends
        while ``sending`` is set; the reader writes a reply itself only when nothing is queued
        or being sent, so replies never interleave."""
        sent = self._write_some(data)
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
                self.sending = True
                await self._send(data)
                self.sending = False
                METRICS.bytes_out.inc(len(data))
            if self.closing and not self.pending:
                scope.cancel()
                return
