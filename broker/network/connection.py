"""One client connection: a reader that frames and dispatches requests as they arrive, and a
writer that sends their responses in arrival order, coalescing whatever is ready into one send.

The reader is a callback of the shared readiness set (broker/network/readiness.py): it runs when
the socket has data, reads until it is drained and dispatches every complete frame, all without a
task switch. The connection's one task only writes what could not be written on the spot, resumes
reading after back-pressure, and closes the connection. The one reply a connection owes may also be
written by the sync thread that makes its records durable (``lend``), right after the fdatasync.
Where epoll is missing, a second task waits for readability through trio and calls the same
reader."""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import TYPE_CHECKING

import trio

from broker.network.readiness import ReadinessHub
from broker.network.reply import Reply, error_code_of
from broker.network.router import CloseConnection, ConnectionInfo, Router
from broker.network.send_process import SendProcess
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
# Reading also stops while the requests waiting for their answers add up to this many bytes: a
# producer pipelining 1 MB batches faster than the log makes them durable would otherwise have up
# to MAX_IN_FLIGHT of them in memory at once (500 MB produced under CPU contention left RSS up to
# 80 MB higher). 16 MiB cost ~10 % of produce throughput with the durable default (the producer
# waits on each fsync); 32 MiB costs nothing measurable. Kafka reads one request per connection at
# a time. A request larger than this is still read, alone.
MAX_IN_FLIGHT_BYTES = 32 * 1024 * 1024
# Full reads of one socket in one turn before the other connections get theirs.
_READS_PER_TURN = 4
_SIZE = struct.Struct(">i")
# Every read lands in this one buffer and is copied out before the reader next yields to trio, so
# all connections can share it. Reading into a fresh 256 KiB object instead costs an allocation of
# that size per request (an mmap/munmap pair in glibc), which showed as page faults and TLB flushes.
_READ_BUFFER = memoryview(bytearray(_RECV_BYTES))


async def linger_close(stream: trio.SocketStream, seconds: float = 1.0) -> None:
    """Gives the client up to ``seconds`` to read the answer and close first, discarding what it
    still sends. Closing at once may reset the connection before the answer is read (unread input)
    or, with some clients (kafka-python), report the end of the connection instead of the answer."""
    with trio.move_on_after(seconds):
        try:
            while await stream.receive_some(_RECV_BYTES):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


class Connection:
    # Replies may be written to the socket by the sync thread that makes them durable (``lend``):
    # the plain socket's descriptor takes a write from any thread; a TLS stream does not.
    direct_sends = True

    def __init__(self, stream: trio.SocketStream, router: Router, info: ConnectionInfo,
                 max_request_bytes: int, on_response: Callable[[Reply], None] | None = None,
                 hub: ReadinessHub | None = None, max_unauthenticated_bytes: int | None = None) -> None:
        self.stream = stream
        self.router = router
        self.info = info
        self.max_request_bytes = max_request_bytes
        # Before SASL authentication a frame may be no larger than this (sasl.server.max.receive.size).
        self.max_unauthenticated_bytes = max_request_bytes if max_unauthenticated_bytes is None \
            else min(max_unauthenticated_bytes, max_request_bytes)
        self.on_response = on_response
        self.pending: deque[Reply] = deque()
        # The task sleeps on this; it is set only when the task has something to do that nobody
        # else will: bytes a direct write left over, reading to resume, or a close to carry out.
        self.wake = trio.Event()
        self.unsent: bytes | memoryview = b""
        # No more requests are read; the connection closes once what it owes is sent.
        self.closing = False
        self.sending = False
        self.broken = False
        # MAX_IN_FLIGHT requests, or MAX_IN_FLIGHT_BYTES of them, are waiting for their answers:
        # reading stops until some leave.
        self.paused = False
        self.pending_bytes = 0
        self.fd = stream.socket.fileno()
        self.hub = hub if hub is not None and hub.available else None
        # Bytes read and not yet dispatched (the start of a frame, or frames read while paused).
        self.buf = bytearray()
        # A large frame being read in place, and how much of it has arrived.
        self.large: memoryview | None = None
        self.large_have = 0
        self.frame_buffer: bytearray | None = None
        self._resumed: trio.Event | None = None
        # The last answer must reach a client that may still be sending (a failed authentication):
        # closing with its bytes unread would reset the connection and lose the answer.
        self.linger = False
        # A quota throttled the client: nothing is read until trio.current_time() reaches this
        # (Kafka mutes the channel for the throttle time; replies still leave).
        self.muted = False
        self.muted_until = 0.0
        # Responses wait until then (a throttled client older than KIP-219).
        self.held_until = 0.0
        # The reply at the head of the queue that a sync thread may be writing (``lend``), and
        # what the closing task waits on until it is returned.
        self.lent: Reply | None = None
        self._lend_over: trio.Event | None = None
        # The send worker, when the readiness set has one (``broker.network.send_process``): the
        # number of the last answer handed to it, and whether the socket it writes to is full.
        self.conn_id = info.conn_id
        self.sent_order = 0
        self.worker_is_full = False
        self.worker: SendProcess | None = None
        if self.hub is not None and self.direct_sends and self.hub.sender is not None \
                and self.hub.sender.open(self, self.fd):
            self.worker = self.hub.sender
        info.mute = self._mute
        if self.direct_sends:
            info.sender = self

    async def run(self) -> None:
        try:
            if self.hub is not None:
                self.hub.register(self.fd, self._readable)
                await self._read_on_task()  # what arrived before the registration raised no edge
                await self._writer()
            else:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._poll_reads)
                    await self._writer()
                    nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            # The client went away while we wrote. Raised inside the nursery, the error arrives
            # wrapped in an ExceptionGroup, which a plain ``except`` would let through to the
            # server's nursery.
            pass
        finally:
            self.router.connection_closed(self.info)
            # Replies still parked (a join waiting for its rebalance) may be filled after this
            # connection is gone; filling one must never write to the descriptor number, which
            # the next accepted connection may already have.
            self.broken = True
            if self.hub is not None:
                self.hub.unregister(self.fd)
            if self.worker is not None:
                self.worker.close(self)
            with trio.CancelScope(shield=True):
                if self.lent is not None:
                    # A sync thread may still write to this descriptor: closing it now could let
                    # the reply reach the next connection given the same number.
                    self._lend_over = trio.Event()
                    await self._lend_over.wait()
                if self.linger:
                    await linger_close(self.stream)
                await self.stream.aclose()

    # ---- reading ------------------------------------------------------------------------------

    def _readable(self) -> bool:
        """The socket may have data: dispatch what is buffered, then read until the socket is
        drained. True when it stopped after a few full reads and more may be waiting."""
        if self.closing or self.broken or self.paused or self.muted:
            return False
        try:
            if self.buf and self.large is None and not self._process():
                return False  # frames read while paused filled the queue again
            return self._read()
        except Exception:
            # Handlers' failures are answered by the router; anything else is a bug, and it must
            # close this connection rather than leave its client waiting for an answer.
            logs.event("connection.failed", 40, exc_info=True, client=f"{self.info.client_host}:{self.info.client_port}",
                       conn=self.info.conn_id)
            self._stop_reading()
            return False

    def _read(self) -> bool:
        for _ in range(_READS_PER_TURN):
            large = self.large
            view = _READ_BUFFER if large is None else large[self.large_have:]
            try:
                n = os.readv(self.fd, (view,))
            except BlockingIOError:
                return False
            except OSError:
                self._stop_reading()
                return False
            if n == 0:
                self._stop_reading()
                return False
            METRICS.bytes_in.inc(n)
            if large is None:
                self.buf += view[:n]
                if not self._process():
                    return False
            else:
                self.large_have += n
                if self.large_have == len(large):
                    self.large = None
                    if len(large) > _KEPT_FRAME_BUFFER_BYTES:
                        self.frame_buffer = None
                    if not self._dispatch(large):
                        return False
            if n < len(view):
                return False  # drained: whatever comes next raises a new edge
        return True

    def _process(self) -> bool:
        """Dispatches every complete frame in the buffer. False when reading must stop (the
        connection closes, or too many requests are in flight)."""
        buf = self.buf
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf, 0)
            limit = self.max_request_bytes if self.info.authenticated else self.max_unauthenticated_bytes
            if size < 0 or size > limit:
                self._bad(f"frame size {size} outside 0..{limit}", "frame_size")
                return False
            frame: bytes | memoryview
            if len(buf) >= 4 + size:
                with memoryview(buf) as view:
                    frame = bytes(view[4 : 4 + size])
                del buf[: 4 + size]
            elif size >= _DIRECT_READ_BYTES:
                self._start_large(size)
                return True
            else:
                return True
            if not self._dispatch(frame):
                return False
        return True

    def _start_large(self, size: int) -> None:
        """The rest of a large frame is read straight into a buffer kept for this connection: a
        1 MiB produce request is then copied once, by the kernel, rather than at every step of
        reassembly, and no fresh megabyte is allocated (and faulted in) per request. The view is
        valid until the next large frame; decoding copies what it keeps. The buffer holds the
        frame's start (after its size prefix) and is emptied."""
        if self.frame_buffer is None or len(self.frame_buffer) < size:
            self.frame_buffer = bytearray(size)
        large = memoryview(self.frame_buffer)[:size]
        have = len(self.buf) - 4
        large[:have] = memoryview(self.buf)[4:]
        self.buf.clear()
        self.large = large
        self.large_have = have

    def _dispatch(self, frame: bytes | memoryview) -> bool:
        try:
            reply = self.router.dispatch(frame, self.info)
        except CloseConnection as exc:
            self._bad(str(exc), "bad_request")
            return False
        reply.on_ready = self._reply_ready
        reply.request_bytes = len(frame)
        self.pending_bytes += reply.request_bytes
        self.pending.append(reply)
        if self.info.failed_auth is not None:
            # Nothing more is read; the task answers after Kafka's delay, then closes.
            self._stop_reading()
            return False
        if reply.ready:
            # Answered on the spot (a heartbeat, a metadata request): written now if nothing is
            # queued ahead of it.
            self._reply_ready()
        if self.broken:
            return False
        # ``_room()`` written out: this runs for every request.
        if len(self.pending) >= MAX_IN_FLIGHT or self.pending_bytes >= MAX_IN_FLIGHT_BYTES:
            self.paused = True
            return False
        # Throttled by a quota: what is buffered waits (dispatched when reading resumes).
        return not self.muted

    def _room(self) -> bool:
        """Another request may be read: fewer than the limits are waiting for their answers."""
        return len(self.pending) < MAX_IN_FLIGHT and self.pending_bytes < MAX_IN_FLIGHT_BYTES

    def _stop_reading(self) -> None:
        """End of input (EOF, a reset, a bad request): send what is owed, then close."""
        self.closing = True
        self.wake.set()

    async def _read_on_task(self) -> None:
        """Reads from this connection's own task (at the start, or when back-pressure ends), as
        the readiness set would, yielding between turns."""
        while self._readable():
            self.router.after_frames()
            await trio.lowlevel.checkpoint()
        self.router.after_frames()

    async def _poll_reads(self) -> None:
        """Without the shared readiness set: wait for readability through trio, then read."""
        while not (self.closing or self.broken):
            if self.paused or self.muted:
                self._resumed = trio.Event()
                await self._resumed.wait()
                continue
            more = self._readable()
            self.router.after_frames()
            if more:
                await trio.lowlevel.checkpoint()
            elif not (self.closing or self.broken or self.paused or self.muted):
                await trio.lowlevel.wait_readable(self.fd)

    def _mute(self, seconds: float, hold: bool = False) -> None:
        """Reads nothing more for ``seconds`` (with ``hold``, sends nothing either); the task
        resumes afterwards."""
        until = trio.current_time() + seconds
        self.muted_until = max(self.muted_until, until)
        if hold:
            self.held_until = max(self.held_until, until)
        self.muted = True
        self.wake.set()

    async def _resume_reading(self) -> None:
        if self.hub is None:
            if self._resumed is not None:
                self._resumed.set()
        else:
            await self._read_on_task()

    def _bad(self, reason: str, kind: str) -> None:
        METRICS.connections_closed_bad.labels(kind).inc()
        logs.warn("connection.closed", reason=reason, client=f"{self.info.client_host}:{self.info.client_port}",
                  conn=self.info.conn_id)
        self._stop_reading()

    # ---- writing ------------------------------------------------------------------------------

    def _write_some(self, data: bytes | memoryview) -> int:
        """As much of ``data`` as the non-blocking socket takes now (0 when it is full); all of
        it when it goes to the send worker instead."""
        worker = self.worker
        if worker is not None and worker.takes(self):
            worker.write(self, data)
            return len(data)
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc

    async def _send(self, data: bytes | memoryview) -> None:
        """Writes straight to the non-blocking socket when it has room (the common case), and
        lets trio wait for writability only for what does not fit. While the task sends
        (``sending``) or owes leftover bytes (``unsent``), nobody else writes, so replies never
        interleave."""
        sent = self._write_some(data)
        if sent < len(data):
            await self.stream.send_all(memoryview(data)[sent:])

    def _take_ready(self) -> bytes:
        """Pops every filled slot at the head of the queue; their bytes, joined for one send."""
        out: list[bytes] = []
        pending = self.pending
        if self.lent is not None or self.worker_is_full:
            return b""  # a sync thread may be writing the head reply, or the worker holds some
        if self.held_until and trio.current_time() < self.held_until:
            return b""
        while pending and pending[0].ready:
            reply = pending.popleft()
            self.pending_bytes -= reply.request_bytes
            if reply.close:
                self.closing = True
                pending.clear()
                self.pending_bytes = 0
                break
            if reply.data:
                out.append(reply.data)
            if self.on_response is not None:
                self.on_response(reply)
        if self.paused and self._room():
            self.wake.set()  # the task resumes reading
        if not out:
            return b""
        return out[0] if len(out) == 1 else b"".join(out)

    def _reply_ready(self) -> None:
        """A slot was filled. If it heads the queue and the task is not writing, whoever filled
        it (a handler, the end of a durable write) writes the ready replies now: one system call,
        where waking the task would cost a trip through the scheduler."""
        if self.sending or self.unsent or self.broken or self.lent is not None or self.worker_is_full \
                or not self.pending or not self.pending[0].ready:
            return  # the task is busy and takes ready slots when done, or the head still waits
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

    def alone(self, reply: Reply) -> bool:
        """Nothing but ``reply`` is owed (it is the one reply queued, or is about to be)."""
        pending = self.pending
        return not pending or (len(pending) == 1 and pending[0] is reply)

    def lend(self, reply: Reply) -> int | None:
        """The descriptor, for the sync thread that makes ``reply`` durable to write it itself, when
        it may: ``reply`` is the one answer the connection owes (a client with one request in
        flight, whose latency this is for; replies behind it would take a second write where one
        carries them all), nothing is being written, the client is not held back by a quota.
        Nobody else writes until ``returned``."""
        if (self.lent is not None or self.sending or self.unsent or self.broken or not self.pending
                or not self.alone(reply) or (self.held_until and trio.current_time() < self.held_until)
                or self.worker_is_full or (self.worker is not None and not self.worker.lends(self))):
            return None
        self.lent = reply
        return self.fd

    def returned(self, reply: Reply, sent: int, durable: bool, sent_at: float = 0.0) -> None:
        """The sync thread is done with the head reply: it wrote ``sent`` bytes of it (-1: the
        socket failed), after its records were durable (``durable``), or none."""
        self.lent = None
        if self._lend_over is not None:
            self._lend_over.set()
        if sent < 0:
            self.broken = True
            self.wake.set()
            return
        if sent > 0 or (durable and reply.data is None):
            # Sent, it is the answer even if an error was set meanwhile (a shard unloading): the
            # client has it (it is only sent once its records are durable).
            if reply.data is not None and reply.prepared_for is not None:
                reply.error_code = error_code_of(reply.prepared_for)
            reply.data = reply.prepared
        if sent > 0:
            assert reply.data is not None and self.pending and self.pending[0] is reply
            self.pending.popleft()
            self.pending_bytes -= reply.request_bytes
            METRICS.bytes_out.inc(sent)
            reply.sent_at = sent_at
            if self.on_response is not None:
                self.on_response(reply)
            if sent < len(reply.data):
                self.unsent = memoryview(reply.data)[sent:]
                self.wake.set()
                return
            if self.paused and self._room():
                self.wake.set()
        self._reply_ready()
        if self.closing and not self.pending:
            self.wake.set()

    def worker_full(self) -> None:
        self.worker_is_full = True

    def worker_drained(self) -> None:
        self.worker_is_full = False
        self._reply_ready()
        if self.paused and self._room():
            self.wake.set()

    async def _writer(self) -> None:
        while True:
            if self.broken:
                return
            if self.info.failed_auth is not None:
                delay, answer = self.info.failed_auth
                self.info.failed_auth = None
                self.linger = True
                await trio.sleep(delay)
                answer()
                continue
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
            if self.paused and self._room() and not self.closing:
                self.paused = False
                if not self.muted:
                    await self._resume_reading()
                continue
            if self.closing and not self.pending:
                return
            if self.muted and trio.current_time() >= self.muted_until:
                self.muted = False
                if not self.closing:
                    await self._resume_reading()
                continue
            self.wake = trio.Event()
            if self.muted:
                with trio.move_on_at(self.muted_until):
                    await self.wake.wait()
            else:
                await self.wake.wait()
