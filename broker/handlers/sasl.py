"""SaslHandshake and SaslAuthenticate: the SASL exchange of SASL_PLAINTEXT and SASL_SSL listeners,
and the bare tokens that follow SaslHandshake v0.

A failed exchange is answered with SASL_AUTHENTICATION_FAILED (v0 tokens: by closing) after
``connection.failed.authentication.delay.ms``, and the connection closes, as Kafka does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Request
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.security.sasl import AuthenticationFailed, SaslState, new_exchange
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

if TYPE_CHECKING:
    from broker.server import Broker


def register(broker: Broker) -> None:
    router = broker.router
    mechanisms = broker.security.mechanisms
    store = broker.security.credentials
    reauth_ms: int = broker.config["connections.max.reauth.ms"]
    delay = broker.config["connection.failed.authentication.delay.ms"] / 1000

    def fail_later(conn: ConnectionInfo, answer: Callable[[], None], mechanism: str, reason: str) -> None:
        METRICS.authentications.labels(mechanism, "failure").inc()
        logs.warn("sasl.authentication_failed", mechanism=mechanism, reason=reason,
                  client=f"{conn.client_host}:{conn.client_port}", conn=conn.conn_id)
        conn.failed_auth = (delay, answer)

    def handshake(req: Request[SaslHandshakeRequest]) -> None:
        conn = req.conn
        state: SaslState | None = conn.sasl
        if state is None:
            # A PLAINTEXT or SSL listener: no SASL here.
            req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
            return
        mechanism = req.body.mechanism
        if state.exchange is not None and state.mechanism is not None and state.exchange_pending:
            req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms))
            return
        reauthenticating = conn.authenticated
        if mechanism not in mechanisms or (reauthenticating and mechanism != state.mechanism):
            response = SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
            fail_later(conn, lambda: req.reply.set(response), mechanism[:40], "unsupported mechanism")
            return
        if reauthenticating and req.version == 0:
            req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms))
            return
        state.mechanism = mechanism
        state.handshake_version = req.version
        state.exchange = new_exchange(mechanism, store)
        state.exchange_pending = True
        conn.raw_sasl = req.version == 0
        req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=mechanisms))

    def step(conn: ConnectionInfo, token: bytes) -> tuple[bytes | None, str | None, int]:
        """Runs one token through the exchange: (answer, failure, session lifetime ms)."""
        state: SaslState = conn.sasl
        assert state.exchange is not None and state.mechanism is not None
        try:
            answer = state.exchange.step(token)
        except AuthenticationFailed as exc:
            state.exchange_pending = False
            return None, str(exc), 0
        user = state.exchange.user
        if user is None:
            return answer, None, 0
        state.exchange_pending = False
        principal = "User:" + user
        if state.principal is not None and principal != state.principal:
            return None, "Cannot change principals during re-authentication", 0
        state.principal = principal
        conn.principal = principal
        conn.authenticated = True
        conn.raw_sasl = False
        lifetime = reauth_ms
        conn.session_expires = time.monotonic() + lifetime / 1000 if lifetime else 0.0
        METRICS.authentications.labels(state.mechanism, "success").inc()
        logs.event("sasl.authenticated", mechanism=state.mechanism, principal=principal, conn=conn.conn_id,
                   reauthentication=state.authentications > 0)
        state.authentications += 1
        return answer, None, lifetime

    def authenticate(req: Request[SaslAuthenticateRequest]) -> None:
        conn = req.conn
        state: SaslState | None = conn.sasl
        if state is None or state.exchange is None or not state.exchange_pending or state.handshake_version == 0:
            response = SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                error_message="SaslAuthenticate without a SaslHandshake")
            fail_later(conn, lambda: req.reply.set(response), state.mechanism if state and state.mechanism
                       else "none", "no handshake")
            return
        answer, failure, lifetime = step(conn, req.body.auth_bytes)
        if failure is not None or answer is None:
            response = SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                error_message=failure)
            fail_later(conn, lambda: req.reply.set(response), state.mechanism or "none", failure or "")
            return
        req.reply.set(SaslAuthenticateResponse(error_code=ErrorCode.NONE, auth_bytes=answer,
                                               session_lifetime_ms=lifetime))

    def raw_token(token: bytes, conn: ConnectionInfo) -> Reply:
        reply = Reply(None, 0, 0, False)
        answer, failure, _ = step(conn, token)
        if failure is not None or answer is None:
            state: SaslState = conn.sasl
            fail_later(conn, reply.set_close, state.mechanism or "none", failure or "")
        else:
            reply.set_raw(answer)
        return reply

    router.register(SaslHandshakeRequest, SaslHandshakeResponse, handshake)
    router.register(SaslAuthenticateRequest, SaslAuthenticateResponse, authenticate)
    router.raw_sasl_token = raw_token
