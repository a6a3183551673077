"""The shared edge-triggered readiness set: wakes the right reader, misses no data."""

from __future__ import annotations

import os
import socket

import pytest
import trio
import trio.testing

from broker.network.readiness import ReadinessHub

pytestmark = [pytest.mark.trio, pytest.mark.skipif(not ReadinessHub().available, reason="needs epoll")]


async def test_wakes_only_the_socket_that_received_data() -> None:
    hub = ReadinessHub()
    pairs = [socket.socketpair() for _ in range(3)]
    woken: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        for i, (ours, _) in enumerate(pairs):
            ours.setblocking(False)
            hub.register(ours.fileno())
            await hub.wait_readable(ours.fileno())  # a new socket starts out possibly readable

            async def reader(i: int = i, fd: int = ours.fileno()) -> None:
                await hub.wait_readable(fd)
                woken.append(i)
                assert os.read(fd, 100) == b"hello"

            nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        pairs[1][1].send(b"hello")
        with trio.fail_after(5):
            while not woken:
                await trio.sleep(0.001)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [1]
        for i in (0, 2):
            pairs[i][1].send(b"hello")
        with trio.fail_after(5):
            while len(woken) < 3:
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    for a, b in pairs:
        hub.unregister(a.fileno())
        a.close()
        b.close()


async def test_data_sent_before_registration_is_not_missed() -> None:
    hub = ReadinessHub()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.send(b"early")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        hub.register(ours.fileno())
        with trio.fail_after(5):
            await hub.wait_readable(ours.fileno())
        assert os.read(ours.fileno(), 100) == b"early"
        # Drained: the next wait blocks until new data arrives, then wakes.
        with trio.move_on_after(0.05) as idle:
            await hub.wait_readable(ours.fileno())
        assert idle.cancelled_caught
        theirs.send(b"late")
        with trio.fail_after(5):
            await hub.wait_readable(ours.fileno())
        assert os.read(ours.fileno(), 100) == b"late"
        nursery.cancel_scope.cancel()
    hub.unregister(ours.fileno())
    ours.close()
    theirs.close()
