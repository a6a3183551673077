"""A real OAuth 2.0 / OpenID Connect identity provider on loopback for the OAUTHBEARER (OIDC) tests:
NAV's mock-oauth2-server (a standalone JVM server, fetched through Maven by scripts/maven-libs.sh
from reference/oidc-provider/pom.xml). It publishes an RS256 key set at ``<issuer>/jwks`` and
issues signed tokens at ``<issuer>/token`` to any client (client credentials): ``sub`` is the
client id, ``aud`` the requested scope, ``iss`` ``http://127.0.0.1:<port>/<issuer name>``."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from testkit.cache import cache_root
from testkit.kafka import java
from testkit.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
MAIN = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"


def provider_libs() -> Path | None:
    """The provider's jars (``KCOORD_OIDC_LIBS``, else the cache scripts/maven-libs.sh fills)."""
    explicit = os.environ.get("KCOORD_OIDC_LIBS")
    if explicit:
        return Path(explicit) if Path(explicit).is_dir() else None
    pom = (ROOT / "reference" / "oidc-provider" / "pom.xml").read_text()
    version = pom.split("<oidc-provider.version>", 1)[1].split("<", 1)[0]
    cache = cache_root() / f"oidc-provider-{version}"
    libs = cache / "libs"
    return libs if any(cache.glob(".complete-*")) and libs.is_dir() else None


class OidcProvider:
    def __init__(self, libs: Path, log_path: Path) -> None:
        self.libs = libs
        self.log_path = log_path
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def issuer(self, name: str = "default") -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def jwks_url(self, name: str = "default") -> str:
        return f"{self.issuer(name)}/jwks"

    def token_url(self, name: str = "default") -> str:
        return f"{self.issuer(name)}/token"

    def start(self, timeout: float = 90.0) -> OidcProvider:
        binary = java()
        if binary is None:
            raise RuntimeError("java is not installed")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [binary, "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{self.libs}/*", MAIN],
                env={**os.environ, "SERVER_PORT": str(self.port), "LOG_LEVEL": "WARN"},
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.issuer()}/.well-known/openid-configuration", timeout=5) as r:
                    if r.status == 200:
                        return self
            except (OSError, urllib.error.URLError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the OIDC provider did not start:\n{self.log_path.read_text(errors='replace')}")
            time.sleep(0.3)

    def token(self, client_id: str, scope: str, name: str = "default") -> str:
        """An access token for ``client_id`` (client credentials) with ``aud`` ``scope``."""
        body = urllib.parse.urlencode({"grant_type": "client_credentials", "client_id": client_id,
                                       "client_secret": "secret", "scope": scope}).encode()
        with urllib.request.urlopen(self.token_url(name), body, timeout=30) as r:
            token: str = json.loads(r.read())["access_token"]
        return token

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
