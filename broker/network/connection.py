"""One client connection: a reader that frames and dispatches requests as they arrive, and a
writer that sends their responses in arrival order, coalescing whatever is ready into one send."""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import TYPE_CHECKING

import trio

from broker.network.readiness import ReadinessHub
from broker.network.reply import Reply
from broker.network.router import CloseConnection, ConnectionInfo, Router
from broker.observability import logs
from broker.observability.metrics import METRICS

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
        # The writer task sleeps on this; it is set only when the writer has something to do
        # that nobody else will: bytes a direct write left over, or a close to carry out.
        self.wake = trio.Event()
        self.unsent: bytes | memoryview = b""
        self.room = trio.Event()
        self.closing = False
        self.sending = False
        self.broken = False
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
                self.wake.set()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        finally:
            # Replies still parked (a join waiting for its rebalance) may be filled after this
            # connection is gone; filling one must never write to the descriptor number, which
            # the next accepted connection may already have.
            self.broken = True
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
                reply.on_ready = self._reply_ready
                self.pending.append(reply)
                if reply.ready:
                    # Answered on the spot (a heartbeat, a metadata request): written now if
                    # nothing is queued ahead of it.
                    self._reply_ready()
                if self.broken:
                    return
                while len(self.pending) >= MAX_IN_FLIGHT:
                    self.router.after_frames()
                    self.room = trio.Event()
                    await self.room.wait()
            # Everything this read carried is dispatched: start the writes they queued together.
            self.router.after_frames()

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

    def _write_some(self, data: bytes | memoryview) -> int:
        """As much of ``data`` as the non-blocking socket takes now (0 when it is full)."""
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def _send(self, data: bytes | memoryview) -> None:
        """Writes straight to the non-blocking socket when it has room (the common case), and
        lets trio wait for writability only for what does not fit. While the writer task sends
        (``sending``) or owes leftover bytes (``unsent``), nobody else writes, so replies never
        interleave."""
        sent = self._write_some(data)
        if sent < len(data):
            await self.stream.send_all(memoryview(data)[sent:])

    def _take_ready(self) -> bytes:
        """Pops every filled slot at the head of the queue; their bytes, joined for one send."""
        out: list[bytes] = []
        pending = self.pending
        while pending and pending[0].ready:
            reply = pending.popleft()
            if reply.close:
                self.closing = True
                pending.clear()
                break
            if reply.data:
                out.append(reply.data)
            if self.on_response is not None:
                self.on_response(reply)
        if len(pending) < MAX_IN_FLIGHT and not self.room.is_set():
            self.room.set()
        if not out:
            return b""
        return out[0] if len(out) == 1 else b"".join(out)

    def _reply_ready(self) -> None:
        """A slot was filled. If it heads the queue and the writer is idle, whoever filled it (a
        handler, the end of a durable write) writes the ready replies now: one system call,
        where waking the writer task would cost a trip through the scheduler."""
        if self.sending or self.unsent or self.broken or not self.pending or not self.pending[0].ready:
            return  # the writer is busy and takes ready slots when done, or the head still waits
        data = self._take_ready()
        if data:
            try:
                sent = self._write_some(data)
            except trio.BrokenResourceError:
                self.broken = True
                self.wake.set()
                return
            METRICS.bytes_out.inc(sent)
            if sent < len(data):
                self.unsent = memoryview(data)[sent:]
                self.wake.set()
                return
        if self.closing and not self.pending:
            self.wake.set()

    async def _writer(self, scope: trio.CancelScope) -> None:
        while True:
            if self.broken:
                scope.cancel()
                return
            data = self.unsent
            if data:
                self.unsent = b""
            else:
                data = self._take_ready()
            if data:
                self.sending = True
                await self._send(data)
                self.sending = False
                METRICS.bytes_out.inc(len(data))
                continue
            if self.closing and not self.pending:
                scope.cancel()
                return
            self.wake = trio.Event()
            await self.wake.wait()
