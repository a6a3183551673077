"""The shared edge-triggered readiness set: calls the right reader, misses no data."""

from __future__ import annotations

import os
import socket

import pytest
import trio
import trio.testing

from broker.network.readiness import ReadinessHub

pytestmark = [pytest.mark.trio, pytest.mark.skipif(not ReadinessHub().available, reason="needs epoll")]


def drain(fd: int, into: list[bytes]) -> bool:
    """A reader as the hub expects it: reads until the socket is empty."""
    while True:
        try:
            data = os.read(fd, 100)
        except BlockingIOError:
            return False
        into.append(data)
        if not data:
            return False


async def wait_for(condition: object) -> None:
    with trio.fail_after(5):
        while not condition():  # type: ignore[operator]
            await trio.sleep(0.001)


async def test_calls_only_the_reader_of_the_socket_that_received_data() -> None:
    rounds: list[int] = []
    hub = ReadinessHub(after_round=lambda: rounds.append(1))
    pairs = [socket.socketpair() for _ in range(3)]
    got: list[list[bytes]] = [[] for _ in pairs]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        for i, (ours, _) in enumerate(pairs):
            ours.setblocking(False)
            fd = ours.fileno()
            hub.register(fd, lambda i=i, fd=fd: drain(fd, got[i]))
        await trio.testing.wait_all_tasks_blocked()
        pairs[1][1].send(b"hello")
        await wait_for(lambda: got[1])
        await trio.testing.wait_all_tasks_blocked()
        assert got == [[], [b"hello"], []]
        assert rounds  # the writes a round queued are started once its readers have run
        for i in (0, 2):
            pairs[i][1].send(b"hello")
        await wait_for(lambda: got[0] and got[2])
        nursery.cancel_scope.cancel()
    for a, b in pairs:
        hub.unregister(a.fileno())
        a.close()
        b.close()


async def test_new_data_after_a_drain_raises_a_new_edge() -> None:
    hub = ReadinessHub()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    got: list[bytes] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        hub.register(ours.fileno(), lambda: drain(ours.fileno(), got))
        theirs.send(b"first")
        await wait_for(lambda: got == [b"first"])
        theirs.send(b"second")
        await wait_for(lambda: got == [b"first", b"second"])
        nursery.cancel_scope.cancel()
    hub.unregister(ours.fileno())
    ours.close()
    theirs.close()


async def test_a_reader_that_stops_early_is_called_again() -> None:
    hub = ReadinessHub()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    got: list[bytes] = []

    def one_byte_at_a_time() -> bool:
        try:
            got.append(os.read(ours.fileno(), 1))
        except BlockingIOError:
            return False
        return True  # not drained: with edge triggering nothing else would call it again

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        hub.register(ours.fileno(), one_byte_at_a_time)
        theirs.send(b"abcd")
        await wait_for(lambda: b"".join(got) == b"abcd")
        nursery.cancel_scope.cancel()
    hub.unregister(ours.fileno())
    ours.close()
    theirs.close()


async def test_a_failing_reader_does_not_stop_the_others() -> None:
    hub = ReadinessHub()
    bad, bad_peer = socket.socketpair()
    good, good_peer = socket.socketpair()
    for s in (bad, good):
        s.setblocking(False)
    got: list[bytes] = []

    def broken() -> bool:
        raise RuntimeError("bug")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        hub.register(bad.fileno(), broken)
        hub.register(good.fileno(), lambda: drain(good.fileno(), got))
        bad_peer.send(b"x")
        good_peer.send(b"y")
        await wait_for(lambda: got == [b"y"])
        nursery.cancel_scope.cancel()
    for s in (bad, bad_peer, good, good_peer):
        if s in (bad, good):
            hub.unregister(s.fileno())
        s.close()


async def test_an_unregistered_socket_is_not_read() -> None:
    hub = ReadinessHub()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    calls: list[int] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        hub.register(ours.fileno(), lambda: bool(calls.append(1)))
        hub.unregister(ours.fileno())
        theirs.send(b"late")
        await trio.sleep(0.05)
        assert calls == []
        nursery.cancel_scope.cancel()
    ours.close()
    theirs.close()
