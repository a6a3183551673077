"""The Prometheus endpoint: a minimal HTTP/1.1 server on its own trio listener (GET /metrics)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import trio
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.observability import logs

_MAX_HEAD = 16 * 1024


class _One(Collector):
    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> list[Metric]:
        return [self.family]


async def registry_text() -> bytes:
    """What ``generate_latest(REGISTRY)`` writes, yielding to the event loop after each metric
    family: with thousands of members the collectors (the process' open descriptors, every group's
    state) take tens of milliseconds together, and requests are served between them instead of
    after all of them."""
    pieces = []
    for family in REGISTRY.collect():
        pieces.append(generate_latest(_One(family)))
        await trio.sleep(0)
    return b"".join(pieces)


async def _respond(extra: Callable[[], Awaitable[bytes]] | None, stream: trio.SocketStream) -> None:
    try:
        head = b""
        with trio.move_on_after(10):
            while b"\r\n\r\n" not in head and len(head) < _MAX_HEAD:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                head += chunk
        line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(line) < 2 or line[0] not in ("GET", "HEAD"):
            status, ctype, body = "405 Method Not Allowed", "text/plain", b"GET /metrics\n"
        elif urlsplit(line[1]).path in ("/metrics", "/metrics/"):
            # Series computed at scrape time from state that must be awaited (durable reads, log
            # reads in worker threads, rendering in slices) come from ``extra``, after the registry's.
            more = await extra() if extra is not None else b""
            status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, await registry_text() + more
        elif urlsplit(line[1]).path == "/":
            status, ctype, body = "200 OK", "text/html", b'<a href="/metrics">metrics</a>\n'
        else:
            status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
        payload = body if line and line[0] != "HEAD" else b""
        await stream.send_all(
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode() + payload)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        await stream.aclose()


async def serve_metrics(host: str, port: int, extra: Callable[[], Awaitable[bytes]] | None = None, *,
                        task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    logs.event("metrics.listening", host=host, port=bound, path="/metrics")
    task_status.started(bound)
    await trio.serve_listeners(partial(_respond, extra), listeners)
