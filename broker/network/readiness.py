"""Read readiness for every client socket from one edge-triggered epoll set, served by callbacks.

trio's own ``wait_readable`` arms a one-shot registration per wait: one ``epoll_ctl`` system call
per request on top of the read and the write, about a third of the I/O cost of a small request.
Here each socket is registered once, edge-triggered, in an epoll set of our own; one task waits for
that set to become readable (through trio, so it is just another file descriptor to the event loop)
and calls the reader of every socket that received data, in place. Under load one wake-up serves
many sockets.

Readers are plain callbacks, not tasks parked in a wait: a connection that is idle between two
requests (a consumer heartbeats every few seconds) then holds no coroutine chain, wait closure or
other per-wait object. With thousands of connections such objects, each living as long as the gap
between two requests, were what the cyclic garbage collector kept promoting to its oldest
generation, and full collections over that heap paused the whole broker. Waking a task per request
also cost a trip through the scheduler that a direct call does not.

Edge-triggered means a socket is reported when data arrives, not while data is waiting, so a reader
must read until it has drained the socket: a read that returns less than it asked for has emptied
it, anything arriving later is a new edge. A reader that stops early (to be fair to the others, or
because its connection has too many requests in flight) says so: it returns True to be called again
after the other tasks have had a turn, or its connection resumes reading by itself later.
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from broker.observability import logs

if TYPE_CHECKING:
    from broker.network.send_process import SendProcess

_IN = getattr(select, "EPOLLIN", 0x001)
_ET = getattr(select, "EPOLLET", 1 << 31)
_HUP = getattr(select, "EPOLLRDHUP", 0x2000)
# Sockets served per wake-up before the other tasks get a turn; more stay queued in the epoll set.
_EVENTS_PER_ROUND = 256

def _nothing() -> None:
    pass


# Called when its socket may have data; True means "not drained yet, call me again soon".
Reader = Callable[[], bool]


class ReadinessHub:
    """Shared by all connections of one broker; ``run`` is a task in the listener's nursery.

    ``after_round`` is called once the readers woken together have run, so that the writes they
    queued start together (one group commit for the requests of many connections);
    ``before_round`` before they run, with nothing awaited between the two."""

    def __init__(self, after_round: Callable[[], None] | None = None,
                 before_round: Callable[[], None] | None = None) -> None:
        self.epoll: Any = select.epoll() if hasattr(select, "epoll") else None
        self.readers: dict[int, Reader] = {}
        # Writes the answers of busy rounds (set by the server when it starts one).
        self.sender: SendProcess | None = None
        self.after_round = after_round
        self.before_round = before_round

    @property
    def available(self) -> bool:
        return self.epoll is not None

    def register(self, fd: int, reader: Reader) -> None:
        """Adds a socket. Data that arrived before this raised no edge the set will report: the
        caller reads once itself after registering."""
        self.readers[fd] = reader
        self.epoll.register(fd, _IN | _HUP | _ET)

    def unregister(self, fd: int) -> None:
        """Must come before the socket is closed: the number may be reused by the next accept."""
        self.readers.pop(fd, None)
        with contextlib.suppress(OSError, ValueError):
            self.epoll.unregister(fd)

    def _call(self, fd: int) -> bool:
        reader = self.readers.get(fd)
        if reader is None:
            return False  # unregistered since the set reported it
        try:
            return reader()
        except Exception:
            # A reader handles its own connection's errors; one that escapes is a bug, and it must
            # not stop every other connection from being read.
            logs.event("connection.reader_failed", 40, exc_info=True, fd=fd)
            return False

    def _round_done(self) -> None:
        if self.sender is not None:
            self.sender.round_ends()  # before: what ``after_round`` completes is written at once
        if self.after_round is not None:
            self.after_round()

    async def run(self) -> None:
        epoll = self.epoll
        call = self._call
        before = self.before_round or _nothing
        sender = self.sender
        try:
            while True:
                await trio.lowlevel.wait_readable(epoll.fileno())
                before()
                events = epoll.poll(0, _EVENTS_PER_ROUND)
                if sender is not None:
                    sender.round_starts(len(events))
                again = [fd for fd, _events in events if call(fd)]
                self._round_done()
                while again:
                    await trio.lowlevel.checkpoint()
                    before()
                    if sender is not None:
                        sender.round_starts(len(again))
                    again = [fd for fd in again if call(fd)]
                    self._round_done()
        finally:
            epoll.close()
