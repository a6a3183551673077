"""The send worker writes a busy loop's answers from a process of its own: a connection's answers
still arrive in the order they were asked for, whether the worker or the connection writes them; a
client that stops reading has its answers held in the worker and its requests left unread until it
reads again; a connection that ends gets every answer first; a worker that dies is replaced by the
connections writing their own. Real sockets, the real worker process."""

from __future__ import annotations

import contextlib
import os
import signal
import struct
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import trio
import trio.testing

from broker.network.connection import Connection
from broker.network.readiness import ReadinessHub
from broker.network.router import ConnectionInfo
from broker.network.send_process import SendProcess
from tests.unit.network.parking import ParkingRouter, frame, parked

pytestmark = [pytest.mark.trio, pytest.mark.timeout(60)]


class Served:
    def __init__(self, conn: Connection, client: trio.SocketStream, sender: SendProcess, done: trio.Event,
                 router: ParkingRouter) -> None:
        self.conn, self.client, self.sender, self.done, self.router = conn, client, sender, done, router
        self.lost: list[str] = []
        self.buf = b""

    async def answers_until(self, correlation_id: int) -> list[tuple[int, bytes]]:
        """Answers up to the one with ``correlation_id``, whatever came before it."""
        got: list[tuple[int, bytes]] = []
        while not got or got[-1][0] != correlation_id:
            got += await self.answers(1)
        return got

    async def answers(self, count: int) -> list[tuple[int, bytes]]:
        """(correlation id, body) of the next ``count`` answers (v0 headers)."""
        got: list[tuple[int, bytes]] = []
        with trio.fail_after(20):
            while len(got) < count:
                if len(self.buf) >= 4:
                    (size,) = struct.unpack_from(">i", self.buf)
                    if len(self.buf) >= 4 + size:
                        (corr,) = struct.unpack_from(">i", self.buf, 4)
                        got.append((corr, self.buf[8:4 + size]))
                        self.buf = self.buf[4 + size:]
                        continue
                data = await self.client.receive_some(1 << 20)
                assert data, "closed before every answer arrived"
                self.buf += data
        return got


@contextlib.asynccontextmanager
async def serving(hold_descriptors: int = 0) -> AsyncIterator[Served]:
    """A connection served through a send worker (min.round 1), its client, torn down after.
    ``hold_descriptors``: that many descriptors are held open while the worker starts, so that
    its pipes and socket get numbers past them."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(hold_descriptors)]
    router = ParkingRouter()
    try:
        async with trio.open_nursery() as nursery:
            s = await serve(nursery, router)
            for fd in held:
                os.close(fd)
            held = []
            yield s
            await s.client.aclose()
            nursery.cancel_scope.cancel()
    finally:
        for fd in held:
            os.close(fd)
    s.sender.stop()


async def serve(nursery: trio.Nursery, router: ParkingRouter, min_round: int = 1) -> Served:
    sender = SendProcess(min_round, stuck_s=0.5)
    hub = ReadinessHub()
    hub.sender = sender
    nursery.start_soon(sender.run)
    nursery.start_soon(hub.run)
    ours, theirs = trio.socket.socketpair()
    conn = Connection(trio.SocketStream(ours), router, ConnectionInfo(1, "test", 1), 1 << 24, hub=hub)  # type: ignore[arg-type]
    assert conn.worker is sender
    done = trio.Event()
    served = Served(conn, trio.SocketStream(theirs), sender, done, router)
    sender.on_lost = served.lost.append

    async def run() -> None:
        await conn.run()
        done.set()

    nursery.start_soon(run)
    return served


async def until(condition: Callable[[], object], what: str) -> None:
    with trio.move_on_after(20):
        while not condition():
            await trio.sleep(0.001)
        return
    raise AssertionError(f"waited 20 s for {what}")


def body(i: int, size: int = 8) -> bytes:
    return i.to_bytes(4, "big") * (size // 4)


async def test_answers_arrive_in_order_whoever_writes_them() -> None:
    async with serving() as s:
        await s.client.send_all(b"".join(frame(b"r") for _ in range(300)))
        replies = await parked(s.router, 300)
        s.sender.loaded = True  # as after a round of min_round connections
        for i, reply in enumerate(replies[:150]):
            reply.set_bytes(body(i, 4 + i % 50 * 4))
        assert s.sender.given == 150, "one order an answer"
        for i, reply in reversed(list(enumerate(replies))[150:]):  # last first: all wait for the first
            reply.set_bytes(body(i, 4 + i % 50 * 4))
        assert s.sender.given == 151, "the answers ready together went in one order"
        assert await s.answers(300) == [(i + 1, body(i, 4 + i % 50 * 4)) for i in range(300)]

        # The loop catches up (rounds smaller than min_round) while one answer is still with the
        # worker: the next one follows it there rather than overtake it.
        s.sender.min_round = 1 << 30
        await s.client.send_all(frame(b"a") + frame(b"b"))
        first, second = (await parked(s.router, 302))[300:]
        s.sender.loaded = True
        first.set_bytes(b"first")
        given = s.sender.given
        s.sender.loaded = False
        assert s.sender.takes(s.conn), "an answer of its is not done yet"
        second.set_bytes(b"second")
        assert s.sender.given == given + 1
        assert await s.answers(2) == [(301, b"first"), (302, b"second")]

        # Once the worker says it is done, the connection writes its own again.
        await until(lambda: s.sender.acked == s.sender.given, "the worker to be done")
        await s.client.send_all(frame(b"c"))
        (third,) = (await parked(s.router, 303))[302:]
        third.set_bytes(b"third")
        assert s.sender.given == given + 1
        assert await s.answers(1) == [(303, b"third")]


async def test_a_client_that_stops_reading_has_its_answers_held_until_it_reads() -> None:
    async with serving() as s:
        big = 256 * 1024
        await s.client.send_all(b"".join(frame(b"r") for _ in range(40)))
        replies = await parked(s.router, 40)
        s.sender.loaded = True
        for i, reply in enumerate(replies):  # 10 MiB: far more than the socket takes
            reply.set_bytes(body(i, big))
        await until(lambda: s.conn.worker_is_full, "the worker to find the socket full")
        # Whatever is answered now stays with the connection, and a lent write is refused.
        await s.client.send_all(frame(b"later"))
        (later,) = (await parked(s.router, 41))[40:]
        given = s.sender.given
        later.set_bytes(b"later")
        assert s.sender.given == given and s.conn.pending, "handed over while the socket is full"
        assert s.conn.lend(later) is None
        got = await s.answers(41)  # the client reads again: everything, in order
        assert got == [(i + 1, body(i, big)) for i in range(40)] + [(41, b"later")]
        await until(lambda: not s.conn.worker_is_full, "the worker to say it drained")


async def test_a_connection_that_ends_gets_its_answers_before_the_end() -> None:
    async with serving() as s:
        await s.client.send_all(b"".join(frame(b"r") for _ in range(20)))
        replies = await parked(s.router, 20)
        s.sender.loaded = True
        await s.client.send_eof()
        for i, reply in enumerate(replies):
            reply.set_bytes(body(i, 64 * 1024))
        got = await s.answers(20)
        assert got == [(i + 1, body(i, 64 * 1024)) for i in range(20)]
        with trio.fail_after(20):
            await s.done.wait()
            assert await s.client.receive_some(100) == b"", "the worker kept the socket open"


async def test_when_the_worker_dies_connections_write_their_own_answers() -> None:
    async with serving() as s:
        await s.client.send_all(frame(b"r"))
        (reply,) = await parked(s.router, 1)
        s.sender.loaded = True
        reply.set_bytes(b"before")
        assert await s.answers(1) == [(1, b"before")]
        os.kill(s.sender.proc.pid, signal.SIGKILL)
        await until(lambda: s.lost, "the loss to be noticed")
        assert "send worker stopped" in s.lost[0]
        assert not s.sender.takes(s.conn) and s.sender.lends(s.conn)
        await s.client.send_all(frame(b"r"))
        (after,) = (await parked(s.router, 2))[1:]
        after.set_bytes(b"after")
        assert await s.answers(1) == [(2, b"after")]


@contextlib.contextmanager
def stopped(sender: SendProcess) -> Iterator[None]:
    """The worker stopped (SIGSTOP) for the block, killed after it."""
    os.kill(sender.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(sender.proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("hold", [0, 1100], ids=["low descriptors", "descriptors past 1024"])
async def test_a_worker_that_reads_nothing_is_given_up_and_connections_write_their_own(hold: int) -> None:
    async with serving(hold) as s:
        with stopped(s.sender):
            await s.client.send_all(b"".join(frame(b"r") for _ in range(40)))
            replies = await parked(s.router, 40)
            s.sender.loaded = True
            for i, reply in enumerate(replies):  # 2.5 MiB: more than the pipe to the worker holds
                reply.set_bytes(body(i, 64 * 1024))
            assert s.lost and "read no answers for 0.5 s" in s.lost[0]
        # The broker would now close every connection; this one still writes its own answers.
        assert not s.sender.takes(s.conn)
        await s.client.send_all(frame(b"r"))
        (after,) = (await parked(s.router, 41))[40:]
        after.set_bytes(b"after")
        got = await s.answers_until(41)
        assert got[-1] == (41, b"after")


async def test_a_worker_that_takes_no_sockets_is_given_up() -> None:
    async with serving() as s:
        pairs = []
        try:
            with stopped(s.sender):
                # Each new connection hands the worker its socket; a stopped worker takes none, and
                # once the socket between them is full the next connection waits 0.5 s and gives up.
                for i in range(2000):
                    ours, theirs = trio.socket.socketpair()
                    pairs.append((ours, theirs))
                    conn = Connection(trio.SocketStream(ours), s.router, ConnectionInfo(i + 2, "test", 1),  # type: ignore[arg-type]
                                      1 << 24, hub=s.conn.hub)
                    if s.lost:
                        break
                assert s.lost and "took no socket" in s.lost[0]
                assert conn.worker is None, "the connection that found it stuck writes its own answers"
        finally:
            for ours, theirs in pairs:
                ours.close()
                theirs.close()
