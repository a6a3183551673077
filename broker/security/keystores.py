"""Key and trust stores in the formats Kafka brokers are configured with: JKS, PKCS12 and PEM.

Python's ``ssl`` reads PEM only, so a store is turned into PEM text here: the certificate chain and
private key of a keystore, the CA certificates of a truststore. As in Java (and so in Kafka), a store
of type JKS may also be a PKCS12 file (Java's keystore compatibility mode); a PEM file is read
whatever the type says, which keeps configurations written for PEM-only releases working.

The JKS layout (Sun's proprietary keystore):

    magic 0xFEEDFEED, version (1 or 2), entry count      -- big-endian ints
    per entry: tag (1 private key, 2 trusted certificate), alias (Java modified UTF-8 with a
               2-byte length), creation time (8 bytes)
      tag 1: encrypted key (4-byte length + DER EncryptedPrivateKeyInfo), chain length,
             per certificate: [version 2: type as UTF] 4-byte length + DER
      tag 2: [version 2: type as UTF] 4-byte length + DER
    SHA-1 over (store password as UTF-16BE, b"Mighty Aphrodite", every byte before it)

A private key is protected by Sun's KeyProtector: the encrypted data is a 20-byte salt, the key
XORed with a SHA-1 keystream (block i = SHA-1(password UTF-16BE + block i-1), block 0 = the salt),
and a 20-byte SHA-1 over (password UTF-16BE + the plain key) that checks the password."""

from __future__ import annotations

import hashlib
import hmac
import ssl
import struct
from dataclasses import dataclass

JKS_MAGIC = 0xFEEDFEED
JCEKS_MAGIC = 0xCECECECE
_KEY_PROTECTOR_OID = "1.3.6.1.4.1.42.2.17.1.1"
_INTEGRITY_SALT = b"Mighty Aphrodite"
_PEM_MARK = b"-----BEGIN "


class KeystoreError(ValueError):
    """A store that cannot be read: wrong password, corrupt file, unsupported format or content."""


@dataclass(frozen=True)
class KeyEntry:
    """A keystore's private key (PEM, unencrypted) and its certificate chain (PEM, leaf first)."""

    key_pem: str
    chain_pem: str


def _utf16be(password: str) -> bytes:
    return password.encode("utf-16-be")


# ---- DER, just enough for EncryptedPrivateKeyInfo ----------------------------------------------

def _der_item(data: bytes, pos: int) -> tuple[int, bytes, int]:
    """(tag, content, position after the item) of the DER item at ``pos``."""
    if pos + 2 > len(data):
        raise KeystoreError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise KeystoreError("bad DER length")
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise KeystoreError("truncated DER")
    return tag, data[pos:pos + length], pos + length


def _oid_text(content: bytes) -> str:
    if not content:
        raise KeystoreError("empty OID")
    parts = [content[0] // 40, content[0] % 40]
    value = 0
    for byte in content[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _encrypted_key(der: bytes) -> tuple[str, bytes]:
    """The algorithm OID and encrypted bytes of an EncryptedPrivateKeyInfo."""
    tag, body, _ = _der_item(der, 0)
    if tag != 0x30:
        raise KeystoreError("EncryptedPrivateKeyInfo is not a SEQUENCE")
    tag, algorithm, after = _der_item(body, 0)
    if tag != 0x30:
        raise KeystoreError("AlgorithmIdentifier is not a SEQUENCE")
    tag, oid, _ = _der_item(algorithm, 0)
    if tag != 0x06:
        raise KeystoreError("AlgorithmIdentifier has no OID")
    tag, encrypted, _ = _der_item(body, after)
    if tag != 0x04:
        raise KeystoreError("encrypted key is not an OCTET STRING")
    return _oid_text(oid), encrypted


def unprotect_jks_key(protected: bytes, password: str) -> bytes:
    """The PKCS#8 DER of a key protected by Sun's KeyProtector."""
    if len(protected) < 40:
        raise KeystoreError("protected key too short")
    salt, body, check = protected[:20], protected[20:-20], protected[-20:]
    secret = _utf16be(password)
    stream = bytearray()
    block = salt
    while len(stream) < len(body):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(body, stream, strict=False))
    if not hmac.compare_digest(hashlib.sha1(secret + plain).digest(), check):
        raise KeystoreError("the key password is wrong (or the key is corrupt)")
    return plain


# ---- JKS ----------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise KeystoreError("truncated keystore")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self) -> int:
        return int(struct.unpack(">H", self.take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def utf(self) -> str:
        # Java's modified UTF-8 differs from UTF-8 only for NUL and supplementary characters,
        # neither of which a store's alias or certificate type holds in practice.
        return self.take(self.u16()).decode("utf-8", errors="replace")

    def blob(self) -> bytes:
        return self.take(self.u32())


@dataclass
class JksStore:
    keys: dict[str, tuple[bytes, list[bytes]]]  # alias -> (protected key, DER certificate chain)
    certificates: dict[str, bytes]  # alias -> DER trusted certificate


def parse_jks(data: bytes, store_password: str | None) -> JksStore:
    """The entries of a JKS file; its integrity checked with ``store_password`` when one is given
    (Java, too, reads a store without a password unchecked)."""
    r = _Reader(data)
    magic = r.u32()
    if magic == JCEKS_MAGIC:
        raise KeystoreError("JCEKS keystores are not supported; convert to PKCS12 with keytool -importkeystore")
    if magic != JKS_MAGIC:
        raise KeystoreError("not a JKS keystore")
    version = r.u32()
    if version not in (1, 2):
        raise KeystoreError(f"JKS version {version} is not supported")
    keys: dict[str, tuple[bytes, list[bytes]]] = {}
    certificates: dict[str, bytes] = {}
    for _ in range(r.u32()):
        tag = r.u32()
        alias = r.utf()
        r.take(8)  # creation time
        if tag == 1:
            protected = r.blob()
            chain = []
            for _ in range(r.u32()):
                if version == 2:
                    _check_x509(r.utf())
                chain.append(r.blob())
            keys[alias] = (protected, chain)
        elif tag == 2:
            if version == 2:
                _check_x509(r.utf())
            certificates[alias] = r.blob()
        else:
            raise KeystoreError(f"JKS entry of unknown kind {tag} ({alias!r})")
    digest_at = r.pos
    stored = r.take(20)
    if store_password:
        expected = hashlib.sha1(_utf16be(store_password) + _INTEGRITY_SALT + data[:digest_at]).digest()
        if not hmac.compare_digest(expected, stored):
            raise KeystoreError("keystore was tampered with, or the password is incorrect")
    return JksStore(keys, certificates)


def _check_x509(kind: str) -> None:
    if kind != "X.509":
        raise KeystoreError(f"certificate type {kind!r} is not supported")


# ---- what the TLS context needs ---------------------------------------------------------------

def _pem_certs(ders: list[bytes]) -> str:
    return "".join(ssl.DER_cert_to_PEM_cert(der) for der in ders)


def _key_pem_from_der(pkcs8: bytes) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_der_private_key(pkcs8, password=None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _jks_key(data: bytes, store_password: str, key_password: str) -> KeyEntry:
    store = parse_jks(data, store_password)
    if len(store.keys) != 1:
        raise KeystoreError(f"the keystore must hold exactly one private key entry, it holds {len(store.keys)}")
    protected, chain = next(iter(store.keys.values()))
    oid, encrypted = _encrypted_key(protected)
    if oid != _KEY_PROTECTOR_OID:
        raise KeystoreError(f"private key protected by {oid}, not the JKS key protector")
    pkcs8 = unprotect_jks_key(encrypted, key_password or store_password)
    return KeyEntry(_key_pem_from_der(pkcs8), _pem_certs(chain))


def _pkcs12(data: bytes, password: str) -> tuple[str | None, list[str]]:
    """(key PEM or None, certificates as PEM: the key's own first)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        raise KeystoreError(f"not a PKCS12 store, or the password is incorrect ({exc})") from None
    certs = ([cert] if cert is not None else []) + list(extra)
    pems = [c.public_bytes(serialization.Encoding.PEM).decode() for c in certs]
    key_pem = None if key is None else key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    return key_pem, pems


def store_format(data: bytes, declared: str) -> str:
    """What the bytes are: PEM, JKS or PKCS12. A JKS store may be PKCS12 (as Java reads it)."""
    declared = declared.upper()
    if _PEM_MARK in data[:4096]:
        return "PEM"
    if declared == "PEM":
        raise KeystoreError("ssl.*.type is PEM but the file holds no PEM")
    if len(data) >= 4 and int.from_bytes(data[:4], "big") in (JKS_MAGIC, JCEKS_MAGIC):
        if declared != "JKS":
            raise KeystoreError(f"the file is a JKS keystore, not {declared}")
        return "JKS"
    return "PKCS12"


def read_keystore(data: bytes, declared: str, store_password: str, key_password: str) -> KeyEntry | None:
    """The key and chain of a JKS or PKCS12 keystore; None for PEM (``ssl`` reads it itself)."""
    kind = store_format(data, declared)
    if kind == "PEM":
        return None
    if kind == "JKS":
        return _jks_key(data, store_password, key_password)
    key_pem, certs = _pkcs12(data, store_password)
    if key_pem is None or not certs:
        raise KeystoreError("the PKCS12 keystore holds no private key with a certificate")
    return KeyEntry(key_pem, "".join(certs))


def read_truststore(data: bytes, declared: str, store_password: str) -> str:
    """The trusted certificates of a truststore as PEM text."""
    kind = store_format(data, declared)
    if kind == "PEM":
        return data.decode("ascii", errors="replace")
    if kind == "JKS":
        store = parse_jks(data, store_password)
        ders = list(store.certificates.values()) + [c for _, chain in store.keys.values() for c in chain[:1]]
        if not ders:
            raise KeystoreError("the truststore holds no certificates")
        return _pem_certs(ders)
    _, certs = _pkcs12(data, store_password)
    if not certs:
        raise KeystoreError("the truststore holds no certificates")
    return "".join(certs)
