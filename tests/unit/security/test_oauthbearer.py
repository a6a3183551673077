"""SASL/OAUTHBEARER with Kafka's unsecured validator: the client's message (RFC 7628), the token's
checks (alg none, no signature, exp, iat, the principal and scope claims, clock skew), Kafka's
JSON error answer and the ``^A`` that ends a failed exchange; and the JAAS configs they are read
from."""

from __future__ import annotations

import pytest

from broker.security.jaas import parse_jaas
from broker.security.oauthbearer import (
    InvalidToken,
    OAuthBearerExchange,
    UnsecuredValidator,
    parse_initial,
)
from broker.security.properties import listener_sasl
from broker.security.sasl_failure import AuthenticationFailed
from testkit.jws import jws

NOW_MS = 1_800_000_000_000


def jwt(claims: dict[str, object], header: dict[str, object] | None = None, signature: str = "") -> str:
    return jws(claims, alg=str((header or {"alg": "none"})["alg"]), signature=signature)


def message(token: str, authzid: str = "", **extensions: str) -> bytes:
    ext = "".join(f"\x01{k}={v}" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}{ext}\x01\x01".encode()


VALID = {"sub": "alice", "iat": NOW_MS / 1000 - 10, "exp": NOW_MS / 1000 + 3600, "scope": "kafka other"}


def test_the_client_message_is_read_as_rfc_7628_writes_it() -> None:
    token = jwt(VALID)
    assert parse_initial(message(token)) == (token, "", {})
    assert parse_initial(message(token, "alice", traceId="42")) == (token, "alice", {"traceId": "42"})
    for bad in (b"", b"y,,\x01auth=Bearer x\x01\x01", b"n,,\x01auth=Bearer x\x01",
                b"n,,\x01traceId=1\x01\x01", b"n,,\x01auth=Basic abc\x01\x01", b"n,,\x01auth=Bearer a b\x01\x01"):
        with pytest.raises(AuthenticationFailed):
            parse_initial(bad)


def test_the_unsecured_validator_checks_what_kafkas_checks() -> None:
    v = UnsecuredValidator(required_scope=("kafka",))
    assert v.validate(jwt(VALID), NOW_MS) == ("alice", int(VALID["exp"] * 1000))  # type: ignore[operator]
    refused = {
        "signed": jwt(VALID, signature="c2ln"),
        "alg": jwt(VALID, header={"alg": "HS256"}),
        "no exp": jwt({k: v for k, v in VALID.items() if k != "exp"}),
        "expired": jwt({**VALID, "exp": NOW_MS / 1000}),
        "issued later": jwt({**VALID, "iat": NOW_MS / 1000 + 5}),
        "no sub": jwt({k: v for k, v in VALID.items() if k != "sub"}),
        "blank sub": jwt({**VALID, "sub": " "}),
        "two parts": "a.b",
        "not json": "bm90.anNvbg.",
    }
    for name, token in refused.items():
        with pytest.raises(InvalidToken):
            v.validate(token, NOW_MS)
        assert name
    with pytest.raises(InvalidToken) as missing:
        v.validate(jwt({**VALID, "scope": ["other"]}), NOW_MS)
    assert missing.value.scope == "[kafka]"
    # A clock skew allowance, another principal claim.
    skewed = UnsecuredValidator(principal_claim="client_id", clock_skew_ms=10_000)
    assert skewed.validate(jwt({**VALID, "client_id": "svc", "iat": NOW_MS / 1000 + 5}), NOW_MS)[0] == "svc"


def test_a_refused_token_is_answered_with_kafkas_json_and_fails_at_the_clients_control_a() -> None:
    exchange = OAuthBearerExchange(UnsecuredValidator(required_scope=("kafka",)), lambda: NOW_MS)
    answer = exchange.step(message(jwt({**VALID, "scope": "other"})))
    assert answer == b'{"status":"insufficient_scope", "scope":"[kafka]"}'
    with pytest.raises(AuthenticationFailed, match="insufficient_scope"):
        exchange.step(b"\x01")
    expired = OAuthBearerExchange(UnsecuredValidator(), lambda: NOW_MS)
    assert expired.step(message(jwt({**VALID, "exp": 1}))) == b'{"status":"invalid_token"}'
    ok = OAuthBearerExchange(UnsecuredValidator(), lambda: NOW_MS)
    assert ok.step(message(jwt(VALID), traceId="1")) == b""
    assert (ok.user, ok.credential_expiry_ms) == ("alice", int(VALID["exp"] * 1000))  # type: ignore[operator]
    with pytest.raises(AuthenticationFailed, match="authorization id"):
        OAuthBearerExchange(UnsecuredValidator(), lambda: NOW_MS).step(message(jwt(VALID), "bob"))


def test_jaas_configs_are_read_as_kafka_reads_them() -> None:
    [entry] = parse_jaas('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                         '  username="admin" password="s e;cret" user_alice=alice-secret;')
    assert (entry.login_module, entry.flag) == ("org.apache.kafka.common.security.plain.PlainLoginModule", "required")
    assert entry.options == {"username": "admin", "password": "s e;cret", "user_alice": "alice-secret"}
    for bad in ("", "Module", "Module bogus;", "Module required key;", "Module required key=\"v\""):
        with pytest.raises(ValueError):
            parse_jaas(bad)


def test_a_listener_reads_its_mechanisms_and_jaas_configs() -> None:
    values = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a-secret";',
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
            'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
            'unsecuredValidatorRequiredScope="kafka admin" unsecuredValidatorAllowableClockSkewMs="500";',
        "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms": "60000",
    }
    ssl = listener_sasl(values, "SASL_SSL")
    assert ssl.mechanisms == ["PLAIN", "OAUTHBEARER"] and ssl.plain_users == {"alice": "a-secret"}
    assert ssl.oauth == UnsecuredValidator(required_scope=("kafka", "admin"), clock_skew_ms=500)
    assert ssl.reauth_ms == {"OAUTHBEARER": 60_000}
    plain = listener_sasl(values, "SASL_PLAINTEXT")
    assert plain.mechanisms == ["SCRAM-SHA-512"] and plain.plain_users is None
    with pytest.raises(ValueError, match=r"oauthbearer\.sasl\.jaas\.config"):
        listener_sasl({**values, "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":
                       "org.apache.kafka.common.security.plain.PlainLoginModule required;"}, "SASL_SSL")
