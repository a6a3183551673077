"""The server's side of one SASL exchange (PLAIN, SCRAM or OAUTHBEARER), and the SASL state of a
connection.

Kafka's rules: the mechanism is named by SaslHandshake; its tokens travel in SaslAuthenticate
(handshake v1) or as raw size-prefixed frames (handshake v0); a finished exchange makes the
principal ``User:<name>``; with ``connections.max.reauth.ms`` the session has a lifetime and the
client re-authenticates (KIP-368) with the same mechanism and principal."""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass

from broker.security.credentials import CredentialStore
from broker.security.gssapi_sasl import GssapiExchange
from broker.security.oauthbearer import OAuthBearerExchange, UnsecuredValidator
from broker.security.properties import ListenerSasl
from broker.security.sasl_failure import AuthenticationFailed
from broker.security.scram import ScramError, ScramServer, TokenLookup


class PlainExchange:
    """RFC 4616: one token ``authzid NUL user NUL password``, checked against the listener's JAAS
    users (``user_<name>="<password>"``, as Kafka's PLAIN checks them) or, without any, against the
    SCRAM credentials."""

    def __init__(self, store: CredentialStore, users: dict[str, str] | None = None) -> None:
        self.store = store
        self.users = users
        self.user: str | None = None
        self.credential_expiry_ms: int | None = None
        self.delegation_token = False

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
        if self.users is not None:
            expected = self.users.get(user)
            valid = expected is not None and hmac.compare_digest(expected.encode(), password.encode())
        else:
            valid = self.store.check_password(user, password)
        if not valid:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.user = user
        return b""


class ScramExchange:
    def __init__(self, mechanism: str, store: CredentialStore, tokens: TokenLookup | None = None) -> None:
        self.server = ScramServer(mechanism, store.lookup, tokens)
        self.stage = 0
        self.user: str | None = None
        # When the credential expires (ms; a delegation token's expiry), which ends the session.
        self.credential_expiry_ms: int | None = None
        self.delegation_token = False

    def step(self, token: bytes) -> bytes:
        try:
            if self.stage == 0:
                self.stage = 1
                return self.server.first(token)
            if self.stage == 1:
                self.stage = 2
                answer = self.server.final(token)
                self.user = self.server.authorization_id
                self.credential_expiry_ms = self.server.token_expiry_ms
                self.delegation_token = self.server.token_expiry_ms is not None
                return answer
        except ScramError as exc:
            raise AuthenticationFailed(str(exc)) from None
        raise AuthenticationFailed("Unexpected SCRAM token after authentication")


Exchange = PlainExchange | ScramExchange | OAuthBearerExchange | GssapiExchange


def new_exchange(mechanism: str, store: CredentialStore, tokens: TokenLookup | None = None,
                 listener: ListenerSasl | None = None) -> Exchange:
    if mechanism == "PLAIN":
        return PlainExchange(store, listener.plain_users if listener is not None else None)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerExchange(listener.oauth if listener is not None else UnsecuredValidator(),
                                   lambda: int(time.time() * 1000))
    if mechanism == "GSSAPI":
        assert listener is not None and listener.gssapi is not None  # checked at startup
        return GssapiExchange(listener.gssapi)
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
    # Why the last exchange failed, when that is more than the client is told (logged).
    failure_detail: str | None = None
    authentications: int = 0
    # A re-authentication's handshake named another mechanism than the session's: its first token
    # is refused (why, logged).
    bad_reauth_mechanism: str | None = None
