"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with Kafka's unsecured JWS validator (development tokens:
``alg`` ``none``, no signature), as Kafka's ``OAuthBearerSaslServer`` and
``OAuthBearerUnsecuredValidatorCallbackHandler`` answer it.

The client's one message is ``n,[a=<authzid>],^Aauth=Bearer <token>^A[key=value^A...]^A``. A token that
fails validation is answered with a JSON error (``{"status":"invalid_token"}``, or
``insufficient_scope`` with the required scope); the client answers that with ``^A`` and the
exchange fails with that JSON as its message. A valid token authenticates ``User:<principal
claim>`` until its ``exp``: the session ends with the token (KIP-368)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.security.sasl_failure import AuthenticationFailed

SEPARATOR = "\x01"
_SASLNAME = r"(?:[\x01-\x7F](?<![=,])|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*"
_INITIAL = re.compile(rf"^n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01$", re.DOTALL)
_AUTH = re.compile(r"^(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)$")


class InvalidToken(Exception):
    """The token does not validate: answered with a JSON error (``scope`` names a missing scope)."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


@dataclass(frozen=True)
class UnsecuredValidator:
    """The options of Kafka's unsecured validator (``unsecuredValidator*`` in the listener's
    OAUTHBEARER JAAS config)."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> UnsecuredValidator:
        skew_text = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs: {skew_text!r} is not a number") from None
        if skew < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew_text}")
        return cls(options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
                   options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
                   tuple(options.get("unsecuredValidatorRequiredScope", "").split()), skew)

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms) of a valid token; raises InvalidToken."""
        header, claims = _decode(token)
        if header.get("alg") != "none":
            raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
        exp = claims.get("exp")
        if not _number(exp):
            raise InvalidToken("No expiration time in JWT")
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidToken(f"No principal name in JWT claim: {self.principal_claim}")
        raw_iat = claims.get("iat")
        if raw_iat is not None and not _number(raw_iat):
            raise InvalidToken("The 'iat' claim was not of type Number")
        iat = raw_iat if isinstance(raw_iat, (int, float)) else None
        if iat is not None and 1000 * iat > now_ms + self.clock_skew_ms:
            raise InvalidToken("The Issued At value was after the indicated time plus allowable clock skew")
        assert isinstance(exp, (int, float))
        if now_ms - self.clock_skew_ms >= 1000 * exp:
            raise InvalidToken("The indicated time minus allowable clock skew was on or after the Expiration Time")
        if iat is not None and exp <= iat:
            raise InvalidToken("The Expiration Time time was not after the Issued At time")
        scope = claims.get(self.scope_claim)
        granted = set(scope.split()) if isinstance(scope, str) else (
            {s for s in scope if isinstance(s, str)} if isinstance(scope, list) else set())
        missing = [s for s in self.required_scope if s not in granted]
        if missing:
            raise InvalidToken(f"The provided scope was missing a required scope ({missing[0]})",
                               scope=f"[{', '.join(self.required_scope)}]")
        return principal, int(1000 * exp)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _decode(token: str) -> tuple[dict[str, object], dict[str, object]]:
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
    if parts[2]:
        raise InvalidToken("Unsecured JWS must not contain a digital signature")
    out = []
    for part in parts[:2]:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
        except (binascii.Error, ValueError):
            raise InvalidToken("malformed Base64 URL encoded value or JSON") from None
        if not isinstance(decoded, dict):
            raise InvalidToken("malformed JSON")
        out.append(decoded)
    return out[0], out[1]


def parse_initial(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(token, authorization id, extensions) of the client's message; raises AuthenticationFailed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message") from None
    match = _INITIAL.match(text)
    if match is None:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
    pairs = dict(kv.split("=", 1) for kv in match["kvpairs"].split(SEPARATOR) if kv)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message: 'auth' not specified")
    found = _AUTH.match(auth)
    if found is None:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if found["scheme"].lower() != "bearer":
        raise AuthenticationFailed("Invalid scheme in OAUTHBEARER client first message")
    return found["token"], match["authzid"] or "", pairs


class TokenValidator(Protocol):
    """Checks a bearer token: the unsecured one here, or signed tokens (``broker.security.oidc``)."""

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms) of a valid token; raises InvalidToken."""
        ...


class OAuthBearerExchange:
    """One exchange: the client's message, then (after an error) its ``^A``."""

    def __init__(self, validator: TokenValidator, now_ms: Callable[[], int]) -> None:
        self.validator = validator
        self.now_ms = now_ms
        self.user: str | None = None
        # The token's ``exp``: the session ends with it.
        self.credential_expiry_ms: int | None = None
        self.delegation_token = False
        self.error: str | None = None
        self.reason: str | None = None  # why the token did not validate (logged, not told)

    def step(self, message: bytes) -> bytes:
        if self.error is not None and message == SEPARATOR.encode():
            raise AuthenticationFailed(self.error, f"{self.error}: {self.reason}")
        if self.user is not None:
            raise AuthenticationFailed("Unexpected OAUTHBEARER message after authentication")
        self.error = None
        token, authzid, _extensions = parse_initial(message)
        try:
            principal, expiry = self.validator.validate(token, self.now_ms())
        except InvalidToken as exc:
            self.reason = str(exc)
            # Kafka's own rendering (OAuthBearerSaslServer.jsonErrorResponse), byte for byte.
            status = "insufficient_scope" if exc.scope is not None else "invalid_token"
            self.error = f'{{"status":"{status}"' + (f', "scope":"{exc.scope}"' if exc.scope is not None else "") + "}"
            return self.error.encode()
        if authzid and authzid != principal:
            raise AuthenticationFailed(f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                              f"different from the token's principal name ({principal})")
        # Every extension is accepted, as Kafka's unsecured validator accepts them.
        self.user, self.credential_expiry_ms = principal, expiry
        return b""
