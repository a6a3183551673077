"""Fetching an identity provider's JSON Web Key Set for OAUTHBEARER's signed tokens
(``broker.security.oidc``), as Kafka's ``RefreshingHttpsJwks`` and ``JwksFileVerificationKeyResolver``
keep theirs:

- at startup, once: a broker whose key set cannot be fetched does not start (Kafka's does not);
- then every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and at once when a token names a key
  id the set lacks (at most once a minute per key id); a failed refresh is retried with
  exponential backoff from ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`` within
  ``...retry.backoff.max.ms`` in all, then logged, and the keys in hand stay;
- a ``file:`` URL is read again whenever the file's modification time changes.

The fetch itself (``urllib``, 20 s timeouts, a body of at most 512 KiB, the system's trusted CAs
for ``https``) runs on a worker thread: the broker's loop never waits on the provider."""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request

import trio

from broker.observability import logs
from broker.security.oidc import Jwk, JwkSet, parse_jwks

TIMEOUT_S = 20
MAX_BODY = 512 * 1024
FILE_POLL_S = 1.0


class JwksUnavailable(Exception):
    """The key set could not be fetched (or read, or parsed)."""


def read_jwks(url: str) -> list[Jwk]:
    """The key set at ``url`` (http, https or file), blocking; raises JwksUnavailable."""
    parts = urllib.parse.urlsplit(url)
    try:
        if parts.scheme == "file":
            with open(urllib.request.url2pathname(parts.path), "rb") as f:
                body = f.read(MAX_BODY + 1)
        else:
            request = urllib.request.Request(url, headers={"Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                if response.status != 200:
                    raise JwksUnavailable(f"{url} answered HTTP {response.status}")
                body = response.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            raise JwksUnavailable(f"{url}: the key set is larger than {MAX_BODY} bytes")
        return parse_jwks(body)
    except (OSError, ValueError, urllib.error.URLError) as exc:
        raise JwksUnavailable(f"{url}: {exc}") from None


def _mtime(url: str) -> float | None:
    try:
        return os.stat(urllib.request.url2pathname(urllib.parse.urlsplit(url).path)).st_mtime
    except OSError:
        return None


class JwksRefresher:
    """Keeps one ``JwkSet`` fresh (``run``, in the broker's nursery)."""

    def __init__(self, keys: JwkSet) -> None:
        self.keys = keys
        self.url = keys.settings.jwks_url
        self.is_file = urllib.parse.urlsplit(self.url).scheme == "file"
        self._wake = trio.Event()
        keys.on_wanted = self._wanted

    def _wanted(self) -> None:
        self._wake.set()

    async def _fetch(self) -> list[Jwk]:
        return await trio.to_thread.run_sync(read_jwks, self.url, abandon_on_cancel=True)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Fetches the key set (raising JwksUnavailable if it cannot: the broker does not start),
        then keeps it fresh."""
        settings = self.keys.settings
        if settings.allow_unverified_audience:
            logs.warn("oauth.unverified_audience", url=self.url,
                      note="sasl.oauthbearer.allow.unverified.audience: tokens for any audience are accepted")
        if settings.allow_unverified_issuer:
            logs.warn("oauth.unverified_issuer", url=self.url,
                      note="sasl.oauthbearer.allow.unverified.issuer: tokens of any issuer are accepted")
        stamp = _mtime(self.url) if self.is_file else None
        self.keys.replace(await self._fetch())
        logs.event("oauth.jwks_loaded", url=self.url, keys=len(self.keys.keys))
        task_status.started()
        if self.is_file:
            await self._follow_file(stamp)
        while True:
            with trio.move_on_after(self.keys.settings.refresh_ms / 1000):
                await self._wake.wait()
            self._wake = trio.Event()
            await self.refresh()

    async def refresh(self) -> bool:
        """One refresh, retried with backoff within its budget; whether it succeeded."""
        s = self.keys.settings
        deadline = trio.current_time() + s.retry_backoff_max_ms / 1000
        wait = s.retry_backoff_ms / 1000
        while True:
            try:
                keys = await self._fetch()
            except JwksUnavailable as exc:
                left = deadline - trio.current_time()
                if left <= 0:
                    logs.warn("oauth.jwks_refresh_failed", url=self.url, error=str(exc),
                              note="not updating the keys in hand")
                    return False
                await trio.sleep(min(wait, left))
                wait *= 2
                continue
            self.keys.replace(keys)
            logs.event("oauth.jwks_refreshed", url=self.url, keys=len(keys))
            return True

    async def _follow_file(self, stamp: float | None) -> None:
        while True:
            await trio.sleep(FILE_POLL_S)
            now = _mtime(self.url)
            if now is not None and now != stamp:
                stamp = now
                try:
                    keys = await self._fetch()
                except JwksUnavailable as exc:
                    logs.warn("oauth.jwks_refresh_failed", url=self.url, error=str(exc),
                              note="not updating the keys in hand")
                    continue
                self.keys.replace(keys)
                logs.event("oauth.jwks_refreshed", url=self.url, keys=len(keys))
