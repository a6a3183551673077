"""A test CA with a broker certificate and a client certificate (trustme), and a kcoord broker with
all four listener kinds at once: PLAINTEXT, SSL (client certificates requested), SASL_PLAINTEXT
and SASL_SSL, with bootstrap SCRAM users."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme

from testkit.kcoord import BrokerProcess
from testkit.ports import free_port

USERS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}
CLIENT_CN = "orders-service"


@dataclass
class Pki:
    ca: Path
    server: Path
    client_cert: Path
    client_key: Path
    # More client certificates (CN=<name>,OU=Payments,O=Shop): name -> (certificate, key).
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)


def make_pki(directory: Path, clients: tuple[str, ...] = ()) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="kcoord test CA")
    server = ca.issue_cert("localhost", "127.0.0.1")
    pki = Pki(directory / "ca.pem", directory / "server.pem", directory / "client.pem", directory / "client.key")
    ca.cert_pem.write_to_path(str(pki.ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(pki.server))
    for name in (CLIENT_CN, *clients):
        client = ca.issue_cert(f"{name}@example.test", common_name=name, organization_name="Shop",
                               organization_unit_name="Payments")
        cert, key = (pki.client_cert, pki.client_key) if name == CLIENT_CN else \
            (directory / f"{name}.pem", directory / f"{name}.key")
        client.cert_chain_pems[0].write_to_path(str(cert))
        client.private_key_pem.write_to_path(str(key))
        if name != CLIENT_CN:
            pki.clients[name] = (cert, key)
    return pki


@dataclass
class SecureBroker:
    process: BrokerProcess
    pki: Pki
    ports: dict[str, int]

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def confluent_conf(self, listener: str, mechanism: str = "PLAIN", user: str = "alice",
                       password: str | None = None, client_cert: bool = False) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if listener in ("SSL", "SASL_SSL"):
            conf["ssl.ca.location"] = str(self.pki.ca)
            if client_cert:
                conf["ssl.certificate.location"] = str(self.pki.client_cert)
                conf["ssl.key.location"] = str(self.pki.client_key)
        if listener.startswith("SASL"):
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": USERS.get(user, "x") if password is None else password})
        return conf


def start_secure_broker(directory: Path, extra: dict[str, str] | None = None) -> SecureBroker:
    pki = make_pki(directory / "pki")
    ports = {name: free_port() for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    process = BrokerProcess(directory / "data", {})
    ports["PLAINTEXT"] = process.port
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items() if name != "PLAINTEXT")
    process.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{process.port},{listeners}",
        "advertised.listeners": "",
        "ssl.keystore.location": str(pki.server),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": "requested",
        "sasl.bootstrap.users": ",".join(f"{u}:{p}" for u, p in USERS.items()),
        **(extra or {}),
    })
    process.start()
    process.wait_loaded()
    return SecureBroker(process, pki, ports)


def _sasl_wire_client(secure: SecureBroker, user: str) -> Any:
    """A raw protocol client on the SASL_PLAINTEXT listener, authenticated as ``user`` with PLAIN."""
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from protocol.messages.sasl_handshake import SaslHandshakeRequest
    from tests.integration.helpers.security import USERS

    c = WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"])
    assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    assert c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
        auth_bytes=f"\0{user}\0{USERS[user]}".encode())).error_code == 0
    return c




def scram_wire_client(port: int, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                      token: bool = False, answers: list[Any] | None = None) -> tuple[Any, int]:
    """A raw protocol client authenticated with SCRAM by scramp (an independent SCRAM client); with
    ``token``, as Kafka's clients authenticate with a delegation token (``tokenauth=true``, the
    token id as user, the HMAC in base64 as password). Returns the client and the authentication's
    error code (0: authenticated); ``answers`` collects the SaslAuthenticate answers."""
    from kclient.wire_client import WireClient

    c = WireClient("127.0.0.1", port)
    return c, scram_exchange(c, user, password, mechanism, token, answers)


def scram_exchange(c: Any, user: str, password: str, mechanism: str = "SCRAM-SHA-256", token: bool = False,
                   answers: list[Any] | None = None) -> int:
    """SaslHandshake and the SCRAM exchange on connection ``c`` (a first authentication, or a
    re-authentication of one already authenticated); the error code (0: authenticated)."""
    import scramp

    from protocol.messages import ApiKey
    from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from protocol.messages.sasl_handshake import SaslHandshakeRequest

    shaken = c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism=mechanism))
    if shaken.error_code:
        return int(shaken.error_code)
    client = scramp.ScramClient([mechanism], user, password)
    first = client.get_client_first()
    if token:
        first += ",tokenauth=true"
        client.client_first_bare += ",tokenauth=true"
    answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=first.encode()))
    if answer.error_code:
        return int(answer.error_code)
    client.set_server_first(answer.auth_bytes.decode())
    answer = c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
    if answers is not None:
        answers.append(answer)
    if answer.error_code:
        return int(answer.error_code)
    client.set_server_final(answer.auth_bytes.decode())  # the server proved it knows the credential too
    return 0


def grant_topics(conf: dict[str, Any], prefix: str, principals: list[str]) -> None:
    """Through an admin client of ``conf``: ALL on the topics named ``prefix``… for each principal."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(conf)
    bindings = [AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, p, "*", AclOperation.ALL,
                           AclPermissionType.ALLOW) for p in principals]
    for future in admin.create_acls(bindings).values():
        future.result(30)
