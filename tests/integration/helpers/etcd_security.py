"""A test PKI for a TLS etcd (trustme): a CA, etcd's certificate, an administrator's and kcoord's
client certificates (without a Common Name: etcd's JSON gateway refuses certificates that carry
one), kcoord's as a PEM keystore and as a PKCS12 keystore, and a client certificate of another CA."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from testkit.etcd import EtcdTls

P12_PASSWORD = "p12-secret"


@dataclass(frozen=True)
class EtcdPki:
    etcd: EtcdTls
    ca: Path
    kcoord_pem: Path  # chain and key in one file (ssl.keystore.type PEM)
    kcoord_p12: Path  # PKCS12, password P12_PASSWORD
    other_ca: Path
    other_pem: Path  # a client keystore of the other CA
    with_cn_pem: Path  # of the right CA, with a Common Name


def make_etcd_pki(directory: Path) -> EtcdPki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="kcoord etcd test CA")
    other = trustme.CA(organization_name="another CA")
    server = ca.issue_cert("localhost", "127.0.0.1")
    admin = ca.issue_cert("admin.example.test", organization_name="operators")
    kcoord = ca.issue_cert("kcoord.example.test", organization_name="kcoord")
    stranger = other.issue_cert("kcoord.example.test", organization_name="kcoord")
    named = ca.issue_cert("kcoord.example.test", common_name="kcoord", organization_name="kcoord")

    def path(name: str) -> Path:
        return directory / name

    ca.cert_pem.write_to_path(str(path("ca.pem")))
    other.cert_pem.write_to_path(str(path("other-ca.pem")))
    server.cert_chain_pems[0].write_to_path(str(path("etcd.pem")))
    server.private_key_pem.write_to_path(str(path("etcd-key.pem")))
    admin.cert_chain_pems[0].write_to_path(str(path("admin.pem")))
    admin.private_key_pem.write_to_path(str(path("admin-key.pem")))
    kcoord.private_key_and_cert_chain_pem.write_to_path(str(path("kcoord.pem")))
    stranger.private_key_and_cert_chain_pem.write_to_path(str(path("stranger.pem")))
    named.private_key_and_cert_chain_pem.write_to_path(str(path("kcoord-cn.pem")))
    from cryptography import x509

    key = serialization.load_pem_private_key(kcoord.private_key_pem.bytes(), password=None)
    cert = x509.load_pem_x509_certificate(kcoord.cert_chain_pems[0].bytes())
    path("kcoord.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"kcoord", key, cert, None,  # type: ignore[arg-type]
        serialization.BestAvailableEncryption(P12_PASSWORD.encode())))
    return EtcdPki(EtcdTls(path("ca.pem"), path("etcd.pem"), path("etcd-key.pem"), path("admin.pem"),
                           path("admin-key.pem")),
                   path("ca.pem"), path("kcoord.pem"), path("kcoord.p12"), path("other-ca.pem"), path("stranger.pem"),
                   path("kcoord-cn.pem"))


def node_overrides(pki: EtcdPki, user: str, password: str, *, p12: bool = False) -> dict[str, str]:
    """The etcd.* properties of a node reaching the TLS etcd as ``user``."""
    keystore = ({"etcd.ssl.keystore.location": str(pki.kcoord_p12), "etcd.ssl.keystore.type": "PKCS12",
                 "etcd.ssl.keystore.password": P12_PASSWORD} if p12 else
                {"etcd.ssl.keystore.location": str(pki.kcoord_pem), "etcd.ssl.keystore.type": "PEM"})
    return {**keystore, "etcd.ssl.truststore.location": str(pki.ca), "etcd.ssl.truststore.type": "PEM",
            "etcd.username": user, "etcd.password": password}
