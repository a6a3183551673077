"""SASL/OAUTHBEARER with signed tokens from a real identity provider (OIDC, KIP-768) against Apache
Kafka 4.4 and kcoord, both configured with the same Kafka properties (the listener's
``OAuthBearerValidatorCallbackHandler``, the provider's JWKS URL, the expected audience and
issuer) and one provider (testkit/oidc.py): the same SASL messages get the same answers (a good
token, one for another audience, one of another issuer, a tampered one, an unsigned one, an
authorization id that is not the token's subject), and the same clients, which fetch their own
tokens from the provider's token endpoint (librdkafka's ``sasl.oauthbearer.method=oidc``, the Java
client's ``OAuthBearerLoginCallbackHandler``, kafka-python's token provider asking the endpoint),
get the same outcomes under ACLs naming the token's subject.

This module runs its own Kafka beside the session's: a broker validating signed tokens needs the
provider's URL allowed by a JVM system property (``org.apache.kafka.sasl.oauthbearer.allowed.urls``)."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.kafka import run_tool
from testkit.kcoord import BrokerProcess
from testkit.oidc import OidcProvider, provider_libs
from testkit.ports import free_port
from tests.differential.conftest import sasl_listener_pair
from tests.differential.harness import Normalizer, differences
from tests.differential.oauthbearer_exchange import client_message, exchange
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.security import grant_topics

pytestmark = [pytest.mark.differential, pytest.mark.timeout(300)]

HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    libs = provider_libs()
    if libs is None:
        message = ("the OIDC provider is not fetched (bash scripts/maven-libs.sh reference/oidc-provider/pom.xml "
                   "oidc-provider oidc-provider.version)")
        if os.environ.get("KCOORD_REQUIRE_KAFKA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    server = OidcProvider(libs, tmp_path_factory.mktemp("oidc") / "provider.log").start()
    try:
        yield server
    finally:
        server.stop()


def settings(provider: OidcProvider) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": HANDLER,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS,
        "sasl.oauthbearer.jwks.endpoint.url": provider.jwks_url(),
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": provider.issuer(),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }


@pytest.fixture(scope="module")
def kcoord_process(provider: OidcProvider, kafka_libs: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, dict[str, int]]]:
    """The kcoord broker (its log is read) and the SASL_PLAINTEXT port of each broker, by name."""
    kafka, kafka_sasl, kcoord, kcoord_sasl = sasl_listener_pair(kafka_libs, tmp_path_factory.mktemp("oidc-pair"),
                                                                settings(provider))
    kafka.jvm.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={provider.jwks_url()}")
    try:
        kafka.start()
        kcoord.start()
        kcoord.wait_loaded()
        for bootstrap in (kafka.bootstrap, kcoord.bootstrap):
            grant_topics({"bootstrap.servers": bootstrap}, "oidc-", ["User:svc-a"])
        yield kcoord, {"kafka": kafka_sasl, "kcoord": kcoord_sasl}
    finally:
        kcoord.kill()
        kafka.stop()


@pytest.fixture(scope="module")
def brokers(kcoord_process: tuple[BrokerProcess, dict[str, int]]) -> dict[str, int]:
    """The SASL_PLAINTEXT port of each broker, by name."""
    return kcoord_process[1]


def _tampered(token: str) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"{header}.{forged}.{signature}"


def _unsigned(token: str) -> str:
    _header, payload, _signature = token.split(".")
    none = base64.urlsafe_b64encode(b'{"alg":"none"}').decode().rstrip("=")
    return f"{none}.{payload}."


def cases(provider: OidcProvider) -> dict[str, bytes]:
    good = provider.token("svc-a", "kafka")
    return {
        "good": client_message(good),
        "good with its own authzid": client_message(good, authzid="svc-a"),
        "another audience": client_message(provider.token("svc-a", "other")),
        "another issuer": client_message(provider.token("svc-a", "kafka", name="elsewhere")),
        "tampered": client_message(_tampered(good)),
        "unsigned": client_message(_unsigned(good)),
        "another authzid": client_message(good, authzid="bob"),
    }


def test_signed_tokens_get_the_answers_kafka_gives(provider: OidcProvider,
                                                   kcoord_process: tuple[BrokerProcess, dict[str, int]]) -> None:
    kcoord, brokers = kcoord_process
    refusals_before = _refusals(kcoord)
    theirs = Normalizer()({name: exchange(brokers["kafka"], m) for name, m in cases(provider).items()})
    ours = Normalizer()({name: exchange(brokers["kcoord"], m) for name, m in cases(provider).items()})
    # Each refused token is logged once, with its reason, and nothing else is disturbed: a good
    # token still authenticates.
    refused = [name for name in cases(provider) if not name.startswith("good")]
    wait_for(lambda: len(_refusals(kcoord)) >= len(refusals_before) + len(refused), 30, "each refusal logged")
    logged = _refusals(kcoord)[len(refusals_before):]
    assert len(logged) == len(refused), logged
    again = exchange(brokers["kcoord"], client_message(provider.token("svc-a", "kafka")))
    assert isinstance(again, dict) and again["error_code"] == 0 and not again["auth_bytes"], again
    assert isinstance(theirs, dict) and isinstance(ours, dict)
    diff = differences(theirs, ours)
    assert not diff, "Kafka and kcoord differ:\n  " + "\n  ".join(diff)
    # The provider's tokens live an hour: the session ends with the token.
    assert theirs["good"] == {"error_code": 0, "auth_bytes": b"", "session_minutes": 60}
    assert theirs["another audience"] == {"error_code": 0, "auth_bytes": b'{"status":"invalid_token"}',
                                          "session_minutes": 0, "after ^A": 58}


def _refusals(kcoord: BrokerProcess) -> list[str]:
    return [line for line in kcoord.log().splitlines()
            if " sasl.authentication_failed " in line and "mechanism=OAUTHBEARER" in line]


def java_outcome(provider: OidcProvider, port: int, client: str, libs: Path, work: Path) -> tuple[int, list[str]]:
    """What Kafka's TopicCommand lists, logged in with a token it fetches itself for ``client``."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / f"{client}.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        f"sasl.login.callback.handler.class={LOGIN_HANDLER}\n"
        f"sasl.oauthbearer.token.endpoint.url={provider.token_url()}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="{client}" clientSecret="secret" scope="kafka" ;\n')
    listed = run_tool(libs, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", f"127.0.0.1:{port}",
                      "--command-config", str(config), "--list", timeout=120,
                      jvm=(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={provider.token_url()}",))
    return listed.returncode, sorted(t for t in listed.stdout.split() if t.startswith("oidc-"))


def librdkafka_outcome(provider: OidcProvider, port: int, client: str) -> list[str]:
    """Creates ``oidc-<client>-<n>`` and produces to it, as librdkafka's OIDC login fetches its token."""
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    conf: dict[str, Any] = {
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client, "sasl.oauthbearer.client.secret": "secret",
        "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.token.endpoint.url": provider.token_url()}
    topic = f"oidc-{client}-{time.monotonic_ns()}"
    out: list[str] = []
    admin = AdminClient(conf)  # held: a client dropped takes its requests with it
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
        out.append("created")
    except KafkaException as exc:
        out.append(f"create failed {exc.args[0].name()}")
    producer = Producer({**conf, "message.timeout.ms": 30000})
    failures: list[str] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _m: failures.append(err.name()) if err else None)
    producer.flush(60)
    out.append(f"send failed {failures[0]}" if failures else "sent")
    return out


def kafka_python_outcome(provider: OidcProvider, port: int, client: str) -> list[str]:
    """Creates ``oidc-<client>-<n>`` and sends to it with kafka-python, whose token provider asks
    the identity provider's token endpoint (client credentials) for each login."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return provider.token(client, "kafka")

    conf: dict[str, Any] = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SASL_PLAINTEXT",
                            "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Provider()}
    topic = f"oidc-{client}-{time.monotonic_ns()}"
    out: list[str] = []
    admin = KafkaAdminClient(**conf)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        out.append("created")
    except Exception as exc:  # the error's class is the outcome compared
        out.append(f"create failed {type(exc).__name__}")
    producer = KafkaProducer(**conf, max_block_ms=10000)
    try:
        producer.send(topic, b"v").get(timeout=30)
        out.append("sent")
    except Exception as exc:
        out.append(f"send failed {type(exc).__name__}")
    producer.close()
    admin.close()
    return out


def test_clients_fetching_their_own_tokens_see_the_same_outcomes(provider: OidcProvider, brokers: dict[str, int],
                                                                  kafka_libs: Path, tmp_path: Path) -> None:
    outcomes = {}
    for name, port in brokers.items():
        outcomes[name] = {
            "librdkafka svc-a": librdkafka_outcome(provider, port, "svc-a"),
            "librdkafka svc-b (no ACL)": librdkafka_outcome(provider, port, "svc-b"),
            "kafka-python svc-a": kafka_python_outcome(provider, port, "svc-a"),
            "kafka-python svc-b (no ACL)": kafka_python_outcome(provider, port, "svc-b"),
            "java svc-a": java_outcome(provider, port, "svc-a", kafka_libs, tmp_path / name),
        }
    assert outcomes["kcoord"] == outcomes["kafka"] | {"java svc-a": outcomes["kcoord"]["java svc-a"]}
    assert outcomes["kafka"]["librdkafka svc-a"] == ["created", "sent"]
    assert outcomes["kafka"]["librdkafka svc-b (no ACL)"] == ["create failed TOPIC_AUTHORIZATION_FAILED",
                                                             "send failed TOPIC_AUTHORIZATION_FAILED"]
    assert outcomes["kafka"]["kafka-python svc-a"] == ["created", "sent"]
    assert outcomes["kafka"]["kafka-python svc-b (no ACL)"] == ["create failed TopicAuthorizationFailedError",
                                                               "send failed TopicAuthorizationFailedError"]
    # Each lists the topics it holds: svc-a's own, created just before on that broker.
    for name in brokers:
        code, topics = outcomes[name]["java svc-a"]
        assert code == 0 and topics and all(t.startswith("oidc-svc-a-") for t in topics), (name, code, topics)


def test_a_broker_that_cannot_fetch_the_key_set_does_not_start(provider: OidcProvider, tmp_path: Path) -> None:
    """As Kafka's: a listener that could not check a single token is not opened at all."""
    kcoord = BrokerProcess(tmp_path / "data", {})
    sasl = free_port()
    kcoord.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{kcoord.port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        **settings(provider), "sasl.oauthbearer.jwks.endpoint.url": f"http://127.0.0.1:{free_port()}/jwks",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "500"})
    with pytest.raises(RuntimeError, match="cannot fetch the OAUTHBEARER key set"):
        kcoord.start(wait=60)
    kcoord.kill()
