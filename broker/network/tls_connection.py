"""A client connection over TLS (SSL and SASL_SSL listeners).

The plain connection reads and writes the socket's descriptor directly; here every byte goes
through trio's SSLStream instead, so one task reads (decrypts) and hands the bytes to the same
framing and dispatch, and every write goes through the stream from the connection's task. The TLS
handshake comes first and must finish within ``ssl.handshake.timeout.ms``."""

from __future__ import annotations

from collections.abc import Callable

import trio

from broker.network.connection import Connection, linger_close
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Router
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.security.tls import DEFAULT_MAPPER, NoMatchingRule, PrincipalMapper, principal_from_certificate

_RECV_BYTES = 256 * 1024


class TlsConnection(Connection):
    direct_sends = False  # every write goes through the TLS stream, on the connection's task

    def __init__(self, stream: trio.SocketStream, tls_stream: trio.SSLStream[trio.SocketStream], router: Router,
                 info: ConnectionInfo, max_request_bytes: int, handshake_timeout: float,
                 on_response: Callable[[Reply], None] | None = None,
                 max_unauthenticated_bytes: int | None = None,
                 principal_mapper: PrincipalMapper = DEFAULT_MAPPER) -> None:
        super().__init__(stream, router, info, max_request_bytes, on_response, None, max_unauthenticated_bytes)
        self.tls_stream = tls_stream
        self.handshake_timeout = handshake_timeout
        self.principal_mapper = principal_mapper

    async def run(self) -> None:
        try:
            if not await self._handshake():
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._receive_loop)
                await self._writer()
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            # The client went away while we wrote. Raised inside the nursery, the error arrives
            # wrapped in an ExceptionGroup, which a plain ``except`` would let through to the
            # server's nursery.
            pass
        finally:
            self.router.connection_closed(self.info)
            self.broken = True
            with trio.CancelScope(shield=True):
                if self.linger:
                    await linger_close(self.stream)
                await trio.aclose_forcefully(self.tls_stream)

    async def _handshake(self) -> bool:
        client = f"{self.info.client_host}:{self.info.client_port}"
        with trio.move_on_after(self.handshake_timeout):
            try:
                await self.tls_stream.do_handshake()
            except trio.BrokenResourceError as exc:
                METRICS.connections_closed_bad.labels("tls_handshake").inc()
                METRICS.authentications.labels("SSL", "failure").inc()
                cause = exc.__cause__ or exc
                logs.warn("connection.closed", reason=f"TLS handshake failed: {cause}", client=client,
                          conn=self.info.conn_id)
                return False
            if not self.info.gated:
                cert = self.tls_stream.getpeercert()
                try:
                    self.info.principal = principal_from_certificate(cert, self.principal_mapper)
                except NoMatchingRule as exc:
                    # As Kafka's principal builder fails: the client is not authenticated.
                    METRICS.authentications.labels("SSL", "failure").inc()
                    logs.warn("connection.closed", reason=str(exc), client=client, conn=self.info.conn_id)
                    return False
                if cert:
                    METRICS.authentications.labels("SSL", "success").inc()
            return True
        METRICS.connections_closed_bad.labels("tls_handshake").inc()
        logs.warn("connection.closed", reason=f"TLS handshake not finished within {self.handshake_timeout}s",
                  client=client, conn=self.info.conn_id)
        return False

    async def _receive_loop(self) -> None:
        while not (self.closing or self.broken):
            if self.paused:
                self._resumed = trio.Event()
                await self._resumed.wait()
                # Frames read while paused are dispatched before reading more.
                if self.buf and not (self.closing or self.broken) and self._process():
                    self.router.after_frames()
                continue
            try:
                data = await self.tls_stream.receive_some(_RECV_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self._stop_reading()
                return
            METRICS.bytes_in.inc(len(data))
            self.buf += data
            try:
                self._process()
            except Exception:
                logs.event("connection.failed", 40, exc_info=True,
                           client=f"{self.info.client_host}:{self.info.client_port}", conn=self.info.conn_id)
                self._stop_reading()
                return
            self.router.after_frames()

    def _start_large(self, size: int) -> None:
        """Large frames stay in the read buffer until complete (decrypted bytes are copied once
        anyway)."""

    def _write_some(self, data: bytes | memoryview) -> int:
        return 0  # every write goes through the TLS stream, from the connection's task

    async def _send(self, data: bytes | memoryview) -> None:
        await self.tls_stream.send_all(data)
