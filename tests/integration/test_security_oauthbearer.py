"""SASL/OAUTHBEARER with unsecured tokens (Kafka's development validator), configured as Kafka is
(``listener.name.<l>.oauthbearer.sasl.jaas.config`` with ``unsecuredValidatorRequiredScope``), with
three clients making their own tokens: librdkafka (``enable.sasl.oauthbearer.unsecure.jwt``),
kafka-python (a token provider) and Java (``OAuthBearerLoginModule`` with
``unsecuredLoginStringClaim_sub``). The token's subject is the principal the ACLs see; a token
without the required scope, or expired, is refused. The same listener's PLAIN checks the users of
its own JAAS config, as Kafka's does."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from testkit.jws import unsecured_jwt
from testkit.kafka import run_tool
from tests.integration.helpers.security import SecureBroker, grant_topics

pytestmark = pytest.mark.timeout(180)
SUFFIX = uuid.uuid4().hex[:6]
TOPIC = f"oauth-{SUFFIX}"
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredValidatorRequiredScope="kafka";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_admin="admin-secret" user_carol="carol-jaas";')

SECURE_OVERRIDES = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    # PLAIN's sessions on this listener last a minute; the others' are not bounded.
    "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "60000",
}


def prepare_secure(broker: SecureBroker) -> None:
    admin = broker.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin")
    grant_topics(admin, "oauth-", ["User:alice"])
    group = AclBinding(ResourceType.GROUP, "oauth-", ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
    client = AdminClient(admin)  # kept while its futures complete
    for future in client.create_acls([group]).values():
        future.result(10)


def _conf(secure: SecureBroker, principal: str, scope: str = "kafka") -> dict[str, Any]:
    return {"bootstrap.servers": secure.bootstrap("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} scope={scope}"}


def test_librdkafka_writes_and_reads_as_the_tokens_subject(secure: SecureBroker) -> None:
    producer = Producer(_conf(secure, "alice"))
    producer.produce(TOPIC, b"from alice")
    assert producer.flush(30) == 0
    consumer = Consumer({**_conf(secure, "alice"), "group.id": f"oauth-{SUFFIX}", "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    try:
        deadline = time.monotonic() + 60
        got = None
        while got is None and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got = m.value()
        assert got == b"from alice"
    finally:
        consumer.close()
    # Bob's token authenticates; the ACLs, which name alice only, refuse him the topic.
    bob = AdminClient(_conf(secure, "bob"))
    metadata = bob.list_topics(TOPIC, timeout=30)
    assert metadata.topics[TOPIC].error is not None
    assert metadata.topics[TOPIC].error.code() == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_a_token_without_the_required_scope_is_refused(secure: SecureBroker) -> None:
    errors: list[Any] = []
    producer = Producer({**_conf(secure, "alice", scope="other"), "error_cb": errors.append})
    deadline = time.monotonic() + 60
    while not any("insufficient_scope" in str(e) for e in errors):
        assert time.monotonic() < deadline, f"no authentication error seen: {errors}"
        producer.poll(0.2)
    assert all(e.code() != 0 for e in errors)


def _raw(secure: SecureBroker, token: bytes) -> tuple[Any, Any]:
    c = WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"])
    assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == 0
    first = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=token))
    second = None
    if first.error_code == 0 and first.auth_bytes:
        second = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=b"\x01"))
    return first, second


def test_refusals_on_the_wire_and_the_session_lifetime(secure: SecureBroker) -> None:
    def message(token: str) -> bytes:
        return f"n,,\x01auth=Bearer {token}\x01\x01".encode()

    ok, _ = _raw(secure, message(unsecured_jwt("alice", lifetime_s=600)))
    assert ok.error_code == 0 and ok.auth_bytes == b""
    assert 480_000 <= ok.session_lifetime_ms <= 600_000  # the session ends with the token
    challenge, final = _raw(secure, message(unsecured_jwt("alice", lifetime_s=-60)))
    assert challenge.auth_bytes == b'{"status":"invalid_token"}'
    assert final is not None and final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    challenge, final = _raw(secure, message(unsecured_jwt("alice", scope="other")))
    assert challenge.auth_bytes == b'{"status":"insufficient_scope", "scope":"[kafka]"}'
    assert final is not None and final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    garbage, _ = _raw(secure, b"n,,\x01auth=Basic x\x01\x01")
    assert garbage.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_kafka_python_authenticates_with_its_token_provider(secure: SecureBroker) -> None:
    from kafka import KafkaAdminClient
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return unsecured_jwt("alice")

    admin = KafkaAdminClient(bootstrap_servers=secure.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider())
    try:
        assert TOPIC in admin.list_topics()  # alice may describe her topic
    finally:
        admin.close()


def test_the_java_client_authenticates_with_its_unsecured_login(
        secure: SecureBroker, kafka_libs: Path, tmp_path: Path) -> None:
    config = tmp_path / "oauth.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",kafka";\n')
    listed = run_tool(kafka_libs, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server",
                      secure.bootstrap("SASL_PLAINTEXT"), "--command-config", str(config), "--list", timeout=120)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert TOPIC in listed.stdout.split()  # alice may describe her topic


def test_plain_on_this_listener_checks_its_jaas_users(secure: SecureBroker) -> None:
    lifetimes: list[int] = []

    def plain(port: int, user: str, password: str) -> int:
        c = WireClient("127.0.0.1", port)
        assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
        lifetimes.append(answer.session_lifetime_ms)
        return int(answer.error_code)

    port = secure.ports["SASL_PLAINTEXT"]
    assert plain(port, "carol", "carol-jaas") == 0
    assert lifetimes == [60_000]  # listener.name.sasl_plaintext.plain.connections.max.reauth.ms
    assert plain(port, "admin", "admin-secret") == 0
    assert plain(port, "alice", "alice-secret") == ErrorCode.SASL_AUTHENTICATION_FAILED  # not a JAAS user
