"""One OAUTHBEARER exchange over the wire, as the differential tests of unsecured and signed tokens
make it: the client's first message, the broker's answer, and (after a JSON error) the ``^A`` that
ends the exchange."""

from __future__ import annotations

from typing import Any

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest


def client_message(token: str, authzid: str = "", extensions: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}{extensions}\x01\x01".encode()


def exchange(port: int, first: bytes) -> dict[str, Any] | str:
    try:
        return _exchange(port, first)
    except ConnectionError:
        return "connection closed without an answer"


def _exchange(port: int, first: bytes) -> dict[str, Any]:
    with WireClient("127.0.0.1", port, timeout=20.0) as c:
        assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == 0
        answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=first))
        out: dict[str, Any] = {"error_code": answer.error_code, "auth_bytes": bytes(answer.auth_bytes),
                               # the token's remaining life, to the minute (the two ask at different moments)
                               "session_minutes": round(answer.session_lifetime_ms / 60_000)}
        if answer.error_code == 0 and answer.auth_bytes:
            final = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=b"\x01"))
            out["after ^A"] = final.error_code
        return out
