"""SASL/GSSAPI against Apache Kafka 4.4 and kcoord, both configured with the same Kafka properties
(the listener's Krb5LoginModule JAAS config with the broker's keytab, ``sasl.kerberos.service.name``,
``sasl.kerberos.principal.to.local.rules``) against one real MIT KDC: the same clients (kafka-python
and the Java client, from keytabs) get the same outcomes, as the principal the ACLs see (a short
name by rule, another by DEFAULT, one no ACL names) and for a key the KDC no longer has.

This module runs its own Kafka beside the session's: a Kerberos broker must be started with the
realm's krb5.conf, which the session's reference does not have."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testkit import kdc as kdc_module
from testkit.kafka import KafkaProcess, run_tool
from testkit.kcoord import BrokerProcess
from tests.differential.conftest import sasl_listener_pair
from tests.differential.sessions import reauthentications, verifiable_producer
from tests.integration.helpers.kerberos import java_client_config, kafka_python_as
from tests.integration.helpers.security import grant_topics

pytestmark = [
    pytest.mark.differential,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not kdc_module.available(), reason="needs an MIT KDC (Debian packages krb5-kdc krb5-admin-server)"),
]
pytest.importorskip("gssapi", reason="needs python-gssapi (the kerberos extra)")
REALM = kdc_module.REALM
PRINCIPALS = ("kafka/localhost", "alice", "bob", "etl/worker1", "kafka/rekeyed")
# Both brokers read the realm's krb5.conf: a ticket past its end by more than this is expired to
# them (MIT's and Java's default, 5 minutes, would make the expired-ticket test wait that long).
CLOCKSKEW_S = 10
SHORT_LIFE_S = 5  # the tickets of "brief"
# Sessions end and are renewed while the Java client produces (KIP-368); long enough that the
# short clients of the other tests finish within one.
REAUTH_MS = 10_000


def settings(keytab: Path) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.principal.to.local.rules": "RULE:[2:$1@$0](etl@.*)s/^.*$/etl-service/,DEFAULT",
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
            f'keyTab="{keytab}" principal="kafka/localhost@{REALM}";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "connections.max.reauth.ms": str(REAUTH_MS),
    }


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[kdc_module.Kdc, dict[str, Path]]]:
    kdc = kdc_module.Kdc(tmp_path_factory.mktemp("kdc"), clockskew_s=CLOCKSKEW_S).start()
    try:
        keytabs = {name: kdc.add_principal(name) for name in PRINCIPALS}
        keytabs["brief"] = kdc.add_principal("brief", max_life=f"{SHORT_LIFE_S} seconds")
        yield kdc, keytabs
    finally:
        kdc.stop()


@pytest.fixture(scope="module")
def kcoord_process(realm: tuple[kdc_module.Kdc, dict[str, Path]], kafka_libs: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    """The kcoord broker (its log tells re-authentications) and the SASL_PLAINTEXT bootstrap of
    each broker, by name."""
    kdc, keytabs = realm
    kafka, kafka_sasl, kcoord, kcoord_sasl = sasl_listener_pair(
        kafka_libs, tmp_path_factory.mktemp("kerberos"), settings(keytabs["kafka/localhost"]),
        advertised_host="localhost")
    kafka.jvm.append(f"-Djava.security.krb5.conf={kdc.krb5_conf}")
    kcoord.env.update(kdc.env)
    try:
        kafka.start()
        kcoord.start()
        kcoord.wait_loaded()
        for bootstrap in (kafka.bootstrap, kcoord.bootstrap):
            grant_topics({"bootstrap.servers": bootstrap}, "krb-", ["User:alice", "User:etl-service"])
        yield kcoord, {"kafka": f"localhost:{kafka_sasl}", "kcoord": f"localhost:{kcoord_sasl}"}
    finally:
        kcoord.kill()
        kafka.stop()


@pytest.fixture(scope="module")
def brokers(kcoord_process: tuple[BrokerProcess, dict[str, str]]) -> dict[str, str]:
    """The SASL_PLAINTEXT bootstrap of each broker, by name."""
    return kcoord_process[1]


def outcomes(bootstrap: str, kdc: kdc_module.Kdc, keytabs: dict[str, Path], libs: Path, work: Path) -> dict[str, object]:
    def env(principal: str, keytab: Path | None = None) -> dict[str, str]:
        return {**os.environ, **kdc.env, "KRB5_CLIENT_KTNAME": str(keytab or keytabs[principal]),
                "KRB5CCNAME": f"FILE:{work / ('cc-' + principal.replace('/', '_'))}"}

    def said(output: str) -> list[str]:
        return [line for line in output.splitlines() if line.startswith(("created", "create failed", "sent",
                                                                           "send failed"))]

    work.mkdir(parents=True, exist_ok=True)
    out: dict[str, object] = {
        "alice": said(kafka_python_as(bootstrap, env("alice"), "krb-alice")),
        "bob (no ACL)": said(kafka_python_as(bootstrap, env("bob"), "krb-bob")),
        "etl/worker1 (a rule)": said(kafka_python_as(bootstrap, env("etl/worker1"), "krb-etl")),
    }
    config = java_client_config(work, keytabs["alice"], f"alice@{REALM}")
    listed = run_tool(libs, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--command-config",
                      str(config), "--list", timeout=120, jvm=(f"-Djava.security.krb5.conf={kdc.krb5_conf}",))
    out["java lists"] = (listed.returncode, sorted(t for t in listed.stdout.split() if t.startswith("krb-")))
    return out


def test_gssapi_clients_see_the_same_outcomes(brokers: dict[str, str], realm: tuple[kdc_module.Kdc, dict[str, Path]],
                                              kafka_libs: Path, tmp_path: Path) -> None:
    kdc, keytabs = realm
    theirs = outcomes(brokers["kafka"], kdc, keytabs, kafka_libs, tmp_path / "kafka")
    ours = outcomes(brokers["kcoord"], kdc, keytabs, kafka_libs, tmp_path / "kcoord")
    assert ours == theirs
    assert theirs["alice"] == ["created", "sent"]
    assert theirs["bob (no ACL)"] == ["create failed TopicAuthorizationFailedError",
                                      "send failed TopicAuthorizationFailedError"]
    assert theirs["java lists"] == (0, ["krb-alice", "krb-etl"])


def test_a_key_the_kdc_no_longer_has_is_refused_by_both(brokers: dict[str, str],
                                                       realm: tuple[kdc_module.Kdc, dict[str, Path]],
                                                       tmp_path: Path) -> None:
    kdc, keytabs = realm
    stale = tmp_path / "stale.keytab"
    stale.write_bytes(keytabs["bob"].read_bytes())
    subprocess.run([kdc_module.KADMIN_LOCAL, "-r", REALM, "-q", f"cpw -randkey bob@{REALM}"],
                   env={**os.environ, **kdc.env}, check=True, capture_output=True, timeout=60)
    env = {**os.environ, **kdc.env, "KRB5_CLIENT_KTNAME": str(stale), "KRB5CCNAME": f"FILE:{tmp_path / 'cc'}"}
    for name, bootstrap in brokers.items():
        # Refused, the client retries its authentication until its bootstrap gives up: 8 s of that
        # tell as much as kafka-python's default 30.
        out = kafka_python_as(bootstrap, env, f"krb-stale-{name}", bootstrap_timeout_ms=8000)
        assert "created" not in out.split() and "sent" not in out.split(), (name, out)
        assert "Unable to bootstrap" in out, (name, out)


FIRST_TOKEN = """
import sys, gssapi
context = gssapi.SecurityContext(name=gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service),
                                 usage="initiate")
token = context.step()
print(token.hex(), gssapi.Credentials(usage="initiate").lifetime)
"""


def test_an_expired_ticket_is_refused_by_both(kcoord_process: tuple[BrokerProcess, dict[str, str]],
                                              realm: tuple[kdc_module.Kdc, dict[str, Path]], tmp_path: Path) -> None:
    """A client's first GSSAPI token (its AP-REQ) made while its service ticket was good, and sent
    once the ticket has expired (past its end and the realm's clock skew): both brokers refuse it
    with SASL_AUTHENTICATION_FAILED. A well-behaved client library never sends such a token; a
    stolen or delayed one is what this is."""
    import sys
    import time

    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from protocol.messages.sasl_handshake import SaslHandshakeRequest

    kdc, keytabs = realm
    kcoord, brokers = kcoord_process

    def refusals() -> int:
        return sum(1 for line in kcoord.log().splitlines()
                   if " sasl.authentication_failed " in line and "mechanism=GSSAPI" in line)

    refused_before = refusals()
    tokens: dict[str, bytes] = {}
    expired_after = 0.0
    for name in brokers:  # a token of its own for each (each broker keeps its own replay cache)
        env = {**os.environ, **kdc.env, "KRB5_CLIENT_KTNAME": str(keytabs["brief"]),
               "KRB5CCNAME": f"FILE:{tmp_path / ('cc-' + name)}"}
        made = subprocess.run([sys.executable, "-c", FIRST_TOKEN], env=env, capture_output=True, text=True,
                              timeout=60, check=True)
        token_hex, lifetime = made.stdout.split()
        tokens[name] = bytes.fromhex(token_hex)
        assert int(lifetime) <= SHORT_LIFE_S, made.stdout
        expired_after = max(expired_after, time.time() + int(lifetime) + CLOCKSKEW_S + 1)
    # The condition is the brokers' clock passing the ticket's end plus the skew they allow: no
    # event announces it, so the wait is until that moment.
    while time.time() < expired_after:
        time.sleep(min(1.0, expired_after - time.time()))
    answers: dict[str, object] = {}
    for name, bootstrap in brokers.items():
        with WireClient("127.0.0.1", int(bootstrap.rsplit(":", 1)[1]), timeout=30.0) as c:
            assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="GSSAPI")).error_code == 0
            try:
                answers[name] = c.call(ApiKey.SaslAuthenticate, 2,
                                       SaslAuthenticateRequest(auth_bytes=tokens[name])).error_code
            except ConnectionError:
                answers[name] = "connection closed without an answer"
    assert answers == {"kafka": 58, "kcoord": 58}  # SASL_AUTHENTICATION_FAILED
    # Logged once, and nothing else disturbed: alice still logs in and produces.
    assert refusals() == refused_before + 1
    env = {**os.environ, **kdc.env, "KRB5_CLIENT_KTNAME": str(keytabs["alice"]),
           "KRB5CCNAME": f"FILE:{tmp_path / 'cc-alice'}"}
    assert kafka_python_as(brokers["kcoord"], env, "krb-after-expired").split()[:2] == ["created", "sent"]


def test_the_java_client_reauthenticates_and_keeps_producing(kcoord_process: tuple[BrokerProcess, dict[str, str]],
                                                             realm: tuple[kdc_module.Kdc, dict[str, Path]],
                                                             kafka_libs: Path, tmp_path: Path) -> None:
    """KIP-368 with Kerberos: Kafka's VerifiableProducer, logged in from alice's keytab, produces for
    about two of its sessions; it re-authenticates (a new GSS-API context on the same connection)
    and every record is acknowledged, by both brokers."""
    kcoord, bootstraps = kcoord_process
    kdc, keytabs = realm
    config = java_client_config(tmp_path, keytabs["alice"], f"alice@{REALM}")
    before = reauthentications(kcoord, "GSSAPI")

    def produce(name: str) -> dict[str, object]:
        topic = f"krb-reauth-{name}"
        env = {**os.environ, **kdc.env, "KRB5_CLIENT_KTNAME": str(keytabs["alice"]),
               "KRB5CCNAME": f"FILE:{tmp_path / f'cc-alice-{name}'}"}  # a credential cache each
        assert "created" in kafka_python_as(bootstraps[name], env, topic).split()  # the topic, as alice
        return verifiable_producer(kafka_libs, bootstraps[name], topic, config, records=30, per_second=2,
                                   jvm=(f"-Djava.security.krb5.conf={kdc.krb5_conf}",))

    # Both brokers at once: each producer spends its ~15 s waiting on its rate.
    with ThreadPoolExecutor(2) as pool:
        outcomes = dict(zip(bootstraps, pool.map(produce, bootstraps), strict=True))
    assert outcomes["kcoord"] == outcomes["kafka"] == {"exit": 0, "acked": 30, "errors": []}
    assert reauthentications(kcoord, "GSSAPI") > before


def test_a_broker_whose_keytab_the_kdc_no_longer_matches_does_not_start(
        realm: tuple[kdc_module.Kdc, dict[str, Path]], kafka_libs: Path, tmp_path: Path) -> None:
    """The broker's own keytab is stale (its service was re-keyed since): Kafka's broker cannot log
    in at startup and stops; so does kcoord, saying why, rather than refusing every client."""
    kdc, keytabs = realm
    stale = tmp_path / "stale-service.keytab"
    stale.write_bytes(keytabs["kafka/rekeyed"].read_bytes())
    subprocess.run([kdc_module.KADMIN_LOCAL, "-r", REALM, "-q", f"cpw -randkey kafka/rekeyed@{REALM}"],
                   env={**os.environ, **kdc.env}, check=True, capture_output=True, timeout=60)
    properties = {**settings(stale), "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                  "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                  f'keyTab="{stale}" principal="kafka/rekeyed@{REALM}";'}
    kafka, _kafka_sasl, kcoord, _kcoord_sasl = sasl_listener_pair(kafka_libs, tmp_path / "pair", properties)
    kafka.jvm.append(f"-Djava.security.krb5.conf={kdc.krb5_conf}")
    kcoord.env.update(kdc.env)
    refusals: dict[str, str] = {}
    for name, broker in (("kafka", kafka), ("kcoord", kcoord)):
        try:
            broker.start(wait=120)
            refusals[name] = "started"
        except RuntimeError as exc:
            refusals[name] = str(exc)
        finally:
            if isinstance(broker, KafkaProcess):
                broker.stop()
            else:
                broker.kill()
    assert "LoginException" in refusals["kafka"], refusals["kafka"][-3000:]
    assert "cannot log in to Kerberos as kafka/rekeyed@" in refusals["kcoord"], refusals["kcoord"][-3000:]
