"""Kafka-protocol clients built on our codec, for `kcoord health`, the other tools, tests and
benchmarks that need raw requests (exact versions, pipelining, malformed frames): one blocking
(``WireClient``, a socket) and one for trio (``AsyncWireClient``), over the same two functions
that encode a request frame and decode a response frame."""

from __future__ import annotations

import socket
import struct
from typing import Any

import trio

from protocol.frames import RequestHeader, frame_request, parse_response_header
from protocol.messages import REQUESTS, RESPONSES

_SIZE = struct.Struct(">i")


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
    """The size-prefixed frame of a request: header v1 or v2 (as the version is flexible) and body."""
    request = REQUESTS[api_key]
    header = RequestHeader(api_key, version, correlation_id, client_id)
    return frame_request(header, request.encode(body, version), request.is_flexible(version))


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix."""
    response = RESPONSES[api_key]
    correlation_id, pos = parse_response_header(frame, api_key, response.is_flexible(version))
    return correlation_id, response.decode(frame[pos:], version)


def _take_frame(buf: bytearray) -> bytes | None:
    """The first whole frame in ``buf`` (removed from it, without its size prefix), or None."""
    if len(buf) < 4:
        return None
    (size,) = _SIZE.unpack_from(buf, 0)
    if len(buf) < 4 + size:
        return None
    frame = bytes(buf[4 : 4 + size])
    del buf[: 4 + size]
    return frame


def _expect(correlation: int, got: int) -> None:
    if got != correlation:
        raise AssertionError(f"expected correlation id {correlation}, got {got}")


class WireClient:
    """One blocking connection; ``send`` pipelines, ``recv`` returns answers in order."""

    def __init__(self, host: str, port: int, client_id: str = "kcoord-wire", timeout: float = 10.0) -> None:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._attach(sock, client_id)

    @classmethod
    def over(cls, sock: socket.socket, client_id: str = "kcoord-wire") -> WireClient:
        """A client on a socket already connected (e.g. wrapped in TLS)."""
        client = cls.__new__(cls)
        client._attach(sock, client_id)
        return client

    def _attach(self, sock: socket.socket, client_id: str) -> None:
        self.sock = sock
        self.client_id = client_id
        self.correlation = 0
        self.buf = bytearray()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode(self, api_key: int, version: int, body: Any) -> tuple[int, bytes]:
        """(correlation id, frame) of the next request, not sent."""
        self.correlation += 1
        return self.correlation, encode_request(api_key, version, self.correlation, self.client_id, body)

    def send(self, api_key: int, version: int, body: Any) -> int:
        corr, data = self.encode(api_key, version, body)
        self.sock.sendall(data)
        return corr

    def recv_frame(self) -> bytes:
        while (frame := _take_frame(self.buf)) is None:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            self.buf += chunk
        return frame

    def recv(self, api_key: int, version: int, correlation: int) -> Any:
        corr, body = decode_response(api_key, version, self.recv_frame())
        _expect(correlation, corr)
        return body

    def call(self, api_key: int, version: int, body: Any) -> Any:
        return self.recv(api_key, version, self.send(api_key, version, body))


class AsyncWireClient:
    """One trio connection; ``send_raw`` pipelines, ``recv_frame`` returns answers in order."""

    def __init__(self, stream: trio.SocketStream, client_id: str = "kcoord-wire") -> None:
        self.stream = stream
        self.client_id = client_id
        self.correlation = 0
        self.buf = bytearray()

    @classmethod
    async def connect(cls, port: int, client_id: str = "kcoord-wire", host: str = "127.0.0.1") -> AsyncWireClient:
        return cls(await trio.open_tcp_stream(host, port), client_id)

    async def aclose(self) -> None:
        await self.stream.aclose()

    def encode(self, api_key: int, version: int, body: Any) -> bytes:
        """The frame of the next request, not sent."""
        self.correlation += 1
        return encode_request(api_key, version, self.correlation, self.client_id, body)

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def recv_frame(self) -> bytes:
        while (frame := _take_frame(self.buf)) is None:
            data = await self.stream.receive_some(1 << 16)
            if not data:
                raise ConnectionError("connection closed by the broker")
            self.buf += data
        return frame

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        await self.stream.send_all(self.encode(api_key, version, body))
        corr, answer = decode_response(api_key, version, await self.recv_frame())
        _expect(self.correlation, corr)
        return answer
