"""Compact JWS serializations for the OAUTHBEARER tests and bench: unsecured tokens (``alg``
``none``, no signature) as Kafka's development clients make them, and deliberately broken ones."""

from __future__ import annotations

import base64
import json
import time


def b64url(doc: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")


def jws(claims: dict[str, object], alg: str = "none", signature: str = "") -> str:
    return f"{b64url({'alg': alg})}.{b64url(claims)}.{signature}"


def unsecured_jwt(sub: str, scope: str = "kafka", lifetime_s: int = 3600) -> str:
    """A token for ``sub`` issued now, expiring ``lifetime_s`` from now."""
    now = int(time.time())
    return jws({"sub": sub, "iat": now, "exp": now + lifetime_s, "scope": scope})
