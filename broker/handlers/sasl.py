"""SaslHandshake and SaslAuthenticate: the SASL exchange of SASL_PLAINTEXT and SASL_SSL listeners,
and the bare tokens that follow SaslHandshake v0.

A failed exchange is answered with SASL_AUTHENTICATION_FAILED (v0 tokens: by closing) after
``connection.failed.authentication.delay.ms``, and the connection closes, as Kafka does."""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Request
from broker.observability import logs
from broker.observability.metrics import METRICS
from broker.security.credentials import CredentialStore
from broker.security.properties import ListenerSasl
from broker.security.sasl import SaslState, new_exchange
from broker.security.sasl_failure import AuthenticationFailed
from broker.security.tokens import DelegationTokens
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse


class SaslApis:
    """The SASL exchange, over the credential store."""

    def __init__(self, listeners: dict[str, ListenerSasl], store: CredentialStore, reauth_ms: int,
                 failed_delay_s: float, tokens: DelegationTokens | None = None) -> None:
        """``listeners``: each SASL listener's mechanisms and their settings, by listener name."""
        self.listeners = listeners
        self.store = store
        self.tokens = tokens
        self.reauth_ms = reauth_ms
        self.delay = failed_delay_s

    def fail_later(self, conn: ConnectionInfo, answer: Callable[[], None], mechanism: str, reason: str) -> None:
        METRICS.authentications.labels(mechanism, "failure").inc()
        logs.warn("sasl.authentication_failed", mechanism=mechanism, reason=reason,
                  client=f"{conn.client_host}:{conn.client_port}", conn=conn.conn_id)
        conn.failed_auth = (self.delay, answer)

    def settings(self, conn: ConnectionInfo) -> ListenerSasl:
        return self.listeners.get(conn.listener) or ListenerSasl([])

    def handshake(self, req: Request[SaslHandshakeRequest]) -> None:
        conn = req.conn
        state: SaslState | None = conn.sasl
        settings = self.settings(conn)
        mechanisms = settings.mechanisms
        if state is None:
            # A PLAINTEXT or SSL listener: no SASL here.
            req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
            return
        mechanism = req.body.mechanism
        if state.exchange is not None and state.mechanism is not None and state.exchange_pending:
            req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms))
            return
        reauthenticating = conn.authenticated
        if mechanism not in mechanisms:
            response = SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=mechanisms)
            self.fail_later(conn, lambda: req.reply.set(response), mechanism[:40], "unsupported mechanism")
            return
        if reauthenticating and req.version == 0:
            req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=mechanisms))
            return
        if reauthenticating and mechanism != state.mechanism:
            # Kafka's SaslServerAuthenticator accepts the handshake of an enabled mechanism and
            # refuses the re-authentication at its first token, closing the connection unanswered.
            state.bad_reauth_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                          f"re-authentication of mechanism '{state.mechanism}'")
            state.exchange_pending = True
            req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=mechanisms))
            return
        state.mechanism = mechanism
        state.handshake_version = req.version
        state.exchange = new_exchange(mechanism, self.store,
                                      None if self.tokens is None else self.tokens.scram_lookup, settings)
        state.exchange_pending = True
        conn.raw_sasl = req.version == 0
        req.reply.set(SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=mechanisms))

    def step(self, conn: ConnectionInfo, token: bytes) -> tuple[bytes | None, str | None, int]:
        """Runs one token through the exchange: (answer, failure, session lifetime ms)."""
        state = conn.sasl
        assert state is not None and state.exchange is not None and state.mechanism is not None
        try:
            answer = state.exchange.step(token)
        except AuthenticationFailed as exc:
            state.exchange_pending = False
            state.failure_detail = exc.detail
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
        expiry = state.exchange.credential_expiry_ms
        conn.token_authenticated = state.exchange.delegation_token
        lifetime = self.settings(conn).reauth_ms.get(state.mechanism, self.reauth_ms)
        if expiry is not None:
            # Kafka's session ends with the credential (SaslServerAuthenticator: a delegation
            # token, an OAuth token): an expired one's session is over at once, and the next
            # request closes the connection.
            left = max(0, expiry - int(time.time() * 1000))
            lifetime = min(lifetime, left) if lifetime else left
            conn.session_expires = time.monotonic() + lifetime / 1000
        else:
            conn.session_expires = time.monotonic() + lifetime / 1000 if lifetime else 0.0
        METRICS.authentications.labels(state.mechanism, "success").inc()
        logs.event("sasl.authenticated", mechanism=state.mechanism, principal=principal, conn=conn.conn_id,
                   reauthentication=state.authentications > 0, token=conn.token_authenticated)
        state.authentications += 1
        return answer, None, lifetime

    def authenticate(self, req: Request[SaslAuthenticateRequest]) -> None:
        conn = req.conn
        state: SaslState | None = conn.sasl
        if state is None or state.exchange is None or not state.exchange_pending or state.handshake_version == 0:
            response = SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                error_message="SaslAuthenticate without a SaslHandshake")
            self.fail_later(conn, lambda: req.reply.set(response), state.mechanism if state and state.mechanism
                       else "none", "no self.handshake")
            return
        if state.bad_reauth_mechanism is not None:
            state.exchange_pending = False
            self.fail_later(conn, req.reply.set_close, state.mechanism or "none", state.bad_reauth_mechanism)
            return
        answer, failure, lifetime = self.step(conn, req.body.auth_bytes)
        if failure is not None or answer is None:
            response = SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                error_message=failure)
            self.fail_later(conn, lambda: req.reply.set(response), state.mechanism or "none",
                            state.failure_detail or failure or "")
            return
        req.reply.set(SaslAuthenticateResponse(error_code=ErrorCode.NONE, auth_bytes=answer,
                                               session_lifetime_ms=lifetime))

    def raw_token(self, token: bytes, conn: ConnectionInfo) -> Reply:
        reply = Reply(None, 0, 0, False)
        answer, failure, _ = self.step(conn, token)
        if failure is not None or answer is None:
            mechanism = conn.sasl.mechanism if conn.sasl is not None else None
            detail = conn.sasl.failure_detail if conn.sasl is not None else None
            self.fail_later(conn, reply.set_close, mechanism or "none", detail or failure or "")
        else:
            reply.set_raw(answer)
        return reply
