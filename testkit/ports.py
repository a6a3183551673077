"""Loopback ports for the servers tests and benchmarks start."""

from __future__ import annotations

import socket

# Every port handed out by this process: the kernel may give the same free port to two askings in a
# row (nothing listens on it until the first server starts), and two servers given the same port
# end with one of them failing to listen and its readiness check answered by the other (a kcoord
# beside Kafka took Kafka's port that way, and a differential test compared Kafka with itself).
_GIVEN: set[int] = set()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on at the moment of asking, and that this process
    has not handed out before."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def api_versions_ok(port: int, timeout: float = 1.0) -> bool:
    """Sends ApiVersions v0 and expects an answer with the same correlation id: the broker serves."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            body = b"\x00\x12\x00\x00\x00\x00\x00\x07\x00\x04ping"
            s.sendall(len(body).to_bytes(4, "big") + body)
            head = s.recv(8)
            return len(head) == 8 and head[4:8] == b"\x00\x00\x00\x07"
    except OSError:
        return False
