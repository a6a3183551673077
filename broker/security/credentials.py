"""SCRAM credentials of SASL users, as Kafka keeps them: per user and mechanism a salt, an
iteration count, StoredKey and ServerKey (never the password). One JSON document in the data dir,
durable before a change is acknowledged (a cluster keeps them in etcd instead, with no file:
broker/security/etcd_store.py). PLAIN checks a password against the same credentials."""

from __future__ import annotations

import base64
import hmac
import os
from pathlib import Path

from broker.security.scram import MECHANISMS, ScramCredential
from storage import durable_json

CREDENTIALS_FILE = "kcoord-scram-credentials.json"
MAX_PROVEN = 10_000


def _enc(b: bytes) -> str:
    return base64.b64encode(b).decode()


def encode_credential(c: ScramCredential) -> dict[str, object]:
    return {"salt": _enc(c.salt), "iterations": c.iterations, "stored_key": _enc(c.stored_key),
            "server_key": _enc(c.server_key)}


def decode_credential(mechanism: str, c: dict[str, object]) -> ScramCredential:
    return ScramCredential(mechanism, base64.b64decode(str(c["salt"])), int(str(c["iterations"])),
                           base64.b64decode(str(c["stored_key"])), base64.b64decode(str(c["server_key"])))


class CredentialStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else data_dir / CREDENTIALS_FILE
        # PLAIN passwords already proven against a credential: HMAC of the password under a key of
        # this process, by user and credential. Deriving the credential takes thousands of
        # PBKDF2 rounds (1.5 ms of CPU with SCRAM-SHA-512), which a client that authenticates
        # with PLAIN at every connection would pay each time; a changed credential is another key.
        self._plain_key = os.urandom(32)
        self._plain_proven: dict[tuple[str, ScramCredential], bytes] = {}
        # user -> mechanism -> credential
        self.users: dict[str, dict[str, ScramCredential]] = {}
        doc = durable_json.read(self.path) if self.path is not None else None
        for user, mechanisms in (doc or {}).get("users", {}).items():
            for mechanism, c in mechanisms.items():
                self.users.setdefault(user, {})[mechanism] = decode_credential(mechanism, c)

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN: the strongest SCRAM credential the user has must derive from this password."""
        mechanisms = self.users.get(user, {})
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            credential = mechanisms.get(mechanism)
            if credential is not None:
                proof = hmac.digest(self._plain_key, password.encode(), "sha256")
                known = self._plain_proven.get((user, credential))
                if known is not None:
                    return hmac.compare_digest(known, proof)
                if not credential.password_matches(password):
                    return False
                if len(self._plain_proven) >= MAX_PROVEN:
                    self._plain_proven.clear()
                self._plain_proven[(user, credential)] = proof
                return True
        return False

    def bootstrap(self, users: list[tuple[str, str]]) -> None:
        """Creates the configured users' credentials where the user has none (a credential
        changed through AlterUserScramCredentials is not overwritten at the next start)."""
        added = False
        for user, password in users:
            for mechanism in MECHANISMS:
                if self.lookup(user, mechanism) is None:
                    self.users.setdefault(user, {})[mechanism] = ScramCredential.from_password(mechanism, password)
                    added = True
        if added:
            self.save()

    def upsert(self, credential_user: str, credential: ScramCredential) -> None:
        self.users.setdefault(credential_user, {})[credential.mechanism] = credential

    def delete(self, user: str, mechanism: str) -> bool:
        mechanisms = self.users.get(user)
        if not mechanisms or mechanism not in mechanisms:
            return False
        del mechanisms[mechanism]
        if not mechanisms:
            del self.users[user]
        return True

    def save(self) -> None:
        if self.path is None:
            return
        durable_json.write_durably(self.path, {"version": 1, "users": {
            user: {m: encode_credential(c) for m, c in mechanisms.items()}
            for user, mechanisms in self.users.items()}})
