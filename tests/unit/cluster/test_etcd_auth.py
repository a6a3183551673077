"""The etcd client's authentication and TLS, against an in-process stand-in of etcd's JSON gateway:
the token is fetched before the first request and sent in ``Authorization``; a token etcd no longer
accepts is renewed once and the request sent again; refusals that renewing cannot cure (a wrong
password, no rights, a certificate either side does not trust) are EtcdAccessError; and the
``etcd.*`` settings that cannot work are startup errors."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
import trio
import trustme

from broker.cluster.etcd import EtcdAccessError, EtcdClient, EtcdError
from broker.configs.node_config import SECRET_PROPERTIES, BrokerConfig, ConfigError

pytestmark = pytest.mark.trio

# What every other request is answered (a range, a put, a lease grant: the fields the client reads).
OK = {"header": {"revision": "7"}, "kvs": [], "ID": "1", "TTL": "5"}


def error(message: str, code: int) -> tuple[int, dict[str, Any]]:
    status = {16: 401, 7: 403, 9: 400, 3: 400}.get(code, 500)
    return status, {"error": f"etcdserver: {message}", "message": f"etcdserver: {message}", "code": code}


@dataclass
class Gateway:
    """etcd's JSON gateway as the client sees it, with auth on: users, issued tokens, and every
    request received (path, Authorization header)."""

    users: dict[str, str] = field(default_factory=lambda: {"kcoord": "pw"})
    auth_enabled: bool = True
    valid: set[str] = field(default_factory=set)
    issued: int = 0
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    # Answers given instead of the normal one, first in first out: (status, JSON body).
    script: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    on_request: Callable[[], None] | None = None

    def answer(self, path: str, token: str | None, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.seen.append((path, token))
        if path == "/v3/auth/authenticate":
            if not self.auth_enabled:
                return error("authentication is not enabled", 9)
            if self.users.get(body.get("name", "")) != body.get("password"):
                return error("authentication failed, invalid user ID or password", 3)
            self.issued += 1
            token = f"token-{self.issued}"
            self.valid.add(token)
            return 200, {"header": {}, "token": token}
        if self.on_request is not None:
            self.on_request()
        if self.script:
            return self.script.pop(0)
        if self.auth_enabled:
            if token is None:
                return error("user name is empty", 3)
            if token not in self.valid:
                return error("invalid auth token", 16)
        return 200, OK

    def expire_all(self) -> None:
        self.valid.clear()

    async def serve(self, stream: trio.abc.Stream) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
            if not data[:1].isalpha():  # not HTTP (a TLS handshake): as Go's HTTP server answers it
                await stream.send_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n")
                await stream.aclose()
                return
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        while len(rest) < int(headers.get("content-length", "0")):
            rest += await stream.receive_some(65536)
        status, answer = self.answer(lines[0].split()[1], headers.get("authorization"), json.loads(rest or b"{}"))
        payload = json.dumps(answer).encode()
        await stream.send_all(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                              % (status, len(payload), payload))
        await stream.aclose()


@asynccontextmanager
async def running(gateway: Gateway, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    async def handler(stream: trio.SocketStream) -> None:
        if tls is None:
            await gateway.serve(stream)
            return
        secure = trio.SSLStream(stream, tls, server_side=True, https_compatible=True)
        try:
            await secure.do_handshake()
            await gateway.serve(secure)
        except trio.BrokenResourceError:
            pass

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def test_the_token_is_fetched_once_and_sent_with_every_request() -> None:
    gateway = Gateway()
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="pw")
        await client.get_prefix("/kcoord/p/")
        await client.put("/kcoord/p/a", "1")
    assert gateway.seen == [("/v3/auth/authenticate", None), ("/v3/kv/range", "token-1"), ("/v3/kv/put", "token-1")]
    assert client.authentications == 1


async def test_an_expired_token_is_renewed_once_and_the_request_sent_again() -> None:
    gateway = Gateway()
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="pw")
        await client.get_prefix("/kcoord/p/")
        gateway.expire_all()  # etcd forgot it (--auth-token-ttl unused, or a JWT past its expiry)
        await client.put("/kcoord/p/a", "1")
    assert gateway.seen[1:] == [("/v3/kv/range", "token-1"), ("/v3/kv/put", "token-1"),
                                ("/v3/auth/authenticate", None), ("/v3/kv/put", "token-2")]
    assert client.authentications == 2


async def test_an_old_auth_revision_renews_the_token_too() -> None:
    gateway = Gateway(script=[error("revision of auth store is old", 3)])
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="pw")
        await client.grant(5)
    assert [path for path, _ in gateway.seen] == ["/v3/auth/authenticate", "/v3/lease/grant",
                                                  "/v3/auth/authenticate", "/v3/lease/grant"]


async def test_a_token_refused_right_after_it_was_issued_is_an_error_not_a_loop() -> None:
    gateway = Gateway(script=[error("invalid auth token", 16)] * 5)
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="pw")
        with pytest.raises(EtcdError, match="just issued") as refused:
            await client.grant(5)
    assert not isinstance(refused.value, EtcdAccessError)  # retried later, as etcd being away
    assert len(gateway.seen) == 4  # authenticate, request, authenticate, request


async def test_tasks_refused_the_same_token_renew_it_once() -> None:
    gateway = Gateway()
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="pw", timeout_s=10)
        await client.grant(5)
        gateway.expire_all()
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(client.grant, 5)
    # Every task was refused token-1; the first to take the lock authenticated, the others found
    # the token it got: one renewal for all of them.
    assert client.authentications == 2
    grants = [t for p, t in gateway.seen if p == "/v3/lease/grant"]
    assert grants.count("token-1") == 6 and grants.count("token-2") == 5


async def test_a_wrong_password_is_an_access_error_and_no_request_is_sent() -> None:
    gateway = Gateway()
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="wrong")
        with pytest.raises(EtcdAccessError, match="authentication failed"):
            await client.verify_access("/kcoord/p")
    assert gateway.seen == [("/v3/auth/authenticate", None)]


async def test_no_rights_on_the_prefix_is_an_access_error() -> None:
    gateway = Gateway(script=[error("permission denied", 7)])
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="pw")
        with pytest.raises(EtcdAccessError, match="permission denied"):
            await client.verify_access("/kcoord/p")


async def test_without_credentials_an_etcd_with_auth_on_is_an_access_error() -> None:
    gateway = Gateway()
    async with running(gateway) as port:
        with pytest.raises(EtcdAccessError, match=r"etcd\.username"):
            await EtcdClient(f"http://127.0.0.1:{port}").grant(5)


async def test_credentials_for_an_etcd_without_auth_go_unused_until_it_asks_for_them() -> None:
    gateway = Gateway(auth_enabled=False)
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:{port}", username="kcoord", password="pw")
        await client.grant(5)
        await client.grant(5)
        assert gateway.seen == [("/v3/auth/authenticate", None), ("/v3/lease/grant", None), ("/v3/lease/grant", None)]
        gateway.auth_enabled = True  # etcdctl auth enable
        await client.grant(5)
    assert gateway.seen[3:] == [("/v3/lease/grant", None), ("/v3/auth/authenticate", None),
                                ("/v3/lease/grant", "token-1")]


async def test_one_endpoint_away_and_the_other_refusing_is_a_refusal() -> None:
    gateway = Gateway()
    async with running(gateway) as port:
        client = EtcdClient(f"http://127.0.0.1:1,http://127.0.0.1:{port}", username="kcoord", password="wrong")
        with pytest.raises(EtcdAccessError):
            await client.grant(5)
        away = EtcdClient("http://127.0.0.1:1")
        with pytest.raises(EtcdError) as unreachable:
            await away.grant(5)
        assert not isinstance(unreachable.value, EtcdAccessError)


# ---- TLS ----------------------------------------------------------------------------------------


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


def server_context(ca: trustme.CA, *hosts: str, require_client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*hosts).configure_cert(ctx)
    if require_client_cert:
        ca.configure_trust(ctx)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def client_context(ca: trustme.CA, cert_ca: trustme.CA | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    if cert_ca is not None:
        cert_ca.issue_cert("kcoord.example.test").configure_cert(ctx)
    return ctx


async def test_https_with_a_trusted_certificate_naming_the_host(ca: trustme.CA) -> None:
    gateway = Gateway()
    async with running(gateway, server_context(ca, "127.0.0.1", require_client_cert=True)) as port:
        client = EtcdClient(f"https://127.0.0.1:{port}", ssl_context=client_context(ca, ca), username="kcoord",
                            password="pw")
        await client.verify_access("/kcoord/p")
    assert [p for p, _ in gateway.seen] == ["/v3/auth/authenticate", "/v3/kv/txn"]


async def test_a_certificate_naming_another_host_is_refused(ca: trustme.CA) -> None:
    async with running(Gateway(), server_context(ca, "etcd.example.test")) as port:
        client = EtcdClient(f"https://127.0.0.1:{port}", ssl_context=client_context(ca))
        with pytest.raises(EtcdAccessError, match=r"not trusted.*(mismatch|match)"):
            await client.grant(5)


async def test_a_certificate_of_an_unknown_ca_is_refused(ca: trustme.CA) -> None:
    async with running(Gateway(), server_context(trustme.CA(), "127.0.0.1")) as port:
        client = EtcdClient(f"https://127.0.0.1:{port}", ssl_context=client_context(ca))
        with pytest.raises(EtcdAccessError, match="not trusted"):
            await client.grant(5)


async def test_https_to_a_plain_port_is_refused_as_such() -> None:
    async with running(Gateway()) as port:
        client = EtcdClient(f"https://127.0.0.1:{port}")
        with pytest.raises(EtcdAccessError, match="does not speak TLS"):
            await client.grant(5)


# ---- settings ------------------------------------------------------------------------------------


def load(*overrides: str) -> BrokerConfig:
    return BrokerConfig.load(overrides=["cluster.id=prod", *overrides], environ={})


@pytest.mark.parametrize(("overrides", "needle"), [
    (["etcd.endpoints=http://etcd.internal:2379"], "etcd.allow.plaintext"),
    (["etcd.endpoints=https://etcd:2379,http://10.0.0.7:2379"], "10.0.0.7"),
    (["etcd.endpoints=http://127.0.0.1:2379", "etcd.ssl.truststore.location=/ca.pem"], "name them https"),
    (["etcd.endpoints=https://etcd:2379", "etcd.username=kcoord"], "go together"),
    (["etcd.endpoints=https://etcd:2379", "etcd.password=x"], "go together"),
    (["etcd.endpoints=https://etcd:2379", "etcd.ssl.keystore.key=x"], "go together"),
    (["etcd.endpoints=etcd+dns://etcd:2379"], "neither http"),
    (["etcd.endpoints=https://etcd:2379", "etcd.ssl.endpoint.identification.algorithm=none"], "one of"),
])
async def test_settings_that_cannot_work_stop_startup(overrides: list[str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        load(*overrides)


async def test_settings_that_work() -> None:
    load("etcd.endpoints=http://127.0.0.1:2379,http://localhost:2380,http://[::1]:2379")  # loopback: allowed
    load("etcd.endpoints=http://etcd.internal:2379", "etcd.allow.plaintext=true")
    load("etcd.endpoints=https://etcd:2379", "etcd.username=kcoord", "etcd.password=pw",
         "etcd.ssl.truststore.location=/ca.pem", "etcd.ssl.endpoint.identification.algorithm=")
    assert {"etcd.password", "etcd.ssl.keystore.password", "etcd.ssl.key.password", "etcd.ssl.keystore.key",
            "etcd.ssl.truststore.password"} <= SECRET_PROPERTIES  # DescribeConfigs never shows them
