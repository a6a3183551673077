"""SASL/OAUTHBEARER with signed tokens from an identity provider (OIDC, KIP-768), as Kafka's
``OAuthBearerValidatorCallbackHandler`` and ``BrokerJwtValidator`` check them: the token is a JWS
signed with a key of the provider's JSON Web Key Set (``sasl.oauthbearer.jwks.endpoint.url``), it
carries ``exp`` and ``iat``, its ``aud`` names one of ``sasl.oauthbearer.expected.audience`` and its
``iss`` is ``sasl.oauthbearer.expected.issuer`` (each may be waived, with
``sasl.oauthbearer.allow.unverified.audience`` / ``.issuer``), ``nbf`` and ``exp`` hold within
``sasl.oauthbearer.clock.skew.seconds``; the principal is the ``sasl.oauthbearer.sub.claim.name``
claim. A client is told only ``{"status":"invalid_token"}``; the reason is logged.

No I/O here: the key set is given (``JwkSet``), and a token signed by a key it does not know asks
for a refresh (``JwkSet.wanted``), which ``broker.security.jwks`` performs; the authentication that
asked fails at once, as Kafka's does, and the client's next attempt finds the key."""

from __future__ import annotations

import base64
import binascii
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker.security.oauthbearer import InvalidToken

VALIDATOR_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"

_HASH_BITS = ("256", "384", "512")
_EC_ALG_CURVE = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
REFRESH_PER_KID_MS = 60_000  # a token's unknown key id asks for a refresh at most once a minute
_MISSING_KIDS = 16  # how many unknown key ids are remembered for that
_MAX_KID = 1000  # longer key ids never ask for a refresh


@dataclass(frozen=True)
class OidcSettings:
    """A listener's ``sasl.oauthbearer.*`` settings (listener-prefixed, else global)."""

    jwks_url: str
    refresh_ms: int = 3_600_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    allow_unverified_audience: bool = False
    allow_unverified_issuer: bool = False
    scope_claim: str = "scope"
    sub_claim: str = "sub"
    clock_skew_s: int = 30


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Jwk:
    """One verification key of the set, with the fields key selection looks at."""

    kty: str
    kid: str | None
    use: str | None
    alg: str | None
    crv: str | None
    key_ops: tuple[str, ...] | None
    public_key: object  # a cryptography public key of the kty

    @classmethod
    def parse(cls, jwk: Mapping[str, object]) -> Jwk | None:
        """The key, or None for one this broker cannot verify with (a symmetric or private-only
        key, an unknown type or curve): it is left out of the set, as jose4j skips it."""
        from broker.security import jwk_keys  # cryptography, loaded only by a broker that verifies tokens

        kty = jwk.get("kty")
        try:
            public = jwk_keys.public_key(jwk)
        except (ValueError, TypeError, binascii.Error):
            return None
        if public is None:
            return None
        ops = jwk.get("key_ops")
        return cls(str(kty), _opt(jwk.get("kid")), _opt(jwk.get("use")), _opt(jwk.get("alg")), _opt(jwk.get("crv")),
                   tuple(str(o) for o in ops) if isinstance(ops, list) else None, public)


def _opt(value: object) -> str | None:
    return value if isinstance(value, str) else None


def parse_jwks(text: str | bytes) -> list[Jwk]:
    """The usable keys of a JSON Web Key Set document; raises ValueError for one that is not."""
    try:
        document = json.loads(text)
    except ValueError:
        raise ValueError("the JWKS is not JSON") from None
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise ValueError("the JWKS has no \"keys\" list")
    return [k for k in (Jwk.parse(j) for j in keys if isinstance(j, dict)) if k is not None]


def _kty_for(alg: str) -> str | None:
    if alg[:2] in ("RS", "PS") and alg[2:] in _HASH_BITS:
        return "RSA"
    if alg in _EC_ALG_CURVE:
        return "EC"
    if alg == "EdDSA":
        return "OKP"
    return None


class JwkSet:
    """The provider's keys as last fetched, and the key ids tokens named that were not among them
    (each asks for a refresh at most once a minute: ``wanted``)."""

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self.keys: list[Jwk] = []
        self.fetched = False
        self.missing: OrderedDict[str, int] = OrderedDict()  # kid -> when it last asked for a refresh (ms)
        # Called when a token names a key the set lacks (set by the refresher: wakes it).
        self.on_wanted: Callable[[], None] = lambda: None

    def replace(self, keys: list[Jwk]) -> None:
        self.keys = keys
        self.fetched = True
        for key in keys:
            if key.kid is not None:
                self.missing.pop(key.kid, None)

    def select(self, alg: str, kid: str | None) -> Jwk | None:
        """The key a token of ``alg`` and ``kid`` is verified with, chosen as jose4j's
        ``VerificationJwkSelector`` chooses (the first that fits)."""
        kty = _kty_for(alg)
        fits = [k for k in self.keys
                if (kid is None or k.kid == kid) and k.kty == kty and k.use in (None, "sig")
                and (k.key_ops is None or "verify" in k.key_ops)]
        if len(fits) > 1:
            fits = [k for k in fits if k.alg in (None, alg)] or fits
        if len(fits) > 1 and kty == "EC":
            fits = [k for k in fits if k.crv == _EC_ALG_CURVE[alg]] or fits
        return fits[0] if fits else None

    def wanted(self, kid: str | None, now_ms: int) -> None:
        """A token named ``kid``, which the set lacks: ask for a refresh unless that key id asked
        within the last minute."""
        if kid is None or len(kid) > _MAX_KID:
            return
        last = self.missing.get(kid)
        if last is not None and now_ms - last < REFRESH_PER_KID_MS:
            return
        self.missing[kid] = now_ms
        self.missing.move_to_end(kid)
        while len(self.missing) > _MISSING_KIDS:
            self.missing.popitem(last=False)
        self.on_wanted()


def verify_signature(key: Jwk, alg: str, signing_input: bytes, signature: bytes) -> bool:
    from broker.security import jwk_keys

    return jwk_keys.verify(key.public_key, alg, _EC_ALG_CURVE.get(alg), signing_input, signature)


class OidcValidator:
    """Validates a signed token against the key set (``validate``: principal and expiry)."""

    def __init__(self, keys: JwkSet) -> None:
        self.keys = keys
        self.settings = keys.settings

    def validate(self, token: str, now_ms: int) -> tuple[str, int]:
        """(principal name, expiry in ms) of a valid token; raises InvalidToken (its message is
        logged; the client is told only ``invalid_token``)."""
        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise InvalidToken("Malformed JWT provided; expected three sections (header, payload, and signature)")
        try:
            header = json.loads(_b64(parts[0]))
            claims = json.loads(_b64(parts[1]))
            signature = _b64(parts[2])
        except (binascii.Error, ValueError):
            raise InvalidToken("Could not validate the access token: malformed Base64 URL encoded value or JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise InvalidToken("Could not validate the access token: the header or payload is not a JSON object")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg == "none" or _kty_for(alg) is None:
            raise InvalidToken(f"Could not validate the access token: the algorithm {alg!r} is not allowed")
        kid = header.get("kid") if isinstance(header.get("kid"), str) else None
        key = self.keys.select(alg, kid)
        if key is None:
            self.keys.wanted(kid, now_ms)
            raise InvalidToken(f"Could not validate the access token: no key of the JWKS from "
                               f"{self.settings.jwks_url} fits a JWS of alg {alg} and kid {kid!r}")
        if not verify_signature(key, alg, f"{parts[0]}.{parts[1]}".encode(), signature):
            raise InvalidToken("Could not validate the access token: the JWS signature is invalid")
        return self._claims(claims, now_ms)

    def _claims(self, claims: Mapping[str, object], now_ms: int) -> tuple[str, int]:
        s = self.settings
        skew_ms = 1000 * s.clock_skew_s
        exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf")
        if not _number(exp):
            raise InvalidToken("Could not validate the access token: No Expiration Time (exp) claim present")
        if not _number(iat):
            raise InvalidToken("Could not validate the access token: No Issued At (iat) claim present")
        assert isinstance(exp, (int, float)) and isinstance(iat, (int, float))
        if now_ms - skew_ms >= 1000 * exp:
            raise InvalidToken(f"Could not validate the access token: The JWT is no longer valid - the evaluation "
                               f"time is on or after the Expiration Time (exp={exp}) claim value")
        if nbf is not None:
            if not _number(nbf):
                raise InvalidToken("Could not validate the access token: the Not Before (nbf) claim is not a number")
            assert isinstance(nbf, (int, float))
            if now_ms + skew_ms < 1000 * nbf:
                raise InvalidToken(f"Could not validate the access token: The JWT is not yet valid as the evaluation "
                                   f"time is before the Not Before (nbf={nbf}) claim time")
        if not s.allow_unverified_audience:
            aud = claims.get("aud")
            audiences = [aud] if isinstance(aud, str) else (aud if isinstance(aud, list) else None)
            if audiences is None:
                raise InvalidToken("Could not validate the access token: No Audience (aud) claim present")
            if not any(a in s.expected_audience for a in audiences):
                raise InvalidToken(f"Could not validate the access token: Audience (aud) claim {audiences} doesn't "
                                   f"contain an acceptable identifier. Expected one of {list(s.expected_audience)}")
        if not s.allow_unverified_issuer:
            iss = claims.get("iss")
            if iss is None:
                raise InvalidToken("Could not validate the access token: No Issuer (iss) claim present")
            if iss != s.expected_issuer:
                raise InvalidToken(f"Could not validate the access token: Issuer (iss) claim value ({iss}) doesn't "
                                   f"match expected value of {s.expected_issuer}")
        if exp < 0:
            raise InvalidToken(f"exp value must be non-negative; value given was \"{exp}\"")
        if iat < 0:
            raise InvalidToken(f"iat value must be non-negative; value given was \"{iat}\"")
        _scopes(claims.get(s.scope_claim), s.scope_claim)
        sub = claims.get(s.sub_claim)
        if sub is not None and not isinstance(sub, str):
            raise InvalidToken(f"Could not extract the '{s.sub_claim}' claim from the access token")
        if sub is None or not sub.strip():
            raise InvalidToken(f"{s.sub_claim} value must be non-null" if sub is None
                               else f"{s.sub_claim} value must not contain only whitespace")
        return sub.strip(), int(1000 * exp)


def _scopes(value: object, name: str) -> list[str]:
    """The scope claim as Kafka's secured validator reads it: a string is one scope (not split on
    spaces), a list its strings, anything else none; no scope may be blank or repeated."""
    raw = [value] if isinstance(value, str) else (value if isinstance(value, list) else [])
    out: list[str] = []
    for scope in raw:
        if not isinstance(scope, str):
            raise InvalidToken(f"Could not extract the '{name}' claim from the access token")
        scope = scope.strip()
        if not scope:
            raise InvalidToken(f"{name} value must not be empty or contain only whitespace")
        if scope in out:
            raise InvalidToken(f"{name} value must not contain duplicates - {scope} already present")
        out.append(scope)
    return out


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
