"""Read readiness for every client socket from one edge-triggered epoll set.

trio's own ``wait_readable`` arms a one-shot registration per wait: one ``epoll_ctl`` system call
per request on top of the read and the write, about a third of the I/O cost of a small request.
Here each socket is registered once, edge-triggered, in an epoll set of our own; one task waits for
that set to become readable (through trio, so it is just another file descriptor to the event loop)
and wakes the connections whose sockets received data. Under load one wake-up serves many sockets.

Edge-triggered means a socket is reported when data arrives, not while data is waiting, so a
connection must read until it has drained the socket before it waits again: a read that returns
less than it asked for has emptied the socket, anything arriving later is a new edge.
"""

from __future__ import annotations

import contextlib
import select
from typing import Any

import trio

_IN = getattr(select, "EPOLLIN", 0x001)
_ET = getattr(select, "EPOLLET", 1 << 31)
_HUP = getattr(select, "EPOLLRDHUP", 0x2000)


class ReadinessHub:
    """Shared by all connections of one broker; ``run`` is a task in the listener's nursery."""

    def __init__(self) -> None:
        self.epoll: Any = select.epoll() if hasattr(select, "epoll") else None
        self.waiting: dict[int, trio.lowlevel.Task] = {}
        self.ready: set[int] = set()

    @property
    def available(self) -> bool:
        return self.epoll is not None

    def register(self, fd: int) -> None:
        """Adds a new socket; it starts out as possibly readable (data may already be queued)."""
        self.epoll.register(fd, _IN | _HUP | _ET)
        self.ready.add(fd)

    def unregister(self, fd: int) -> None:
        """Must come before the socket is closed: the number may be reused by the next accept."""
        self.ready.discard(fd)
        self.waiting.pop(fd, None)
        with contextlib.suppress(OSError, ValueError):
            self.epoll.unregister(fd)

    async def wait_readable(self, fd: int) -> None:
        if fd in self.ready:
            self.ready.discard(fd)
            return
        self.waiting[fd] = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self.waiting.pop(fd, None)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        self.ready.discard(fd)

    async def run(self) -> None:
        epoll = self.epoll
        waiting = self.waiting
        ready = self.ready
        reschedule = trio.lowlevel.reschedule
        try:
            while True:
                await trio.lowlevel.wait_readable(epoll.fileno())
                for fd, _events in epoll.poll(0, 256):
                    task = waiting.pop(fd, None)
                    if task is None:
                        ready.add(fd)
                    else:
                        reschedule(task)
        finally:
            epoll.close()
