"""The event loop's side of the send worker (``broker.network.send_worker``): which answers go to
it, in what order, and what the loop learns back.

A readiness round that serves at least ``min_round`` connections (the loop is behind: under load
rounds fill up, idle they hold one or two) hands the answers its readers complete to the worker
instead of writing them: each is framed into one buffer, and the buffer goes to the worker in one
pipe write per KiB or at the end of the round. Outside such rounds a connection writes its own
answers, unless some it handed over are not done yet (``acked``): then the rest follow the same
way, so that they cannot overtake. For the same reason a connection lends nothing to a sync thread
while the worker holds answers of its (``Connection.lend``).

A socket that is full holds its answers in the worker, which says so (``S``): the connection then
keeps its next answers queued, as if a write of its own had stopped short, so that requests stop
being read once too many wait (``MAX_IN_FLIGHT``), until the worker has written what it held
(``D``). If the worker ends, every client connection is closed (answers it held are lost, and the
clients' retries find a broker that writes its own)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from broker.network.send_worker import CLOSE, DONE, DRAINED, EVENT, FULL, ORDER, WRITE
from broker.observability import logs
from broker.observability.metrics import METRICS

if TYPE_CHECKING:
    from collections.abc import Callable

# Handed-over answers buffered before they go to the worker within a round.
_FLUSH_BYTES = 1024
_PIPE_BYTES = 1 << 20
_STUCK_S = 5.0
_NEVER = 1 << 62
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_ROOT = Path(__file__).resolve().parents[2]
ANSWERS = METRICS.send_worker_answers


class Sending(Protocol):
    """A connection whose answers the worker may write."""

    conn_id: int
    # The number of the last order given for it (0: none).
    sent_order: int

    def worker_full(self) -> None:
        """Its socket is full: hand over nothing more until ``worker_drained``."""

    def worker_drained(self) -> None:
        """The worker wrote (or dropped) what it held: answers may go again."""


class SendProcess:
    def __init__(self, min_round: int, on_lost: Callable[[str], None] | None = None,
                 stuck_s: float = _STUCK_S) -> None:
        """``stuck_s``: how long the loop waits for a worker that reads no answers before it gives
        up on it."""
        self.min_round = min_round
        self.stuck_s = stuck_s
        self.on_lost = on_lost
        orders_r, self.orders = os.pipe()
        self.events, events_w = os.pipe()
        self.opens, child_opens = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for fd in (self.orders, events_w):
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_BYTES)
        os.set_blocking(self.events, False)
        os.set_blocking(self.orders, False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker.network.send_worker", str(orders_r), str(child_opens.fileno()),
             str(events_w)],
            pass_fds=(orders_r, child_opens.fileno(), events_w), cwd=_ROOT)
        for fd in (orders_r, events_w):
            os.close(fd)
        child_opens.close()
        # A worker that takes no sockets for this long is given up too (``open``).
        self.opens.settimeout(stuck_s)
        self.out = bytearray()
        self.given = 0  # orders given
        self.acked = 0  # orders the worker has done
        # The last readiness round served at least ``min_round`` connections: answers go to the
        # worker (and none is lent to a sync thread) until a smaller round says the loop caught up.
        # In such a round (``busy``) the answers handed over are buffered until the round ends
        # (``round_starts``, ``round_ends``).
        self.loaded = False
        self.busy = False
        self.alive = True
        self.conns: dict[int, Sending] = {}
        self._events = bytearray()
        logs.event("send_worker.started", pid=self.proc.pid, min_round=min_round)

    def open(self, conn: Sending, fd: int) -> bool:
        """Gives the worker a duplicate of the connection's socket; False once the worker is gone."""
        if not self.alive:
            return False
        try:
            socket.send_fds(self.opens, [conn.conn_id.to_bytes(4, "big")], [fd])
        except OSError as exc:
            self._lost(f"it took no socket ({exc or 'timed out'})")
            return False
        self.conns[conn.conn_id] = conn
        return True

    def takes(self, conn: Sending) -> bool:
        """Whether ``conn``'s next answer goes to the worker."""
        return self.loaded or conn.sent_order > self.acked

    def lends(self, conn: Sending) -> bool:
        """Whether a sync thread may write ``conn``'s answer: nothing of its is with the worker (it
        could be overtaken), and the loop is not loaded (the sync thread's writes would then wait for
        the interpreter lock, each one, while the worker writes without it)."""
        return conn.sent_order <= self.acked and not self.loaded

    def write(self, conn: Sending, data: bytes | memoryview) -> None:
        out = self.out
        out += ORDER.pack(WRITE, conn.conn_id, len(data))
        out += data
        self.given += 1
        conn.sent_order = self.given
        ANSWERS.value += 1
        if not self.busy or len(out) >= _FLUSH_BYTES:
            self.flush()

    def close(self, conn: Sending) -> None:
        """The connection is over: the worker closes its duplicate once it wrote what it holds."""
        if self.conns.pop(conn.conn_id, None) is None or not self.alive:
            return
        self.out += ORDER.pack(CLOSE, conn.conn_id, 0)
        self.given += 1
        self.flush()

    def round_starts(self, size: int) -> None:
        """A readiness round serving ``size`` connections begins: one of ``min_round`` or more
        says the loop is behind, and its answers go to the worker, buffered until it ends."""
        self.busy = self.loaded = size >= self.min_round

    def round_ends(self) -> None:
        """The round's answers go to the worker now, before whatever the round completes is
        answered (that is written at once)."""
        self.busy = False
        if self.out:
            self.flush()

    def flush(self) -> None:
        if not self.out or not self.alive:
            self.out.clear()
            return
        data = bytes(self.out)
        self.out.clear()
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[os.write(self.orders, view):]
                except BlockingIOError:
                    # The pipe's megabyte is full: the worker is behind, the loop waits for it (it
                    # never waits on anything but its sockets, which it writes without blocking).
                    # One that reads nothing for this long is stuck: better to write our own.
                    # poll, not select: the pipe's descriptor may be past select's 1,024.
                    waiting = select.poll()
                    waiting.register(self.orders, select.POLLOUT)
                    if not waiting.poll(self.stuck_s * 1000):
                        self._lost(f"it read no answers for {self.stuck_s:g} s")
                        return
        except OSError:
            self._lost("its pipe closed")

    async def run(self) -> None:
        """Reads what the worker tells; ends when the worker does."""
        try:
            while self.alive:
                await trio.lowlevel.wait_readable(self.events)
                try:
                    chunk = os.read(self.events, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._lost(f"it exited ({self.proc.poll()})")
                    return
                self._told(chunk)
        finally:
            with contextlib.suppress(OSError):
                os.close(self.events)

    def _told(self, chunk: bytes) -> None:
        events = self._events
        events += chunk
        size = EVENT.size
        whole = len(events) - len(events) % size
        for at in range(0, whole, size):
            kind, value = EVENT.unpack_from(events, at)
            if kind == DONE:
                self.acked = value
            elif kind == FULL:
                conn = self.conns.get(value)
                if conn is not None:
                    conn.worker_full()
            elif kind == DRAINED:
                conn = self.conns.get(value)
                if conn is not None:
                    conn.worker_drained()
        del events[:whole]

    def _lost(self, why: str) -> None:
        if not self.alive:
            return
        # Nothing more is done: every connection writes its own answers again (those that waited
        # on the worker are closed just below).
        self._retire()
        logs.event("send_worker.lost", 40, reason=why, pid=self.proc.pid)
        conns = list(self.conns.values())
        self.conns.clear()
        for conn in conns:
            conn.worker_drained()
        if self.on_lost is not None:
            self.on_lost(f"the send worker stopped: {why}")

    def _retire(self) -> None:
        """No more answers go to the worker: no round is large enough, none waits for it."""
        self.alive = False
        self.busy = self.loaded = False
        self.min_round = _NEVER
        self.acked = self.given = _NEVER

    def stop(self) -> None:
        """The broker stops: the worker writes what it holds, closes its sockets and exits."""
        if self.alive:
            self.flush()
        self._retire()  # anything answered after this is written by the loop
        with contextlib.suppress(OSError):
            os.close(self.orders)
        self.opens.close()
        try:
            self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
