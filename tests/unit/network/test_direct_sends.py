"""A reply the sync thread that made it durable writes itself (``Reply.lend``): it is lent only
when it is its connection's one reply owed, nobody else writes to the socket until it is returned,
what the thread left unwritten is written by the connection, a failed write leaves the answer to
the failure policy, and a connection whose client hung up keeps its descriptor open until the
lent reply is returned."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from broker.network.connection import Connection
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo
from tests.unit.network.parking import ParkingRouter, answer, frame, parked, read_answers

pytestmark = [pytest.mark.trio, pytest.mark.timeout(30)]


async def serve(router: ParkingRouter, nursery: trio.Nursery,
                scope: trio.CancelScope | None = None) -> tuple[Connection, trio.SocketStream, trio.Event]:
    ours, theirs = trio.socket.socketpair()
    conn = Connection(trio.SocketStream(ours), router, ConnectionInfo(1, "test", 1), 1 << 24)  # type: ignore[arg-type]
    done = trio.Event()

    async def run() -> None:
        with scope or trio.CancelScope():
            await conn.run()
        done.set()

    nursery.start_soon(run)
    return conn, trio.SocketStream(theirs), done


async def write_from_a_thread(fd: int, data: bytes) -> int:
    return await trio.to_thread.run_sync(os.write, fd, data)


async def lent_commit(router: ParkingRouter, client: trio.SocketStream) -> tuple[Reply, int, bytes]:
    """The client sends a request; its reply, prepared with a success, is lent as the runtime lends
    it: the reply, the descriptor and the bytes for the thread."""
    count = len(router.parked) + 1  # counted before sending: the connection may read it at once
    await client.send_all(frame(b"commit"))
    reply = (await parked(router, count))[-1]
    assert reply.prepare(answer(0))
    lent = reply.lend()
    assert lent is not None
    return reply, *lent


async def nothing_sent(client: trio.SocketStream, why: str) -> None:
    """Once every task is blocked, the client has nothing to read (checked for a moment)."""
    await trio.testing.wait_all_tasks_blocked()
    with trio.move_on_after(0.05):
        assert await client.receive_some(100) == b"", why


async def test_a_lent_reply_goes_first_and_the_ones_behind_it_wait_for_its_return() -> None:
    router = ParkingRouter()
    async with trio.open_nursery() as nursery:
        _conn, client, done = await serve(router, nursery)
        first, fd, data = await lent_commit(router, client)
        assert first.lend() is None, "lent once"

        # A second request answered at once while the first is lent, and an error set on the
        # first meanwhile (its shard unloading): nobody writes either yet.
        await client.send_all(frame(b"heartbeat"))
        _, second = await parked(router, 2)
        second.set(answer(27))
        first.set(answer(16))
        await client.send_eof()  # and the connection's own task awake (the client is done)
        await nothing_sent(client, "a reply went out ahead of the lent one")

        assert await write_from_a_thread(fd, data) == len(data)
        first.returned(len(data), durable=True, sent_at=1234.5)
        assert first.sent_at == 1234.5  # the request's latency ends there, not at the return
        first.set(answer(0))  # the runtime's release afterwards changes nothing
        # The client has the answer the thread wrote, once; the error set meanwhile is not sent,
        # nor counted.
        assert await read_answers(client, 2) == [(1, 0), (2, 27)]
        assert first.error_code == 0
        with trio.fail_after(10):
            await done.wait()


async def test_only_a_connections_one_reply_owed_is_lent() -> None:
    router = ParkingRouter()
    async with trio.open_nursery() as nursery:
        _conn, client, _done = await serve(router, nursery)
        await client.send_all(frame(b"a") + frame(b"b"))
        first, second = await parked(router, 2)
        # Two owed: the thread would write one and the connection the other, where one write
        # carries both. Neither is prepared for the thread, nor lent.
        for reply in (first, second):
            assert not reply.prepare(answer(0))
            assert reply.lend() is None
        first.set(answer(0))
        second.set(answer(0))
        assert await read_answers(client, 2) == [(1, 0), (2, 0)]
        await client.aclose()


async def test_what_the_thread_could_not_write_the_connection_writes() -> None:
    router = ParkingRouter()
    async with trio.open_nursery() as nursery:
        _conn, client, _done = await serve(router, nursery)
        reply, fd, data = await lent_commit(router, client)
        assert await write_from_a_thread(fd, data[:3]) == 3
        reply.returned(3, durable=True)
        assert await read_answers(client, 1) == [(1, 0)]

        # Not written at all (the socket was full): the connection writes it whole.
        again, _fd, _data = await lent_commit(router, client)
        again.returned(0, durable=True)
        assert await read_answers(client, 1) == [(2, 0)]
        await client.aclose()


async def test_a_write_that_did_not_become_durable_sends_nothing_until_the_error() -> None:
    router = ParkingRouter()
    async with trio.open_nursery() as nursery:
        _conn, client, _done = await serve(router, nursery)
        reply, _fd, _data = await lent_commit(router, client)
        reply.returned(0, durable=False)
        await nothing_sent(client, "an answer left before its records were durable")
        reply.set(answer(15))  # the failure policy's COORDINATOR_NOT_AVAILABLE
        assert await read_answers(client, 1) == [(1, 15)]
        await client.aclose()


async def test_a_connection_ended_while_a_reply_is_lent_keeps_its_descriptor_until_the_return() -> None:
    router = ParkingRouter()
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        conn, client, done = await serve(router, nursery, scope)
        reply, fd, data = await lent_commit(router, client)
        scope.cancel()  # the broker shutting down
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set()
        # Its number could otherwise go to the next connection accepted, and the answer with it.
        assert conn.stream.socket.fileno() == fd, "closed while a thread may write to it"
        assert await write_from_a_thread(fd, data) == len(data)
        reply.returned(len(data), durable=True)
        with trio.fail_after(10):
            await done.wait()
        assert conn.stream.socket.fileno() == -1
        assert await read_answers(client, 1) == [(1, 0)]


async def test_a_socket_the_thread_could_not_write_to_ends_the_connection() -> None:
    router = ParkingRouter()
    async with trio.open_nursery() as nursery:
        _conn, client, done = await serve(router, nursery)
        reply, _fd, _data = await lent_commit(router, client)
        await client.aclose()
        reply.returned(-1, durable=True)  # the peer is gone
        with trio.fail_after(10):
            await done.wait()
