"""A router that parks every request, for tests that answer them by hand, and the frames and
answers they exchange."""

from __future__ import annotations

import struct

import trio

from broker.network.reply import Reply
from broker.network.router import ConnectionInfo
from protocol.messages.heartbeat import HeartbeatResponse


class ParkingRouter:
    """Parks every request; each reply is prepared with an answer naming its frame."""

    def __init__(self) -> None:
        self.parked: list[Reply] = []

    def dispatch(self, frame: bytes | memoryview, conn: ConnectionInfo) -> Reply:
        reply = Reply(HeartbeatResponse, 0, len(self.parked) + 1, False, sender=conn.sender)
        self.parked.append(reply)
        return reply

    def after_frames(self) -> None:
        pass

    def connection_closed(self, info: ConnectionInfo) -> None:
        pass


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def answer(code: int) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


async def read_answers(stream: trio.SocketStream, count: int) -> list[tuple[int, int]]:
    """(correlation id, error code) of ``count`` HeartbeatResponse v0 frames."""
    buf = b""
    with trio.fail_after(10):
        while len(buf) < count * 10:
            data = await stream.receive_some(1 << 16)
            assert data, "closed before every answer arrived"
            buf += data
    assert len(buf) == count * 10, "more was written than answered"
    return [struct.unpack_from(">iih", buf, 10 * i)[1:] for i in range(count)]


async def parked(router: ParkingRouter, count: int) -> list[Reply]:
    with trio.fail_after(10):
        while len(router.parked) < count:
            await trio.sleep(0.001)
    return router.parked
