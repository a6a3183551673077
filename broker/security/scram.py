"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): credentials and the server's side of the
exchange. Written here on hashlib/hmac: the server side is two messages and a proof check, and the
credential form (salt, iterations, StoredKey, ServerKey) must match what Kafka's
AlterUserScramCredentials carries (a salted password), which a client-oriented library does not model."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

# Kafka's names and codes (ScramMechanism): 1 and 2 on the wire of the credential APIs.
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_CODE = {code: name for name, (_, code) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096

_CLIENT_FIRST = re.compile(r"^n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>n=(?P<user>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?P<extensions>,.*)?)$")
_CLIENT_FINAL = re.compile(r"^(?P<without_proof>c=(?P<binding>[A-Za-z0-9+/=]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?:,[a-z]=[^,]*)*?),p=(?P<proof>[A-Za-z0-9+/=]+)$")


class ScramError(Exception):
    """The exchange cannot go on; the message is what the client is told."""


@dataclass(frozen=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, iterations: int, salted: bytes) -> ScramCredential:
        digest = MECHANISMS[mechanism][0]
        client_key = hmac.digest(salted, b"Client Key", digest)
        return cls(mechanism, salt, iterations, hashlib.new(digest, client_key).digest(),
                   hmac.digest(salted, b"Server Key", digest))

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = salt if salt is not None else os.urandom(32)
        return cls.from_salted_password(mechanism, salt, iterations, salted_password(mechanism, password, salt,
                                                                                      iterations))

    def password_matches(self, password: str) -> bool:
        """For PLAIN: the password derives this credential's StoredKey."""
        other = ScramCredential.from_password(self.mechanism, password, self.iterations, self.salt)
        return hmac.compare_digest(other.stored_key, self.stored_key)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism][0], password.encode(), salt, iterations)


def decode_saslname(name: str) -> str:
    """RFC 5802: ',' and '=' travel as '=2C' and '=3D'; any other '=' is malformed."""
    if re.search(r"=(?!2C|3D)", name):
        raise ScramError("Invalid username in SCRAM client-first message")
    return name.replace("=2C", ",").replace("=3D", "=")


# A delegation token's credential, its owner's name and its expiry (ms), by token id and mechanism.
TokenLookup = Callable[[str, str], tuple[ScramCredential, str, int] | None]


def extensions(text: str | None) -> dict[str, str]:
    """The ``key=value`` extensions after the nonce of client-first (RFC 5802 reserves them; Kafka
    sends ``tokenauth=true`` when the user is a delegation token's id)."""
    out: dict[str, str] = {}
    for item in (text or "").split(",")[1:]:
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


class ScramServer:
    """One exchange: ``first`` takes client-first and returns server-first, ``final`` takes
    client-final and returns server-final. ``lookup`` finds a user's credential (None if unknown);
    ``tokens`` a delegation token's, for a client-first with ``tokenauth=true``."""

    def __init__(self, mechanism: str, lookup: object, tokens: TokenLookup | None = None) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism][0]
        self.lookup = lookup
        self.tokens = tokens
        self.user = ""
        # Who the exchange authenticates: the user, or a token's owner; and the token's expiry.
        self.authorization_id = ""
        self.token_expiry_ms: int | None = None
        self.credential: ScramCredential | None = None
        self.client_first_bare = ""
        self.server_first = ""
        self.nonce = ""
        self.gs2_header = ""

    def first(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM client-first message") from None
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise ScramError("Invalid SCRAM client-first message")
        user = decode_saslname(match["user"])
        authzid = match["authzid"]
        if authzid and authzid != user:
            raise ScramError("Authentication failed: Client requested an authorization id that is different from "
                             "username")
        credential: ScramCredential | None
        if extensions(match["extensions"]).get("tokenauth", "").lower() == "true":
            found = self.tokens(user, self.mechanism) if self.tokens is not None else None
            if found is None:
                raise ScramError(f"Token Authentication failed: Invalid tokenId : {user}")
            credential, self.authorization_id, self.token_expiry_ms = found
        else:
            assert callable(self.lookup)
            credential = self.lookup(user, self.mechanism)
            self.authorization_id = user
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        self.user, self.credential = user, credential
        self.gs2_header = text[: match.start("bare")]
        self.client_first_bare = match["bare"]
        self.nonce = match["nonce"] + base64.b64encode(os.urandom(18)).decode().replace("+", "-").replace("/", "_")
        self.server_first = (f"r={self.nonce},s={base64.b64encode(credential.salt).decode()},"
                             f"i={credential.iterations}")
        return self.server_first.encode()

    def final(self, message: bytes) -> bytes:
        assert self.credential is not None
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("Invalid SCRAM client-final message") from None
        match = _CLIENT_FINAL.match(text)
        if match is None:
            raise ScramError("Invalid SCRAM client-final message")
        # Kafka accepts a nonce that ends with the server's: librdkafka before 1.x sends its own
        # nonce again in front of the combined one (kcat builds still ship such versions).
        if not match["nonce"].endswith(self.nonce):
            raise ScramError("Invalid client nonce in SCRAM client-final message")
        if match["binding"] != base64.b64encode(self.gs2_header.encode()).decode():
            raise ScramError("Invalid channel binding in SCRAM client-final message")
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise ScramError("Invalid proof in SCRAM client-final message") from None
        auth_message = f"{self.client_first_bare},{self.server_first},{match['without_proof']}".encode()
        signature = hmac.digest(self.credential.stored_key, auth_message, self.digest)
        if len(proof) != len(signature):
            raise ScramError("Authentication failed: Invalid user credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), self.credential.stored_key):
            raise ScramError("Authentication failed: Invalid user credentials")
        verifier = hmac.digest(self.credential.server_key, auth_message, self.digest)
        return b"v=" + base64.b64encode(verifier)
