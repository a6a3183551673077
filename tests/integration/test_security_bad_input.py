"""Hostile and unusual input on the security paths: each bad connection is closed alone, logged
once, and everyone else is served. Also the wire details real clients rarely use: SaslHandshake v0
(bare tokens), re-authentication within connections.max.reauth.ms (KIP-368), and what happens to
a session that was not renewed."""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.security import USERS, SecureBroker

pytestmark = pytest.mark.timeout(60)
REAUTH_MS = 1500


SECURE_OVERRIDES = {
    "ssl.handshake.timeout.ms": "1000", "connections.max.reauth.ms": str(REAUTH_MS),
    "connection.failed.authentication.delay.ms": "50"}


def _client(secure: SecureBroker, listener: str) -> WireClient:
    client = WireClient("127.0.0.1", secure.ports[listener])
    if listener.endswith("SSL"):
        ctx = ssl.create_default_context(cafile=str(secure.pki.ca))
        client.sock = ctx.wrap_socket(client.sock, server_hostname="localhost")
    return client


def _plain_token(user: str = "alice", password: str | None = None) -> bytes:
    return f"\0{user}\0{USERS[user] if password is None else password}".encode()


def _login(client: WireClient, version: int = 2) -> object:
    assert client.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    return client.call(ApiKey.SaslAuthenticate, version, SaslAuthenticateRequest(auth_bytes=_plain_token()))


def _closed(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(4096):
                return True
    except (ConnectionResetError, ssl.SSLError, ssl.SSLEOFError):
        return True
    except TimeoutError:
        return False


def _served(secure: SecureBroker) -> None:
    """Another client, on the SASL_SSL listener, is served as before."""
    with _client(secure, "SASL_SSL") as c:
        assert _login(c).error_code == 0  # type: ignore[attr-defined]
        assert [b.node_id for b in c.call(ApiKey.Metadata, 12, MetadataRequest(topics=None)).brokers] == [1]


def _logged_once(secure: SecureBroker, event: str, before: int) -> None:
    wait_for(lambda: secure.process.log().count(event) > before, 30, f"{event!r} logged",
             seen=lambda: secure.process.log()[-2000:])
    # A second line for the same close would follow at once. That it does not come has no
    # condition to wait on: a broker that logs twice is given this moment to show it.
    time.sleep(0.1)
    assert secure.process.log().count(event) == before + 1


def _frame(api_key: int, version: int, body: bytes, corr: int = 7) -> bytes:
    payload = struct.pack(">hhih", api_key, version, corr, 4) + b"evil" + body
    return struct.pack(">i", len(payload)) + payload


SASL_CASES = {
    "malformed PLAIN token": ("PLAIN", b"no-separators-at-all"),
    "PLAIN token of invalid UTF-8": ("PLAIN", b"\0\xff\xfe\0\xfa"),
    "malformed SCRAM client-first": ("SCRAM-SHA-512", b"\xff\xfe\xfd garbage"),
    "SCRAM client-first with a bad username escape": ("SCRAM-SHA-256", b"n,,n=al=ice,r=abc"),
}


@pytest.mark.parametrize("case", list(SASL_CASES))
def test_malformed_sasl_token_fails_authentication_and_closes(secure: SecureBroker, case: str) -> None:
    mechanism, token = SASL_CASES[case]
    before = secure.process.log().count("sasl.authentication_failed")
    with _client(secure, "SASL_PLAINTEXT") as c:
        assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
        started = time.monotonic()
        answer = c.call(ApiKey.SaslAuthenticate, 1, SaslAuthenticateRequest(auth_bytes=token))
        assert answer.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert time.monotonic() - started >= 0.04  # connection.failed.authentication.delay.ms
        assert _closed(c.sock)
    _logged_once(secure, "sasl.authentication_failed", before)
    _served(secure)


RAW_CASES = {
    "oversized SaslAuthenticate before authentication": b"",
    "handshake then garbage": b"\x00\x00\x00\x10" + b"\xde\xad\xbe\xef" * 4,
    "Metadata before authentication": _frame(ApiKey.Metadata, 4, b"\x00\x00\x00\x00\x00"),
    "SaslAuthenticate without a handshake": b"",
}


@pytest.mark.parametrize("case", list(RAW_CASES))
def test_bad_sasl_sequence_closes_only_that_connection(secure: SecureBroker, case: str) -> None:
    event = "sasl.authentication_failed" if "without a handshake" in case else "connection.closed"
    before = secure.process.log().count(event)
    with _client(secure, "SASL_SSL") as c:
        if case.startswith("oversized"):
            size = 600 * 1024  # above sasl.server.max.receive.size
            c.sock.sendall(struct.pack(">i", size) + b"\0" * 1024)
        elif case == "SaslAuthenticate without a handshake":
            assert c.call(ApiKey.SaslAuthenticate, 1, SaslAuthenticateRequest(auth_bytes=_plain_token())) \
                .error_code == 34  # ILLEGAL_SASL_STATE
        else:
            if case.startswith("handshake"):
                assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            c.sock.sendall(RAW_CASES[case])
        assert _closed(c.sock)
    _logged_once(secure, event, before)
    _served(secure)


def test_tls_to_the_plaintext_port_closes_that_connection(secure: SecureBroker) -> None:
    before = secure.process.log().count("connection.closed")
    raw = socket.create_connection(("127.0.0.1", secure.ports["SASL_PLAINTEXT"]), timeout=5)
    ctx = ssl.create_default_context(cafile=str(secure.pki.ca))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        ctx.wrap_socket(raw, server_hostname="localhost")
    raw.close()
    _logged_once(secure, "connection.closed", before)
    _served(secure)


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_plaintext_to_a_tls_port_closes_that_connection(secure: SecureBroker, listener: str) -> None:
    before = secure.process.log().count("TLS handshake failed")
    with socket.create_connection(("127.0.0.1", secure.ports[listener]), timeout=5) as s:
        s.sendall(_frame(ApiKey.ApiVersions, 0, b""))
        assert _closed(s)
    _logged_once(secure, "TLS handshake failed", before)
    _served(secure)


def test_slow_tls_handshake_is_cut_off(secure: SecureBroker) -> None:
    before = secure.process.log().count("TLS handshake not finished")
    with socket.create_connection(("127.0.0.1", secure.ports["SASL_SSL"]), timeout=5) as s:
        s.sendall(b"\x16\x03\x01")  # the start of a ClientHello, and then nothing
        _served(secure)  # others are served while this handshake hangs
        assert _closed(s, timeout=30)
    _logged_once(secure, "TLS handshake not finished", before)
    # Cut off by ssl.handshake.timeout.ms (1 s here), not by the 10 s default.
    assert "TLS handshake not finished within 1.0s" in secure.process.log()


def test_a_tls_client_that_resets_while_answers_are_written_ends_only_its_connection(secure: SecureBroker) -> None:
    """Many pipelined requests, a receive window too small for the answers, then a reset: the
    broker is inside a TLS write when the socket breaks. Only that connection ends."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(5)
    raw.connect(("127.0.0.1", secure.ports["SSL"]))
    tls = ssl.create_default_context(cafile=str(secure.pki.ca)).wrap_socket(raw, server_hostname="localhost")
    tls.sendall(_frame(ApiKey.ApiVersions, 0, b"") * 3000)
    time.sleep(0.5)  # the answers fill both windows; the broker waits to write more
    tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    tls.close()  # an RST: the pending write fails
    # That the broker does not die of it has no condition to wait on: a broker that would crash
    # is given this moment to do so.
    time.sleep(0.3)
    assert secure.process.proc is not None and secure.process.proc.poll() is None, secure.process.log()[-3000:]
    _served(secure)


def test_sasl_handshake_v0_then_bare_plain_token(secure: SecureBroker) -> None:
    with _client(secure, "SASL_PLAINTEXT") as c:
        assert c.call(ApiKey.SaslHandshake, 0, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        token = _plain_token()
        c.sock.sendall(struct.pack(">i", len(token)) + token)
        assert c.recv_frame() == b""  # PLAIN answers with an empty token
        assert c.call(ApiKey.ApiVersions, 0, ApiVersionsRequest()).error_code == 0
    with _client(secure, "SASL_PLAINTEXT") as c:
        assert c.call(ApiKey.SaslHandshake, 0, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        token = _plain_token(password="wrong")
        c.sock.sendall(struct.pack(">i", len(token)) + token)
        assert _closed(c.sock)  # v0 has no error frame: the connection closes


def test_reauthentication_renews_the_session_and_an_expired_one_is_closed(secure: SecureBroker) -> None:
    """Each claim is checked only where the client's own clock proves it: a session began after
    the request that opened it was sent and before its answer came back, so it ends between those
    two instants plus its lifetime. An attempt whose probe a busy machine delayed past the renewed
    session's earliest end proves nothing and is made again."""
    lifetime = REAUTH_MS / 1000
    for _attempt in range(5):
        with _client(secure, "SASL_SSL") as c:
            first = _login(c)
            first_latest_end = time.monotonic() + lifetime
            assert first.session_lifetime_ms == REAUTH_MS  # type: ignore[attr-defined]
            time.sleep(lifetime * 0.5)  # the scenario: renew halfway through the session
            renewing = time.monotonic()
            renewed = _login(c)  # KIP-368: the same mechanism and user on the same connection
            renewed_latest_end = time.monotonic() + lifetime
            assert renewed.error_code == 0 and renewed.session_lifetime_ms == REAUTH_MS  # type: ignore[attr-defined]
            time.sleep(max(0.0, first_latest_end - time.monotonic()) + 0.05)
            try:  # past the first session's end, within the renewed one (if answered in time): served
                brokers = c.call(ApiKey.Metadata, 12, MetadataRequest(topics=None)).brokers
            except (ConnectionError, OSError):
                brokers = None
            if time.monotonic() >= renewing + lifetime:
                continue  # the probe may have come after the renewed session too: proves nothing
            assert brokers, "closed within the renewed session"
            time.sleep(max(0.0, renewed_latest_end - time.monotonic()) + 0.2)
            c.send(ApiKey.Metadata, 12, MetadataRequest(topics=None))  # past every session's end
            assert _closed(c.sock)
            break
    else:
        pytest.fail("five attempts in a row too slow to probe within a renewed session")
    _served(secure)
