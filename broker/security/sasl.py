"""The server's side of one SASL exchange (PLAIN or SCRAM), and the SASL state of a connection.

Kafka's rules: the mechanism is named by SaslHandshake; its tokens travel in SaslAuthenticate
(handshake v1) or as raw size-prefixed frames (handshake v0); a finished exchange makes the
principal ``User:<name>``; with ``connections.max.reauth.ms`` the session has a lifetime and the
client re-authenticates (KIP-368) with the same mechanism and principal."""

from __future__ import annotations

from dataclasses import dataclass

from broker.security.credentials import CredentialStore
from broker.security.scram import ScramError, ScramServer, TokenLookup


class AuthenticationFailed(Exception):
    """The exchange failed: the message is given to the client in SASL_AUTHENTICATION_FAILED."""


class PlainExchange:
    """RFC 4616: one token ``authzid NUL user NUL password``."""

    def __init__(self, store: CredentialStore) -> None:
        self.store = store
        self.user: str | None = None
        self.token_expiry_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        if self.user is not None:
            raise AuthenticationFailed("Unexpected SASL/PLAIN token after authentication")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        if not self.store.check_password(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.user = user
        return b""


class ScramExchange:
    def __init__(self, mechanism: str, store: CredentialStore, tokens: TokenLookup | None = None) -> None:
        self.server = ScramServer(mechanism, store.lookup, tokens)
        self.stage = 0
        self.user: str | None = None
        # Set when the client authenticated with a delegation token: the token's expiry (ms).
        self.token_expiry_ms: int | None = None

    def step(self, token: bytes) -> bytes:
        try:
            if self.stage == 0:
                self.stage = 1
                return self.server.first(token)
            if self.stage == 1:
                self.stage = 2
                answer = self.server.final(token)
                self.user = self.server.authorization_id
                self.token_expiry_ms = self.server.token_expiry_ms
                return answer
        except ScramError as exc:
            raise AuthenticationFailed(str(exc)) from None
        raise AuthenticationFailed("Unexpected SCRAM token after authentication")


Exchange = PlainExchange | ScramExchange


def new_exchange(mechanism: str, store: CredentialStore, tokens: TokenLookup | None = None) -> Exchange:
    if mechanism == "PLAIN":
        return PlainExchange(store)
    return ScramExchange(mechanism, store, tokens)


@dataclass
class SaslState:
    """What a SASL connection has negotiated so far."""

    mechanism: str | None = None
    handshake_version: int = 1
    exchange: Exchange | None = None
    # A handshake named the mechanism and its exchange has not finished (or failed) yet.
    exchange_pending: bool = False
    # The principal of the first authentication: a re-authentication must keep it.
    principal: str | None = None
    authentications: int = 0
