"""The console over TLS (an ``https://`` console.listener): each connection's handshake is made
here, with the context of the broker's SSL listeners (``broker.security.tls.server_context``, the
ssl.* properties), so that the client certificate it presented is known before the first request;
the connection is then Hypercorn's, as on plain HTTP, and every request on it carries the
certificate's subject in its scope as the ASGI TLS extension has it (``extensions["tls"]``,
``client_cert_name``, RFC 4514). Hypercorn's own TLS serving gives the application no access to
the peer's certificate, which is why the handshake is not left to it."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from functools import partial
from typing import Any, cast

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ASGIFramework, ASGIReceiveCallable, ASGISendCallable, ConnectionState, Scope

from broker.observability import logs
from broker.security.tls import certificate_subject


def console_context(values: Mapping[str, Any]) -> ssl.SSLContext:
    """The console's TLS context: the SSL listeners' (one loader for both), speaking HTTP/1.1.
    Raises OSError, ssl.SSLError or KeystoreError when a store cannot be read."""
    from broker.security.tls import server_context

    ctx = server_context(values)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class WithCertificate:
    """The console's application as one TLS connection sees it: each request's scope names the
    subject of the certificate the client presented (None without one)."""

    def __init__(self, app: ASGIFramework, subject: str | None) -> None:
        self.app = app
        self.tls: dict[str, object] = {"client_cert_name": subject, "client_cert_chain": [], "client_cert_error": None,
                    "server_cert": None}

    async def __call__(self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] in ("http", "websocket"):
            extensions = {**(scope.get("extensions") or {}), "tls": self.tls}
            scope = cast(Scope, {**scope, "extensions": extensions})
        await self.app(scope, receive, send)


async def _connection(app: ASGIFramework, config: Config, context: WorkerContext, tls: ssl.SSLContext,
                      stream: trio.SocketStream) -> None:
    secure = trio.SSLStream(stream, tls, server_side=True, https_compatible=True)
    try:
        with trio.fail_after(config.ssl_handshake_timeout):
            await secure.do_handshake()
    except (trio.BrokenResourceError, trio.TooSlowError) as exc:
        # No certificate where one is required, one the truststore does not trust, not TLS at all.
        cause = exc.__cause__ if exc.__cause__ is not None else exc
        logs.event("console.handshake_failed", client_host=_peer(stream), error=str(cause) or type(cause).__name__)
        await trio.aclose_forcefully(stream)
        return
    subject = certificate_subject(secure.getpeercert())
    await TCPServer(ASGIWrapper(WithCertificate(app, subject)), config, context, ConnectionState({}), secure)


def _peer(stream: trio.SocketStream) -> str:
    try:
        return str(stream.socket.getpeername()[0])
    except OSError:
        return ""


async def serve_https(app: ASGIFramework, config: Config, tls: ssl.SSLContext, host: str, port: int,
                      *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serves ``app`` over TLS on ``host``:``port`` (0: any free port); reports the bound port."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = int(listeners[0].socket.getsockname()[1])
    context = WorkerContext(None)
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(trio.serve_listeners, partial(_connection, app, config, context, tls), listeners,
                                    handler_nursery=nursery))
        task_status.started(bound)
