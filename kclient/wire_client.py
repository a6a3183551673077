"""A small blocking Kafka protocol client built on our codec: for `kcoord health`, tests and
benchmarks that need raw requests (exact versions, pipelining, malformed frames)."""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.frames import RequestHeader, frame_request
from protocol.messages import REQUESTS, RESPONSES


class WireClient:
    def __init__(self, host: str, port: int, client_id: str = "kcoord-wire", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation = 0
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode(self, api_key: int, version: int, body: Any) -> tuple[int, bytes]:
        self.correlation += 1
        request = REQUESTS[api_key]
        flexible = request.is_flexible(version)
        header = RequestHeader(api_key, version, self.correlation, self.client_id)
        return self.correlation, frame_request(header, request.encode(body, version), flexible)

    def send(self, api_key: int, version: int, body: Any) -> int:
        corr, data = self.encode(api_key, version, body)
        self.sock.sendall(data)
        return corr

    def recv_frame(self) -> bytes:
        while len(self.buf) < 4:
            self._fill()
        (size,) = struct.unpack_from(">i", self.buf, 0)
        while len(self.buf) < 4 + size:
            self._fill()
        frame, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
        return frame

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        self.buf += chunk

    def recv(self, api_key: int, version: int, correlation: int) -> Any:
        frame = self.recv_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        if corr != correlation:
            raise AssertionError(f"expected correlation id {correlation}, got {corr}")
        response = RESPONSES[api_key]
        pos = 4
        if response.is_flexible(version) and api_key != 18:
            pos += 1  # empty tagged-field block of response header v1
        return response.decode(frame[pos:], version)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        return self.recv(api_key, version, self.send(api_key, version, body))
