"""A broker configured as a Kafka broker usually is: JKS keystore and truststore made by keytool,
client certificates required, and ``ssl.principal.mapping.rules`` turning a certificate's subject
into a short user name that ACLs and super.users name. A librdkafka client with a certificate the
rules map is served as that user; one whose subject no rule maps is refused."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from testkit.kcoord import BrokerProcess
from testkit.ports import free_port
from tests.integration.helpers.cluster import wait_for

pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool (a Java runtime) is not installed")]
PASSWORD = "changeit"
RULES = "RULE:^CN=([^,]+),OU=Payments,.*$/$1/L"


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", *args], check=True, capture_output=True, timeout=60)


class Stores:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA(organization_name="kcoord JKS test CA")
        self.dir = directory
        self.ca_pem = directory / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_pem))
        server = self.ca.issue_cert("localhost", "127.0.0.1")
        server_pem = directory / "server.pem"
        server.private_key_and_cert_chain_pem.write_to_path(str(server_pem))
        p12 = directory / "server.p12"
        subprocess.run(["openssl", "pkcs12", "-export", "-in", str(server_pem), "-out", str(p12),
                        "-passout", f"pass:{PASSWORD}", "-name", "broker"], check=True, capture_output=True)
        self.keystore = directory / "server.keystore.jks"
        _keytool("-importkeystore", "-srckeystore", str(p12), "-srcstoretype", "PKCS12", "-srcstorepass", PASSWORD,
                 "-destkeystore", str(self.keystore), "-deststoretype", "JKS", "-deststorepass", PASSWORD, "-noprompt")
        self.truststore = directory / "server.truststore.jks"
        _keytool("-importcert", "-noprompt", "-alias", "CARoot", "-file", str(self.ca_pem), "-keystore",
                 str(self.truststore), "-storetype", "JKS", "-storepass", PASSWORD)

    def client(self, name: str, unit: str) -> tuple[Path, Path]:
        leaf = self.ca.issue_cert(f"{name}@example.test", common_name=name, organization_name="Shop",
                                  organization_unit_name=unit)
        cert, key = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return cert, key


@pytest.fixture(scope="module")
def jks_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Stores, int]]:
    root = tmp_path_factory.mktemp("jks")
    stores = Stores(root / "stores")
    ssl_port = free_port()
    process = BrokerProcess(root / "data", {})
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},SSL://127.0.0.1:{ssl_port}",
        "advertised.listeners": "",
        "ssl.keystore.location": str(stores.keystore), "ssl.keystore.password": PASSWORD,
        "ssl.key.password": PASSWORD,
        "ssl.truststore.location": str(stores.truststore), "ssl.truststore.password": PASSWORD,
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:orders-service",
    })
    process.start()
    process.wait_loaded()
    yield process, stores, ssl_port
    process.kill()


def _conf(stores: Stores, port: int, cert: Path, key: Path) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(stores.ca_pem),
            "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}


def test_a_mapped_certificate_is_served_as_its_short_name(jks_broker: tuple[BrokerProcess, Stores, int]) -> None:
    _, stores, port = jks_broker
    conf = _conf(stores, port, *stores.client("Orders-Service", "Payments"))
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("paid", 1, 1)])["paid"].result(15)  # needs Create: a super user (User:orders-service)
    consumer = Consumer({**conf, "group.id": "billing", "enable.auto.commit": False})
    try:
        errors: list[KafkaException] = []

        def committed() -> bool:
            try:
                consumer.commit(offsets=[TopicPartition("paid", 0, 5)], asynchronous=False)
                return True
            except KafkaException as exc:
                errors.append(exc)
                return False

        wait_for(committed, 60, "the commit acknowledged", step=0.2, seen=lambda: errors[-1:])
        assert consumer.committed([TopicPartition("paid", 0)], timeout=10)[0].offset == 5
    finally:
        consumer.close()
    # Another certificate the rule maps, to billing-app: not a super user, so it may not create topics.
    other = AdminClient(_conf(stores, port, *stores.client("Billing-App", "Payments")))
    with pytest.raises(KafkaException) as denied:
        other.create_topics([NewTopic("unpaid", 1, 1)])["unpaid"].result(15)
    assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_certificate_no_rule_maps_is_refused(jks_broker: tuple[BrokerProcess, Stores, int]) -> None:
    process, stores, port = jks_broker
    errors: list[str] = []
    admin = AdminClient({**_conf(stores, port, *stores.client("intruder", "Elsewhere")),
                         "error_cb": lambda e: errors.append(e.str())})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    wait_for(lambda: "no ssl.principal.mapping.rules rule applies" in process.log(), 60, "the refusal logged",
             step=0.1)
    assert "no ssl.principal.mapping.rules rule applies to 'CN=intruder,OU=Elsewhere,O=Shop'" in process.log()
