"""JKS and PKCS12 stores made by Java's keytool (an independent implementation of both formats)
read back to the same key, chain and CA certificates as the PEM they came from; wrong passwords,
tampering and the wrong kind of file are refused."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.security.keystores import KeystoreError, read_keystore, read_truststore, store_format
from broker.security.tls import server_context

KEYTOOL = shutil.which("keytool")
needs_keytool = pytest.mark.skipif(KEYTOOL is None, reason="keytool (a Java runtime) is not installed")
STORE_PASSWORD = "store-secret"


def _keytool(*args: str) -> None:
    assert KEYTOOL is not None
    subprocess.run([KEYTOOL, *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA(organization_name="kcoord keystore test CA")


@pytest.fixture(scope="module")
def server(ca: trustme.CA) -> trustme.LeafCert:
    return ca.issue_cert("localhost", "127.0.0.1")


def _p12(server: trustme.LeafCert, path: Path, password: str = STORE_PASSWORD) -> Path:
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), password=None)
    chain = [x509.load_pem_x509_certificate(blob.bytes()) for blob in server.cert_chain_pems]
    data = pkcs12.serialize_key_and_certificates(b"kcoord", key, chain[0], chain[1:],  # type: ignore[arg-type]
                                                 serialization.BestAvailableEncryption(password.encode()))
    path.write_bytes(data)
    return path


def _ders(pem_text: str) -> list[bytes]:
    blocks = [b for b in pem_text.split("-----END CERTIFICATE-----") if "BEGIN CERTIFICATE" in b]
    return [ssl.PEM_cert_to_DER_cert(b + "-----END CERTIFICATE-----\n") for b in blocks]


def _same_key(pem_a: str, pem_b: bytes) -> bool:
    a = serialization.load_pem_private_key(pem_a.encode(), password=None)
    b = serialization.load_pem_private_key(pem_b, password=None)
    raw = serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    return a.private_bytes(*raw) == b.private_bytes(*raw)


@needs_keytool
@pytest.mark.parametrize("key_password", ["", "key-secret"])
def test_a_jks_keystore_from_keytool_gives_back_key_and_chain(server: trustme.LeafCert, tmp_path: Path,
                                                              key_password: str) -> None:
    jks = tmp_path / "broker.jks"
    _keytool("-importkeystore", "-srckeystore", str(_p12(server, tmp_path / "in.p12")), "-srcstoretype", "PKCS12",
             "-srcstorepass", STORE_PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS",
             "-deststorepass", STORE_PASSWORD, "-destkeypass", key_password or STORE_PASSWORD, "-noprompt")
    data = jks.read_bytes()
    assert store_format(data, "JKS") == "JKS"
    entry = read_keystore(data, "JKS", STORE_PASSWORD, key_password)
    assert entry is not None
    assert _same_key(entry.key_pem, server.private_key_pem.bytes())
    assert _ders(entry.chain_pem) == [ssl.PEM_cert_to_DER_cert(b.bytes().decode()) for b in server.cert_chain_pems]
    with pytest.raises(KeystoreError, match="password is incorrect"):
        read_keystore(data, "JKS", "wrong", key_password)
    tampered = bytearray(data)
    tampered[len(tampered) // 2] ^= 0x01
    with pytest.raises(KeystoreError):
        read_keystore(bytes(tampered), "JKS", STORE_PASSWORD, key_password)
    if key_password:  # the key's own password differs from the store's
        with pytest.raises(KeystoreError, match="key password is wrong"):
            read_keystore(data, "JKS", STORE_PASSWORD, "not-the-key-password")


@needs_keytool
@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_a_truststore_from_keytool_gives_back_the_ca(ca: trustme.CA, tmp_path: Path, store_type: str) -> None:
    ca_pem = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    store = tmp_path / f"trust.{store_type.lower()}"
    _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem), "-keystore", str(store),
             "-storetype", store_type, "-storepass", STORE_PASSWORD)
    trusted = read_truststore(store.read_bytes(), store_type, STORE_PASSWORD)
    assert _ders(trusted) == [ssl.PEM_cert_to_DER_cert(ca.cert_pem.bytes().decode())]
    if store_type == "JKS":  # Java reads a JKS truststore without its password, unchecked
        assert read_truststore(store.read_bytes(), "JKS", "") == trusted


def test_a_pkcs12_keystore_also_reads_as_jks_as_java_does(server: trustme.LeafCert, tmp_path: Path) -> None:
    data = _p12(server, tmp_path / "broker.p12").read_bytes()
    for declared in ("PKCS12", "JKS"):
        entry = read_keystore(data, declared, STORE_PASSWORD, "")
        assert entry is not None and _same_key(entry.key_pem, server.private_key_pem.bytes())
    with pytest.raises(KeystoreError, match="password is incorrect"):
        read_keystore(data, "PKCS12", "wrong", "")


def test_the_declared_type_and_the_file_must_agree(server: trustme.LeafCert, tmp_path: Path) -> None:
    pem = server.private_key_and_cert_chain_pem.bytes()
    assert read_keystore(pem, "JKS", "", "") is None  # PEM is read by ssl itself, whatever the type
    with pytest.raises(KeystoreError, match="no PEM"):
        read_keystore(_p12(server, tmp_path / "x.p12").read_bytes(), "PEM", STORE_PASSWORD, "")
    with pytest.raises(KeystoreError, match="JKS keystore, not PKCS12"):
        read_keystore(b"\xfe\xed\xfe\xed" + bytes(40), "PKCS12", "", "")
    with pytest.raises(KeystoreError):
        read_keystore(b"\xfe\xed\xfe\xed\x00\x00\x00\x02\x00\x00\x00\x05", "JKS", "", "")  # truncated


@needs_keytool
def test_a_server_context_from_jks_stores_completes_a_handshake(ca: trustme.CA, server: trustme.LeafCert,
                                                                 tmp_path: Path) -> None:
    jks = tmp_path / "broker.jks"
    _keytool("-importkeystore", "-srckeystore", str(_p12(server, tmp_path / "in.p12")), "-srcstoretype", "PKCS12",
             "-srcstorepass", STORE_PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS",
             "-deststorepass", STORE_PASSWORD, "-noprompt")
    values = {"ssl.keystore.location": str(jks), "ssl.keystore.type": "JKS", "ssl.keystore.password": STORE_PASSWORD,
              "ssl.key.password": "", "ssl.keystore.certificate.chain": "", "ssl.keystore.key": "",
              "ssl.truststore.location": "", "ssl.truststore.type": "JKS", "ssl.truststore.password": "",
              "ssl.truststore.certificates": "", "ssl.client.auth": "none"}
    server_ctx = server_context(values)
    client_ctx = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    srv = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side, out_bio, peer_in in (("client", client, outgoing, s_in), ("server", srv, s_out, incoming)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out_bio.read())
        if all(done.values()):
            break
    assert all(done.values())
    assert client.getpeercert()["subjectAltName"] == (("DNS", "localhost"), ("IP Address", "127.0.0.1"))
