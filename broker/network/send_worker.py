"""The send worker: a process of a node's own that writes answers to the node's client sockets.

A small answer to a client on this host costs the event loop ~20 µs inside ``write``: on loopback
the kernel runs the whole TCP receive path of the peer in the writer's system call. At 10,000
consumers heartbeating every second that was half of the loop's kernel time and a fifth of its
wall time, on the one core the loop has (perf). Written here, that work runs on another core. The
event loop hands answers over when it is busy (``broker.network.send_process``); an idle broker
still writes its own, one hop shorter.

Standard library only, and nothing of the broker imported: the process starts in a few
milliseconds and holds little memory. It reads three descriptors given on its command line:

- ``opens`` (a Unix stream socket): one 4-byte connection id per client connection, with a
  duplicate of its socket attached (SCM_RIGHTS), sent before anything is written for it;
- ``orders`` (a pipe): ``W`` id length bytes (write these), ``C`` id 0 (close once written);
- ``events`` (a pipe back to the event loop): ``A`` n (the first n orders are done: written in full,
  or held for a connection already reported full), ``S`` id (its socket is full: the answers are
  held here, and the loop hands over no more until ``D``), ``D`` id (what was held is written, or
  dropped because the socket failed).

Each connection's answers leave in the order they were handed over. A socket that fails (the
client went away) has its answers dropped; the event loop sees the end of the connection when it
reads. The worker ends at the end of ``orders`` (the broker stopping), or when it cannot go on, in
which case the event loop sees ``events`` end and closes every client connection.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import socket
import struct
import sys
import time

ORDER = struct.Struct(">BII")  # kind, connection id, length of the bytes that follow
EVENT = struct.Struct(">BQ")  # kind, count or connection id
WRITE, CLOSE = ord("W"), ord("C")
DONE, FULL, DRAINED = ord("A"), ord("S"), ord("D")
# A closed connection whose client stopped reading: its held answers are given this long.
_CLOSE_GRACE_S = 30.0
_READ_BYTES = 1 << 20


class _Out:
    """A client socket's duplicate, and the answers held for it while it is full."""

    __slots__ = ("fd", "held", "closing", "deadline", "failed")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.held: list[bytes] = []
        self.closing = False
        self.deadline = 0.0
        self.failed = False


class Worker:
    def __init__(self, orders: int, opens: int, events: int) -> None:
        self.orders = orders
        self.opens = socket.socket(fileno=opens)
        self.events = events
        for fd in (orders, events):
            os.set_blocking(fd, False)
        self.opens.setblocking(False)
        self.poll = select.epoll()
        self.poll.register(orders, select.EPOLLIN)
        self.poll.register(opens, select.EPOLLIN)
        self.outs: dict[int, _Out] = {}
        self.by_fd: dict[int, int] = {}
        self.done = 0
        self.told = 0
        self.pending = bytearray()  # orders read, the last one maybe incomplete
        self.said = bytearray()  # events not yet written back
        self.closing: set[int] = set()

    def take_opens(self, wait: bool = False) -> None:
        while True:
            if wait:
                # poll, not select: the socket's descriptor may be past select's 1,024.
                waiting = select.poll()
                waiting.register(self.opens, select.POLLIN)
                waiting.poll()
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.opens, 4, 1)
            except BlockingIOError:
                return
            if not data:
                raise SystemExit(0)  # the broker is gone
            if len(data) < 4:
                data += self.opens.recv(4 - len(data), socket.MSG_WAITALL)
            if not fds:
                # Its descriptor did not arrive (this process' table is full): answers would be lost.
                raise SystemExit("send worker: a client socket arrived without its descriptor")
            (conn_id,) = struct.unpack(">I", data)
            self.outs[conn_id] = _Out(fds[0])
            wait = False

    def out(self, conn_id: int) -> _Out:
        out = self.outs.get(conn_id)
        while out is None:
            # Sent before the first order for it: already queued on the other socket.
            self.take_opens(wait=True)
            out = self.outs.get(conn_id)
        return out

    def say(self, kind: int, value: int) -> None:
        self.said += EVENT.pack(kind, value)

    def write(self, conn_id: int, data: bytes) -> None:
        out = self.out(conn_id)
        if out.failed:
            return
        if out.held:
            out.held.append(data)
            return
        try:
            sent = os.write(out.fd, data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.fail(conn_id, out)
            return
        if sent < len(data):
            out.held.append(data[sent:])
            self.poll.register(out.fd, select.EPOLLOUT)
            self.by_fd[out.fd] = conn_id
            self.say(FULL, conn_id)

    def writable(self, fd: int) -> None:
        conn_id = self.by_fd.get(fd)
        if conn_id is None:
            return
        out = self.outs[conn_id]
        while out.held:
            data = out.held[0]
            try:
                sent = os.write(fd, data)
            except BlockingIOError:
                return
            except OSError:
                self.fail(conn_id, out)
                return
            if sent < len(data):
                out.held[0] = data[sent:]
                return
            out.held.pop(0)
        self.poll.unregister(fd)
        del self.by_fd[fd]
        self.say(DRAINED, conn_id)
        if out.closing:
            self.close(conn_id)

    def fail(self, conn_id: int, out: _Out) -> None:
        out.failed = True
        if out.held:
            out.held.clear()
            self.poll.unregister(out.fd)
            del self.by_fd[out.fd]
            self.say(DRAINED, conn_id)
        if out.closing:
            self.close(conn_id)

    def close(self, conn_id: int) -> None:
        out = self.out(conn_id)
        if out.held:
            out.closing = True
            out.deadline = time.monotonic() + _CLOSE_GRACE_S
            self.closing.add(conn_id)
            return
        self.closing.discard(conn_id)
        del self.outs[conn_id]
        os.close(out.fd)

    def expire(self) -> None:
        now = time.monotonic()
        for conn_id in [c for c in self.closing if self.outs[c].deadline <= now]:
            out = self.outs[conn_id]
            self.fail(conn_id, out)
            if conn_id in self.outs:
                self.close(conn_id)

    def read_orders(self) -> bool:
        """False at the end of the orders (the broker is stopping)."""
        try:
            chunk = os.read(self.orders, _READ_BYTES)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        pending = self.pending
        pending += chunk
        at, end = 0, len(pending)
        head = ORDER.size
        while end - at >= head:
            kind, conn_id, size = ORDER.unpack_from(pending, at)
            if end - at - head < size:
                break
            if kind == WRITE:
                self.write(conn_id, bytes(pending[at + head: at + head + size]))
            elif kind == CLOSE:
                self.close(conn_id)
            else:
                raise SystemExit(f"send worker: unknown order {kind}")
            at += head + size
            self.done += 1
        del pending[:at]
        return True

    def tell(self) -> None:
        if self.done != self.told:
            self.say(DONE, self.done)
            self.told = self.done
        if not self.said:
            return
        try:
            sent = os.write(self.events, self.said)
        except BlockingIOError:
            sent = 0
        except BrokenPipeError:
            raise SystemExit(0) from None  # the broker is gone
        del self.said[:sent]
        if self.said:
            # The event loop is behind: the rest goes when the pipe has room.
            with contextlib.suppress(FileExistsError):
                self.poll.register(self.events, select.EPOLLOUT)

    def run(self) -> None:
        orders, opens, events = self.orders, self.opens.fileno(), self.events
        while True:
            timeout = 1.0 if self.closing else -1
            for fd, _mask in self.poll.poll(timeout):
                if fd == orders:
                    if not self.read_orders():
                        self.finish()
                        return
                elif fd == opens:
                    self.take_opens()
                elif fd == events:
                    self.poll.unregister(events)
                else:
                    self.writable(fd)
            if self.closing:
                self.expire()
            self.tell()

    def finish(self) -> None:
        """The broker is stopping: one last try for what is held, then every socket closed."""
        for out in self.outs.values():
            for data in out.held if not out.failed else ():
                try:
                    if os.write(out.fd, data) < len(data):
                        break
                except OSError:
                    break
            os.close(out.fd)
        self.outs.clear()


def main() -> None:
    orders, opens, events = (int(arg) for arg in sys.argv[1:4])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        # As many client sockets as the broker may hold (it raises its own limit the same way).
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    Worker(orders, opens, events).run()


if __name__ == "__main__":
    main()
