"""One connection over a socket pair, with a stub router: frames are dispatched whole and in order,
answers leave in request order, back-pressure stops and resumes reading, and a client that hangs
up still gets what it is owed. Run with the shared readiness set and without it."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from broker.network import connection as connection_module
from broker.network.connection import Connection
from broker.network.readiness import ReadinessHub
from broker.network.reply import Reply
from broker.network.router import CloseConnection, ConnectionInfo

pytestmark = pytest.mark.trio


class StubRouter:
    """Answers each frame with its own body, at once or (``park``) when told to."""

    def __init__(self, park: bool = False) -> None:
        self.park = park
        self.frames: list[bytes] = []
        self.parked: list[Reply] = []

    def dispatch(self, frame: bytes | memoryview, conn: ConnectionInfo) -> Reply:
        body = bytes(frame)
        if body == b"bad!":
            raise CloseConnection("bad request")
        self.frames.append(body)
        reply = Reply(None, 0, len(self.frames), False)
        if self.park:
            self.parked.append(reply)
        else:
            reply.set_bytes(body)
        return reply

    def after_frames(self) -> None:
        pass

    def connection_closed(self, info: ConnectionInfo) -> None:
        pass

    def answer_parked(self) -> None:
        parked, self.parked = self.parked, []
        for reply in parked:
            reply.set_bytes(b"late")


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def read_answers(stream: trio.SocketStream, count: int) -> list[tuple[int, bytes]]:
    buf = b""
    out: list[tuple[int, bytes]] = []
    with trio.fail_after(10):
        while len(out) < count:
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                size = struct.unpack_from(">i", buf)[0]
                correlation, = struct.unpack_from(">i", buf, 4)
                out.append((correlation, buf[8 : 4 + size]))
                buf = buf[4 + size :]
            if len(out) < count:
                data = await stream.receive_some(1 << 16)
                assert data, "closed before every answer arrived"
                buf += data
    return out


@pytest.fixture(params=["readiness-set", "trio-waits"])
async def hub(request: Any) -> AsyncIterator[ReadinessHub | None]:
    if request.param == "trio-waits":
        yield None
        return
    hub = ReadinessHub()
    if not hub.available:
        pytest.skip("needs epoll")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hub.run)
        yield hub
        nursery.cancel_scope.cancel()


async def serve(router: StubRouter, hub: ReadinessHub | None,
                nursery: trio.Nursery) -> tuple[trio.SocketStream, trio.Event]:
    ours, theirs = trio.socket.socketpair()
    conn = Connection(trio.SocketStream(ours), router, ConnectionInfo(1, "test", 1), 1 << 24, hub=hub)  # type: ignore[arg-type]
    done = trio.Event()

    async def run() -> None:
        await conn.run()
        done.set()

    nursery.start_soon(run)
    return trio.SocketStream(theirs), done


async def test_pipelined_frames_are_answered_in_order(hub: ReadinessHub | None) -> None:
    router = StubRouter()
    async with trio.open_nursery() as nursery:
        client, _ = await serve(router, hub, nursery)
        bodies = [f"request-{i}".encode() for i in range(50)]
        await client.send_all(b"".join(frame(b) for b in bodies))
        answers = await read_answers(client, 50)
        assert answers == [(i + 1, b) for i, b in enumerate(bodies)]
        await client.aclose()
    assert router.frames == bodies


async def test_a_large_frame_sent_in_pieces_arrives_whole(hub: ReadinessHub | None) -> None:
    router = StubRouter()
    big = bytes(range(256)) * 1024  # 256 KiB: read in place, not through the read buffer
    data = frame(b"small-1") + frame(big) + frame(b"small-2")
    async with trio.open_nursery() as nursery:
        client, _ = await serve(router, hub, nursery)
        for start in range(0, len(data), 10_000):
            await client.send_all(data[start : start + 10_000])
            await trio.sleep(0)
        answers = await read_answers(client, 3)
        await client.aclose()
    assert router.frames == [b"small-1", big, b"small-2"]
    assert [body for _, body in answers] == [b"small-1", big, b"small-2"]


# (limit, its value, the requests sent, how many are read before reading stops): 4 requests; or
# room for 3 KiB with requests of a little over 1 KiB each, where the third reaches the limit.
LIMITS = {
    "requests": ("MAX_IN_FLIGHT", 4, [f"r{i}".encode() for i in range(10)], 4),
    "bytes": ("MAX_IN_FLIGHT_BYTES", 3 * 1024, [bytes([i]) * 1024 for i in range(10)], 3),
}


@pytest.mark.parametrize("limit", LIMITS)
async def test_reading_stops_at_the_in_flight_limit_and_resumes(hub: ReadinessHub | None, limit: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    name, value, bodies, read = LIMITS[limit]
    monkeypatch.setattr(connection_module, name, value)
    router = StubRouter(park=True)
    async with trio.open_nursery() as nursery:
        client, _ = await serve(router, hub, nursery)
        await client.send_all(b"".join(frame(b) for b in bodies))
        await trio.testing.wait_all_tasks_blocked()
        assert len(router.frames) == read
        answered: list[tuple[int, bytes]] = []
        while len(answered) < len(bodies):
            owed = len(router.parked)
            router.answer_parked()
            answered += await read_answers(client, owed)
            await trio.testing.wait_all_tasks_blocked()
            assert len(router.frames) - len(answered) <= read
        assert [c for c, _ in answered] == list(range(1, len(bodies) + 1))
        await client.aclose()
    assert router.frames == bodies


async def test_a_client_that_hangs_up_still_gets_its_parked_answer_written(hub: ReadinessHub | None) -> None:
    router = StubRouter(park=True)
    async with trio.open_nursery() as nursery:
        client, done = await serve(router, hub, nursery)
        await client.send_all(frame(b"join"))
        await client.send_eof()
        await trio.testing.wait_all_tasks_blocked()
        assert not done.is_set(), "a parked answer is still owed"
        router.answer_parked()
        assert await read_answers(client, 1) == [(1, b"late")]
        with trio.fail_after(5):
            await done.wait()


async def test_a_bad_request_closes_the_connection_after_earlier_answers(hub: ReadinessHub | None) -> None:
    router = StubRouter()
    async with trio.open_nursery() as nursery:
        client, done = await serve(router, hub, nursery)
        await client.send_all(frame(b"fine") + frame(b"bad!") + frame(b"never"))
        assert await read_answers(client, 1) == [(1, b"fine")]
        with trio.fail_after(5):
            await done.wait()
            assert await client.receive_some(100) == b""
    assert router.frames == [b"fine"]
