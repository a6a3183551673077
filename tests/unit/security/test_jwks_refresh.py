"""The identity provider's key set, fetched over real HTTP from a local server and from a file:
fetched before the broker serves (an unreachable provider stops it), fetched again at once when a
token names a key the set lacks, and a file's set read again when the file changes."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio

jwt = pytest.importorskip("jwt")
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from jwt.algorithms import RSAAlgorithm  # noqa: E402

from broker.security.jwks import JwksRefresher, JwksUnavailable  # noqa: E402
from broker.security.oidc import JwkSet, OidcSettings, OidcValidator  # noqa: E402
from testkit.ports import free_port  # noqa: E402


def jwks(*pairs: tuple[str, Any]) -> bytes:
    keys = []
    for kid, key in pairs:
        doc = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
        doc["kid"] = kid
        keys.append(doc)
    return json.dumps({"keys": keys}).encode()


class Provider:
    """A JWKS endpoint on loopback whose document the test changes; counts its fetches."""

    def __init__(self) -> None:
        self.document = b'{"keys": []}'
        self.fetches = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider.fetches += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(provider.document)))
                self.end_headers()
                self.wfile.write(provider.document)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def provider() -> Iterator[Provider]:
    p = Provider()
    yield p
    p.server.shutdown()
    p.server.server_close()


def settings(url: str) -> OidcSettings:
    return OidcSettings(url, expected_audience=("kafka",), expected_issuer="idp")


def token(key: Any, kid: str) -> str:
    now = int(time.time())
    out: str = jwt.encode({"sub": "bob", "aud": "kafka", "iss": "idp", "iat": now, "exp": now + 600}, key,
                          algorithm="RS256", headers={"kid": kid})
    return out


async def until(condition: Any, seconds: float = 30) -> None:
    with trio.fail_after(seconds):
        while not condition():
            await trio.sleep(0.05)


@pytest.mark.trio
async def test_a_rotated_key_is_fetched_when_a_token_names_it(provider: Provider) -> None:
    first = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    second = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    provider.document = jwks(("k1", first))
    keys = JwkSet(settings(provider.url))
    validator = OidcValidator(keys)
    async with trio.open_nursery() as nursery:
        await nursery.start(JwksRefresher(keys).run)
        assert provider.fetches == 1 and [k.kid for k in keys.keys] == ["k1"]
        provider.document = jwks(("k1", first), ("k2", second))
        now_ms = int(time.time() * 1000)
        with pytest.raises(Exception, match="no key"):
            validator.validate(token(second, "k2"), now_ms)
        await until(lambda: [k.kid for k in keys.keys] == ["k1", "k2"])
        assert validator.validate(token(second, "k2"), now_ms)[0] == "bob"
        nursery.cancel_scope.cancel()


@pytest.mark.trio
async def test_an_unreachable_provider_stops_the_start() -> None:
    keys = JwkSet(settings(f"http://127.0.0.1:{free_port()}/jwks"))
    async with trio.open_nursery() as nursery:
        with pytest.raises(JwksUnavailable):
            await nursery.start(JwksRefresher(keys).run)


@pytest.mark.trio
async def test_a_file_key_set_is_read_again_when_it_changes(tmp_path: Path) -> None:
    first = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    second = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "jwks.json"
    path.write_bytes(jwks(("k1", first)))
    keys = JwkSet(settings(path.as_uri()))
    async with trio.open_nursery() as nursery:
        await nursery.start(JwksRefresher(keys).run)
        assert [k.kid for k in keys.keys] == ["k1"]
        path.write_bytes(jwks(("k2", second)))
        stat = path.stat()
        os.utime(path, (stat.st_atime, stat.st_mtime + 5))  # a change the clock's granularity cannot hide
        await until(lambda: [k.kid for k in keys.keys] == ["k2"])
        nursery.cancel_scope.cancel()
