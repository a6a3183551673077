"""SASL/GSSAPI (Kerberos) against a real MIT KDC started for the module, configured as Kafka is:
the broker's keytab and principal in ``listener.name.<l>.gssapi.sasl.jaas.config``
(Krb5LoginModule), ``sasl.kerberos.service.name`` and ``sasl.kerberos.principal.to.local.rules``.
Three clients log in from keytabs of their own: kafka-python (python-gssapi), the Java client
(Krb5LoginModule) and kcat (Debian's librdkafka with Cyrus SASL). The Kerberos principal's short
name is the principal the ACLs see; a client whose key is not the KDC's is refused."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from testkit import kdc as kdc_module
from testkit.kafka import run_tool
from testkit.kcoord import BrokerProcess
from testkit.ports import free_port
from tests.integration.helpers.kerberos import java_client_config, kafka_python_as
from tests.integration.helpers.security import grant_topics

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not kdc_module.available(), reason="needs an MIT KDC (Debian packages krb5-kdc krb5-admin-server)"),
]
gssapi = pytest.importorskip("gssapi", reason="needs python-gssapi (the kerberos extra)")

SUFFIX = uuid.uuid4().hex[:6]
TOPIC = f"krb-{SUFFIX}"
REALM = kdc_module.REALM


@dataclass
class Kerberized:
    kdc: kdc_module.Kdc
    broker: BrokerProcess
    sasl_port: int
    keytabs: dict[str, Path]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    def client_env(self, principal: str) -> dict[str, str]:
        """A client process that logs in as ``principal`` from its keytab."""
        return {**os.environ, **self.kdc.env, "KRB5_CLIENT_KTNAME": str(self.keytabs[principal]),
                "KRB5CCNAME": f"FILE:{self.kdc.dir / ('cc-' + principal.replace('/', '_'))}"}


@pytest.fixture(scope="module")
def kerberized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerberized]:
    directory = tmp_path_factory.mktemp("kerberos")
    kdc = kdc_module.Kdc(directory / "kdc").start()
    try:
        keytabs = {name: kdc.add_principal(name) for name in ("kafka/localhost", "alice", "bob", "etl/worker1")}
        sasl_port = free_port()
        broker = BrokerProcess(directory / "data", {})
        broker.env.update(kdc.env)
        broker.overrides.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://localhost:{sasl_port}",
            "sasl.enabled.mechanisms": "GSSAPI",
            "sasl.kerberos.service.name": "kafka",
            "sasl.kerberos.principal.to.local.rules": "RULE:[2:$1@$0](etl@.*)s/^.*$/etl-service/,DEFAULT",
            "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                f'keyTab="{keytabs["kafka/localhost"]}" principal="kafka/localhost@{REALM}";',
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener administers the test
        })
        broker.start()
        broker.wait_loaded()
        grant_topics({"bootstrap.servers": broker.bootstrap}, "krb-", ["User:alice", "User:etl-service"])
        yield Kerberized(kdc, broker, sasl_port, keytabs)
    finally:
        if "broker" in locals():
            broker.kill()
        kdc.stop()


def _kafka_python(k: Kerberized, principal: str, topic: str) -> str:
    return kafka_python_as(k.bootstrap, k.client_env(principal), topic)


def test_kafka_python_logs_in_from_a_keytab_and_acts_as_its_short_name(kerberized: Kerberized) -> None:
    out = _kafka_python(kerberized, "alice", TOPIC)
    assert "created" in out and "sent" in out, out
    # Bob authenticates (the KDC knows him) but the ACLs name alice and the etl service only.
    out = _kafka_python(kerberized, "bob", f"{TOPIC}-bob")
    assert "create failed TopicAuthorizationFailedError" in out, out
    # etl/worker1@REALM becomes etl-service through the rule before DEFAULT.
    out = _kafka_python(kerberized, "etl/worker1", f"{TOPIC}-etl")
    assert "created" in out and "sent" in out, out


def test_the_java_client_logs_in_from_a_keytab(kerberized: Kerberized, kafka_libs: Path, tmp_path: Path) -> None:
    config = java_client_config(tmp_path, kerberized.keytabs["alice"], f"alice@{REALM}")
    jvm = (f"-Djava.security.krb5.conf={kerberized.kdc.krb5_conf}",)
    created = run_tool(kafka_libs, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", kerberized.bootstrap,
                       "--command-config", str(config), "--create", "--topic", f"{TOPIC}-java", "--partitions", "1",
                       timeout=120, jvm=jvm)
    assert created.returncode == 0, created.stdout + created.stderr
    listed = run_tool(kafka_libs, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", kerberized.bootstrap,
                      "--command-config", str(config), "--list", timeout=120, jvm=jvm)
    assert f"{TOPIC}-java" in listed.stdout.split(), listed.stdout + listed.stderr


def test_kcat_logs_in_with_librdkafka_and_cyrus_sasl(kerberized: Kerberized) -> None:
    kcat = "/usr/bin/kcat"
    if not os.path.exists(kcat):
        pytest.skip("needs kcat (Debian package kcat)")
    # Cyrus SASL names the service principal after the host it connects to: kafka/localhost.
    args = [kcat, "-b", f"localhost:{kerberized.sasl_port}", "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
            "-X", "sasl.kerberos.service.name=kafka", "-X", f"sasl.kerberos.keytab={kerberized.keytabs['alice']}",
            "-X", f"sasl.kerberos.principal=alice@{REALM}"]
    produced = subprocess.run([*args, "-P", "-t", TOPIC], input="from kcat\n", env=kerberized.client_env("alice"),
                              capture_output=True, text=True, timeout=120)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run([*args, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q"],
                              env=kerberized.client_env("alice"), capture_output=True, text=True, timeout=120)
    assert "from kcat" in consumed.stdout.splitlines(), consumed.stdout + consumed.stderr


def test_a_client_whose_key_the_kdc_does_not_know_is_refused(kerberized: Kerberized, tmp_path: Path) -> None:
    # A keytab of a principal the KDC re-keyed since: the client's key no longer matches.
    stale = tmp_path / "stale.keytab"
    stale.write_bytes(kerberized.keytabs["bob"].read_bytes())
    env = {**os.environ, **kerberized.kdc.env}
    subprocess.run([kdc_module.KADMIN_LOCAL, "-r", REALM, "-q", f"cpw -randkey bob@{REALM}"], env=env, check=True,
                   capture_output=True, timeout=60)
    out = kafka_python_as(kerberized.bootstrap, {**kerberized.client_env("bob"), "KRB5_CLIENT_KTNAME": str(stale)},
                          f"{TOPIC}-stale")
    assert "created" not in out and "sent" not in out, out
