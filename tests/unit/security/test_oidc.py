"""OAUTHBEARER with signed tokens (OIDC): tokens signed by an independent JWS implementation
(PyJWT) with RSA, RSA-PSS, EC and Ed25519 keys, checked as Kafka 4.4's BrokerJwtValidator checks
them: signature, key selection by kid and type, exp/nbf within the clock skew, iat required,
audience and issuer, the principal claim, scopes; an unknown key id asks for a refresh at most once
a minute per key id."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

jwt = pytest.importorskip("jwt")
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: E402
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm  # noqa: E402

from broker.security.oauthbearer import InvalidToken, OAuthBearerExchange  # noqa: E402
from broker.security.oidc import JwkSet, OidcSettings, OidcValidator, parse_jwks  # noqa: E402
from broker.security.properties import listener_sasl  # noqa: E402
from broker.security.sasl_failure import AuthenticationFailed  # noqa: E402

ISSUER = "https://idp.example/realms/kafka"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ED_KEY = ed25519.Ed25519PrivateKey.generate()


def jwk(key: Any, kid: str | None, **extra: str) -> dict[str, Any]:
    public = key.public_key()
    algorithm = RSAAlgorithm if isinstance(public, rsa.RSAPublicKey) else (
        ECAlgorithm if isinstance(public, ec.EllipticCurvePublicKey) else OKPAlgorithm)
    doc: dict[str, Any] = json.loads(algorithm.to_jwk(public))
    if kid is not None:
        doc["kid"] = kid
    doc.update(extra)
    return doc


def key_set(*docs: dict[str, Any], **settings: Any) -> JwkSet:
    keys = JwkSet(OidcSettings("https://idp.example/jwks", expected_audience=("kafka",), expected_issuer=ISSUER,
                               **settings))
    keys.replace(parse_jwks(json.dumps({"keys": list(docs)})))
    return keys


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    out: dict[str, Any] = {"sub": "alice", "aud": "kafka", "iss": ISSUER, "iat": now, "exp": now + 600}
    out.update(changes)
    return {k: v for k, v in out.items() if v is not None}


def sign(key: Any, alg: str, kid: str | None = "k1", **changes: Any) -> str:
    headers = {"kid": kid} if kid is not None else {}
    token: str = jwt.encode(claims(**changes), key, algorithm=alg, headers=headers)
    return token


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.mark.parametrize(("key", "alg"), [(RSA_KEY, "RS256"), (RSA_KEY, "RS512"), (RSA_KEY, "PS256"),
                                          (EC_KEY, "ES256"), (ED_KEY, "EdDSA")])
def test_a_token_signed_by_a_key_of_the_set_authenticates_its_subject(key: Any, alg: str) -> None:
    validator = OidcValidator(key_set(jwk(key, "k1")))
    exp = int(time.time()) + 600
    assert validator.validate(sign(key, alg, exp=exp), now_ms()) == ("alice", 1000 * exp)


def test_a_forged_or_tampered_token_is_refused() -> None:
    validator = OidcValidator(key_set(jwk(RSA_KEY, "k1")))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(InvalidToken, match="signature is invalid"):
        validator.validate(sign(other, "RS256"), now_ms())
    header, _payload, signature = sign(RSA_KEY, "RS256").split(".")
    forged = jwt.utils.base64url_encode(json.dumps(claims(sub="admin")).encode()).decode()
    with pytest.raises(InvalidToken, match="signature is invalid"):
        validator.validate(f"{header}.{forged}.{signature}", now_ms())


def test_unsigned_and_malformed_tokens_are_refused() -> None:
    validator = OidcValidator(key_set(jwk(RSA_KEY, "k1")))
    unsigned = jwt.encode(claims(), None, algorithm="none")
    with pytest.raises(InvalidToken, match="three sections"):
        validator.validate(unsigned, now_ms())  # no signature section at all
    with pytest.raises(InvalidToken, match="not allowed"):
        validator.validate(unsigned + "c2ln", now_ms())
    with pytest.raises(InvalidToken, match="three sections"):
        validator.validate("a.b", now_ms())
    with pytest.raises(InvalidToken, match="not allowed"):
        validator.validate(jwt.encode(claims(), "secret-secret-secret-secret-secret", algorithm="HS256"), now_ms())


@pytest.mark.parametrize(("changes", "reason"), [
    ({"exp": "-60"}, "no longer valid"),
    ({"exp": None}, "No Expiration Time"),
    ({"iat": None}, "No Issued At"),
    ({"nbf": "+120"}, "not yet valid"),
    ({"aud": "other"}, "Audience"),
    ({"aud": None}, "No Audience"),
    ({"iss": "https://evil.example"}, "Issuer"),
    ({"iss": None}, "No Issuer"),
    ({"sub": None}, "sub value must be non-null"),
    ({"sub": "  "}, "whitespace"),
    ({"scope": ["a", "a"]}, "duplicates"),
    ({"scope": ["a", " "]}, "empty"),
])
def test_claims_are_checked_as_kafka_checks_them(changes: dict[str, Any], reason: str) -> None:
    """A time given as "+n" or "-n" is that many seconds from now (when the test runs)."""
    now = int(time.time())
    changes = {k: now + int(v) if k in ("exp", "nbf") and isinstance(v, str) else v for k, v in changes.items()}
    validator = OidcValidator(key_set(jwk(RSA_KEY, "k1")))
    with pytest.raises(InvalidToken, match=reason):
        validator.validate(sign(RSA_KEY, "RS256", **changes), now_ms())


def test_the_clock_skew_admits_a_token_just_expired_or_not_yet_valid() -> None:
    validator = OidcValidator(key_set(jwk(RSA_KEY, "k1")))  # 30 s by default
    now = int(time.time())
    assert validator.validate(sign(RSA_KEY, "RS256", exp=now - 10), now_ms())[0] == "alice"
    assert validator.validate(sign(RSA_KEY, "RS256", nbf=now + 10), now_ms())[0] == "alice"


def test_audience_lists_scope_strings_and_waived_checks() -> None:
    validator = OidcValidator(key_set(jwk(RSA_KEY, "k1")))
    assert validator.validate(sign(RSA_KEY, "RS256", aud=["x", "kafka"]), now_ms())[0] == "alice"
    # A scope string is one scope, not split on spaces (Kafka's secured validator): no duplicate here.
    assert validator.validate(sign(RSA_KEY, "RS256", scope="a a"), now_ms())[0] == "alice"
    waived = OidcValidator(key_set(jwk(RSA_KEY, "k1"), allow_unverified_audience=True, allow_unverified_issuer=True))
    assert waived.validate(sign(RSA_KEY, "RS256", aud="any", iss="anyone"), now_ms())[0] == "alice"
    named = OidcValidator(key_set(jwk(RSA_KEY, "k1"), sub_claim="client_id"))
    assert named.validate(sign(RSA_KEY, "RS256", client_id="svc-1"), now_ms())[0] == "svc-1"


def test_keys_are_selected_by_kid_type_and_use() -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    keys = key_set(jwk(other, "k0"), jwk(RSA_KEY, "k1"), jwk(EC_KEY, "k1"), jwk(RSA_KEY, "k2", use="enc"))
    validator = OidcValidator(keys)
    assert validator.validate(sign(RSA_KEY, "RS256", kid="k1"), now_ms())[0] == "alice"
    assert validator.validate(sign(EC_KEY, "ES256", kid="k1"), now_ms())[0] == "alice"
    with pytest.raises(InvalidToken, match="no key"):
        validator.validate(sign(RSA_KEY, "RS256", kid="k2"), now_ms())  # an encryption key verifies nothing
    # Without a kid the first key of the type is taken, as jose4j's selector takes it.
    assert validator.validate(sign(other, "RS256", kid=None), now_ms())[0] == "alice"
    with pytest.raises(InvalidToken, match="signature is invalid"):
        validator.validate(sign(RSA_KEY, "RS256", kid=None), now_ms())


def test_an_unknown_kid_asks_for_a_refresh_once_a_minute_and_the_refreshed_key_serves() -> None:
    keys = key_set(jwk(RSA_KEY, "k1"))
    base = now_ms()
    asked: list[int] = []
    keys.on_wanted = lambda: asked.append(1)
    validator = OidcValidator(keys)
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = sign(rotated, "RS256", kid="k2")
    for at in (base, base + 1_000, base + 59_000):
        with pytest.raises(InvalidToken, match="no key"):
            validator.validate(token, at)
    assert len(asked) == 1
    with pytest.raises(InvalidToken):
        validator.validate(token, base + 61_000)
    assert len(asked) == 2
    keys.replace(parse_jwks(json.dumps({"keys": [jwk(RSA_KEY, "k1"), jwk(rotated, "k2")]})))
    assert validator.validate(token, base + 62_000)[0] == "alice" and "k2" not in keys.missing


def test_the_client_is_told_invalid_token_and_the_log_the_reason() -> None:
    validator = OidcValidator(key_set(jwk(RSA_KEY, "k1")))
    exchange = OAuthBearerExchange(validator, now_ms)
    token = sign(RSA_KEY, "RS256", aud="other")
    assert exchange.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == b'{"status":"invalid_token"}'
    with pytest.raises(AuthenticationFailed) as failed:
        exchange.step(b"\x01")
    assert str(failed.value) == '{"status":"invalid_token"}' and "Audience" in (failed.value.detail or "")
    good = OAuthBearerExchange(validator, now_ms)
    assert good.step(f"n,,\x01auth=Bearer {sign(RSA_KEY, 'RS256')}\x01\x01".encode()) == b""
    assert good.user == "alice"


SECURED = {"listener.name.sasl.oauthbearer.sasl.server.callback.handler.class":
           "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
           "sasl.enabled.mechanisms": "OAUTHBEARER"}


def test_a_listener_reads_its_settings_as_kafka_does() -> None:
    values = {**SECURED, "sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
              "sasl.oauthbearer.expected.audience": "kafka,kafka-admin",
              "listener.name.sasl.oauthbearer.sasl.oauthbearer.expected.issuer": ISSUER,
              "listener.name.sasl.sasl.oauthbearer.clock.skew.seconds": "5"}
    settings = listener_sasl(values, "SASL")
    assert isinstance(settings.oauth, OidcValidator) and settings.jwks is not None
    s = settings.jwks.settings
    assert (s.expected_audience, s.expected_issuer, s.clock_skew_s) == (("kafka", "kafka-admin"), ISSUER, 5)
    # Without the handler the listener keeps Kafka's unsecured validator.
    assert listener_sasl({"sasl.enabled.mechanisms": "OAUTHBEARER"}, "SASL").jwks is None


@pytest.mark.parametrize(("extra", "message"), [
    ({}, "JWKS URL"),
    ({"sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"}, "not an http"),
    ({"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks", "sasl.oauthbearer.expected.issuer": ISSUER},
     "expected.audience: required"),
    ({"sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks", "sasl.oauthbearer.expected.audience": "kafka"},
     "expected.issuer: required"),
    ({"listener.name.sasl.oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"}, "not supported"),
])
def test_a_listener_kafka_would_not_start_with_is_refused(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        listener_sasl({**SECURED, **extra}, "SASL")
