"""A small trio-native client of etcd's v3 JSON gateway (``/v3/kv/*``, ``/v3/lease/*``).

etcd 3.4 serves its gRPC API as JSON over HTTP/1.1: keys and values are base64, 64-bit numbers are
strings. Speaking that directly keeps the client inside trio (no threads, no second event loop) and
needs no dependency: the maintained Python clients are either synchronous (etcd3gw, on
``requests``) or gRPC-based with their own threads. One request per connection (``Connection:
close``): the node sends a handful of requests a second at most, and a fresh connection never
carries state from a request that timed out.

**Security.** An ``https://`` endpoint is reached over TLS with the given ``ssl.SSLContext`` (the
CA certificates etcd's certificate must chain to, the host name it must name, and this node's
client certificate; built from ``etcd.ssl.*`` by ``broker.security.etcd_access``). With a user
name and password the client authenticates (``/v3/auth/authenticate``) before its first request
and sends the token it got in the ``Authorization`` header of every request; etcd drops tokens
(a simple token unused for ``--auth-token-ttl``, those of a user whose password is set,
a JWT when it expires), so a request refused for its token ("invalid auth token") authenticates
again and is sent once more (it was refused before etcd applied anything).
A refusal that waiting cannot cure, a wrong password, a role without the prefix, a certificate
that one side does not trust, is an ``EtcdAccessError``: the node stops at startup on it
(``broker.security.etcd_access.check_access``) and, later, retries and warns as for etcd being away.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import trio

from broker.observability import logs


class EtcdError(Exception):
    """etcd could not be reached, or answered with an error."""


class EtcdAccessError(EtcdError):
    """etcd refused this node: its credentials, its certificate, its rights on the key space, or
    the endpoint speaks another protocol than the one configured. Waiting does not cure it."""


class _TokenRefused(EtcdError):
    """etcd no longer accepts the token sent (expired, forgotten, or older than a change of users or
    roles), or wants one where none was sent."""


# What etcd answers (the gRPC status message, in the JSON error) when the token is to be renewed;
# "user name is empty": no token was sent to an etcd whose auth was enabled since.
_RENEW = ("invalid auth token", "revision of auth store is old", "user name is empty")
# Refusals that a new token does not change.
_REFUSED = ("authentication failed", "permission denied", "user name not found", "role name not found",
            "CommonName of client", "Client sent an HTTP request to an HTTPS server")
_AUTH_NOT_ENABLED = "authentication is not enabled"


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def prefix_end(prefix: str) -> bytes:
    """The range end that covers every key starting with ``prefix`` (etcd's ``WithPrefix``)."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return b"\0"
    raw[-1] += 1
    return bytes(raw)


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


def _kv(entry: dict[str, Any]) -> KeyValue:
    return KeyValue(unb64(entry["key"]).decode(), unb64(entry.get("value", "")), int(entry.get("create_revision", 0)),
                    int(entry.get("mod_revision", 0)), int(entry.get("lease", 0)))


def _decode_chunked(body: bytes) -> bytes:
    out = bytearray()
    pos = 0
    while pos < len(body):
        line_end = body.index(b"\r\n", pos)
        size = int(body[pos:line_end].split(b";")[0], 16)
        if size == 0:
            break
        start = line_end + 2
        out += body[start:start + size]
        pos = start + size + 2
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One etcd client URL: ``http://host:port`` or ``https://host:port`` (no scheme: http)."""

    scheme: str
    host: str
    port: int

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def loopback(self) -> bool:
        """Traffic to it never leaves this host (a loopback address, or ``localhost``)."""
        if self.host.lower() in ("localhost", "localhost.localdomain") or self.host.lower().endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: wherever DNS sends it

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_endpoints(text: str) -> list[Endpoint]:
    """``etcd.endpoints``: comma-separated URLs; raises ValueError naming a bad one."""
    endpoints = []
    for url in (e.strip() for e in text.split(",")):
        if not url:
            continue
        parts = urlsplit(url if "://" in url else "http://" + url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"etcd.endpoints: {url!r} is neither http:// nor https://")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"etcd.endpoints: {url!r} has no valid port") from None
        endpoints.append(Endpoint(parts.scheme, parts.hostname or "127.0.0.1", port or 2379))
    return endpoints


def _tls_failure(exc: BaseException) -> EtcdAccessError | None:
    """The refusal a failed TLS handshake stands for, if it was one (not a lost connection)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    if isinstance(cause, ssl.SSLCertVerificationError):
        return EtcdAccessError(f"etcd's certificate is not trusted: {cause.verify_message} "
                               "(etcd.ssl.truststore.*, and the endpoint's host name must be in the certificate)")
    reason = (cause.reason or str(cause)).upper()
    if "ALERT" in reason and any(word in reason for word in ("CERTIFICATE", "UNKNOWN_CA", "HANDSHAKE_FAILURE",
                                                             "ACCESS_DENIED")):
        return EtcdAccessError(f"etcd refused this node's TLS client certificate ({cause.reason}; "
                               "etcd.ssl.keystore.*, issued by a CA in etcd's --trusted-ca-file)")
    if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER_FAILURE" in reason or "PACKET_LENGTH_TOO_LONG" in reason:
        return EtcdAccessError(f"the endpoint does not speak TLS ({cause.reason}): use http:// for it, or "
                               "start etcd with --cert-file and --key-file")
    return None


class EtcdClient:
    def __init__(self, endpoints: str, timeout_s: float = 2.0, *, ssl_context: ssl.SSLContext | None = None,
                 username: str = "", password: str = "") -> None:
        """``ssl_context``: for the ``https://`` endpoints (default: the system's CA certificates, no
        client certificate); ``username`` and ``password``: etcd's auth (none by default)."""
        self.endpoints = parse_endpoints(endpoints)
        if not self.endpoints:
            raise ValueError("etcd.endpoints names no endpoint")
        self.timeout_s = timeout_s
        self._current = 0
        self._ssl_context = ssl_context
        self.username = username
        self._password = password
        self._token: str | None = None
        # etcd answered that its auth is off: requests go without a token until it asks for one.
        self._auth_off = False
        self._auth_lock = trio.Lock()
        self.authentications = 0

    def _context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    async def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POSTs ``body`` to ``path``, trying each endpoint once, starting with the one that last worked.
        Raises EtcdAccessError when no endpoint answered and one of them refused this node."""
        errors = []
        refused = False
        for attempt in range(len(self.endpoints)):
            index = (self._current + attempt) % len(self.endpoints)
            endpoint = self.endpoints[index]
            try:
                with trio.fail_after(self.timeout_s):
                    answer = await self._authorized(endpoint, path, body)
            except (OSError, trio.TooSlowError, trio.BrokenResourceError, ValueError, IndexError, EtcdError) as exc:
                # BrokenResourceError: the connection was reset mid-answer (etcd restarting), or a
                # TLS handshake failed (then it may be a refusal).
                refusal = exc if isinstance(exc, EtcdAccessError) else _tls_failure(exc)
                refused = refused or refusal is not None
                errors.append(f"{endpoint}: {refusal if refusal is not None else repr(exc)}")
                continue
            self._current = index
            return answer
        raise (EtcdAccessError if refused else EtcdError)("; ".join(errors))

    async def _authorized(self, endpoint: Endpoint, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The request with this node's token; a refused token is renewed and the request sent once more."""
        if not self.username:
            try:
                return await self._post(endpoint, path, body, None)
            except _TokenRefused as exc:
                raise EtcdAccessError(f"{exc} (etcd's auth is on: set etcd.username and etcd.password)") from None
        for attempt in range(2):
            token = await self._token_for(endpoint)
            try:
                return await self._post(endpoint, path, body, token)
            except _TokenRefused as exc:
                if attempt:
                    raise EtcdError(f"etcd refused a token it had just issued: {exc}") from None
                logs.debug("cluster.etcd_token_refused", endpoint=str(endpoint), error=str(exc)[:200])
                self._forget(token)
        raise AssertionError("unreachable")

    async def _token_for(self, endpoint: Endpoint) -> str | None:
        async with self._auth_lock:
            if self._token is None and not self._auth_off:
                try:
                    answer = await self._post(endpoint, "/v3/auth/authenticate",
                                              {"name": self.username, "password": self._password}, None)
                except EtcdError as exc:
                    if _AUTH_NOT_ENABLED not in str(exc):
                        raise
                    self._auth_off = True
                    logs.warn("cluster.etcd_auth_not_enabled", endpoint=str(endpoint), user=self.username,
                              note="etcd.username is set but etcd's auth is off: requests go unauthenticated")
                    return None
                self._token = str(answer["token"])
                self.authentications += 1
                logs.event("cluster.etcd_authenticated", endpoint=str(endpoint), user=self.username,
                           renewals=self.authentications - 1)
            return self._token

    def _forget(self, token: str | None) -> None:
        """Drops ``token`` (unless another task has already replaced it) and asks etcd again."""
        if self._token == token:
            self._token = None
        self._auth_off = False

    async def _post(self, endpoint: Endpoint, path: str, body: dict[str, Any], token: str | None) -> dict[str, Any]:
        payload = json.dumps(body).encode()
        auth = f"Authorization: {token}\r\n" if token else ""
        head = (f"POST {path} HTTP/1.1\r\nHost: {endpoint.host}:{endpoint.port}\r\nContent-Type: application/json\r\n"
                f"{auth}Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode()
        tcp = await trio.open_tcp_stream(endpoint.host, endpoint.port)
        stream: trio.abc.Stream = tcp
        if endpoint.tls:
            # server_hostname: the certificate must name the host the endpoint names (with the
            # context's check_hostname); https_compatible: etcd closes without close_notify.
            stream = trio.SSLStream(tcp, self._context(), server_hostname=endpoint.host, https_compatible=True)
        async with stream:
            await stream.send_all(head + payload)
            received = bytearray()
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                received += chunk
        header_end = received.find(b"\r\n\r\n")
        if header_end < 0:
            raise EtcdError("truncated HTTP response" if received else
                            "connection closed without an answer (an https:// endpoint named http://?)")
        lines = bytes(received[:header_end]).decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        content = bytes(received[header_end + 4:])
        if headers.get("transfer-encoding", "").lower() == "chunked":
            content = _decode_chunked(content)
        # A streaming call (lease keepalive) answers newline-separated messages; the first one counts.
        text = content.decode(errors="replace").strip().split("\n")[0] if content.strip() else "{}"
        if status != 200 and not text.startswith("{"):
            # Not etcd's JSON: the gateway's own refusals (a client certificate with a Common Name,
            # plain HTTP to a TLS port) are plain text.
            error = f"HTTP {status}: {text[:300]}"
            raise (EtcdAccessError if any(r in text for r in _REFUSED) else EtcdError)(error)
        answer: dict[str, Any] = json.loads(text)
        if status != 200 or "error" in answer:
            error = f"HTTP {status}: {text[:300]}"
            if any(r in text for r in _RENEW):
                raise _TokenRefused(error)
            raise (EtcdAccessError if any(r in text for r in _REFUSED) else EtcdError)(error)
        return answer.get("result", answer)

    async def verify_access(self, prefix: str) -> None:
        """etcd accepts this node and lets it read and write the keys under ``prefix``: a
        transaction whose comparison never holds (a version below 0), so etcd checks the rights of
        both branches (a put, a range over the prefix) and changes nothing. Raises EtcdAccessError
        when refused, EtcdError when etcd could not be asked."""
        key = prefix.rstrip("/") + "/"
        await self.call("/v3/kv/txn", {
            "compare": [{"key": b64(key), "target": "VERSION", "result": "LESS", "version": "0"}],
            "success": [{"request_put": {"key": b64(key + "access-check"), "value": ""}}],
            "failure": [{"request_range": {"key": b64(key), "range_end": b64(prefix_end(key))}}],
        })

    # ---- leases -------------------------------------------------------------------------------

    async def grant(self, ttl_s: int) -> int:
        return int((await self.call("/v3/lease/grant", {"TTL": ttl_s}))["ID"])

    async def keepalive(self, lease: int) -> int:
        """Renews ``lease``; returns its new TTL in seconds, 0 when it has already expired."""
        return int((await self.call("/v3/lease/keepalive", {"ID": str(lease)})).get("TTL", 0))

    async def revoke(self, lease: int) -> None:
        await self.call("/v3/lease/revoke", {"ID": str(lease)})

    # ---- keys ---------------------------------------------------------------------------------

    async def put(self, key: str, value: bytes | str, lease: int = 0) -> int:
        body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int((await self.call("/v3/kv/put", body))["header"]["revision"])

    async def get_prefix(self, prefix: str) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` and the store's revision they were read at."""
        answer = await self.call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(prefix_end(prefix))})
        return [_kv(e) for e in answer.get("kvs", [])], int(answer["header"]["revision"])

    async def create_if_absent(self, key: str, value: bytes | str, lease: int) -> int | None:
        """Puts ``key`` only if it does not exist; the revision that created it, or None."""
        answer = await self.call("/v3/kv/txn", {
            "compare": [{"key": b64(key), "target": "CREATE", "create_revision": "0", "result": "EQUAL"}],
            "success": [{"request_put": {"key": b64(key), "value": b64(value), "lease": str(lease)}}],
        })
        return int(answer["header"]["revision"]) if answer.get("succeeded") else None

    async def delete_if_revision(self, key: str, create_revision: int) -> bool:
        """Deletes ``key`` only if it is still the version created at ``create_revision``."""
        answer = await self.call("/v3/kv/txn", {
            "compare": [{"key": b64(key), "target": "CREATE", "create_revision": str(create_revision),
                         "result": "EQUAL"}],
            "success": [{"request_delete_range": {"key": b64(key)}}],
        })
        return bool(answer.get("succeeded"))

    async def apply(self, puts: dict[str, bytes | str], deletes: list[str]) -> int:
        """Puts and deletes ``deletes`` in one transaction (all or nothing); the store's revision after it."""
        ops: list[dict[str, Any]] = [{"request_put": {"key": b64(k), "value": b64(v)}} for k, v in puts.items()]
        ops += [{"request_delete_range": {"key": b64(k)}} for k in deletes]
        answer = await self.call("/v3/kv/txn", {"compare": [], "success": ops})
        return int(answer["header"]["revision"])
