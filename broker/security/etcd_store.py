"""ACLs and SCRAM credentials of a cluster, kept in etcd so that every node enforces the same rules
and authenticates the same users.

Keys under ``etcd.prefix`` (no lease: they outlive every node):

- ``security/acls/<binding>``: one key per ACL binding, the binding's fields as a JSON array
  (a binding is its own identity: creating it twice is one key, deleting it is deleting the key);
- ``security/scram/<user>/<mechanism>``: one SCRAM credential (salt, iterations, StoredKey,
  ServerKey, base64), the same form the single-node file keeps.
- ``security/tokens/<token id>``: one delegation token (owner, requester, renewers, timestamps;
  never its HMAC, which each node derives from the shared ``delegation.token.secret.key``).

- ``security/imported-files``: present once the files of a former single node (``kcoord-acls.json``,
  ``kcoord-scram-credentials.json`` in the data dir) were imported; they are imported once, by
  the first node to start, and never again (an ACL deleted in the cluster must not come back from
  an old file when a node restarts).

A change is a transaction in etcd, committed (durable on a quorum) before the request that made it
is answered; the node that made it applies it at once. Every node reads the whole ``security/``
key space every ``POLL_INTERVAL_S`` and replaces its rules and users with what etcd holds, so a
change made through another node is enforced within a fraction of a second. A read older than the
node's own last write is ignored (it could not contain it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, EtcdError
from broker.observability import logs
from broker.security.acl_model import AclBinding
from broker.security.authorizer import FIELDS, Authorizer
from broker.security.credentials import CredentialStore, decode_credential, encode_credential
from broker.security.scram import MECHANISMS, ScramCredential
from broker.security.tokens import DelegationTokens, TokenInfo

POLL_INTERVAL_S = 0.25
RETRY_S = 0.5
MAX_TXN_OPS = 128  # etcd's default --max-txn-ops


class EtcdSecurityStore:
    def __init__(self, client: EtcdClient, prefix: str, authorizer: Authorizer | None,
                 credentials: CredentialStore, bootstrap_users: list[tuple[str, str]],
                 data_dir: Path | None = None, tokens: DelegationTokens | None = None) -> None:
        self.client = client
        self.tokens = tokens if tokens is not None else DelegationTokens(None, 0, 0)
        self.root = prefix.rstrip("/") + "/security/"
        self.authorizer = authorizer
        self.credentials = credentials
        self.bootstrap_users = bootstrap_users
        self.data_dir = data_dir
        self.applied_revision = 0
        self.stopping = False

    def acl_key(self, binding: AclBinding) -> str:
        return self.root + "acls/" + json.dumps([getattr(binding, f) for f in FIELDS], separators=(",", ":"))

    def scram_key(self, user: str, mechanism: str) -> str:
        return f"{self.root}scram/{user}/{mechanism}"

    def token_key(self, token_id: str) -> str:
        return f"{self.root}tokens/{token_id}"

    # ---- reading ----------------------------------------------------------------------------

    async def load(self) -> None:
        """Replaces this node's ACLs and users with what etcd holds now."""
        kvs, revision = await self.client.get_prefix(self.root)
        if revision < self.applied_revision:
            return
        acls: list[AclBinding] = []
        users: dict[str, dict[str, ScramCredential]] = {}
        tokens: dict[str, TokenInfo] = {}
        for kv in kvs:
            rest = kv.key[len(self.root):]
            try:
                if rest.startswith("acls/"):
                    acls.append(AclBinding(*json.loads(rest[len("acls/"):])))
                elif rest.startswith("scram/"):
                    user, _, mechanism = rest[len("scram/"):].rpartition("/")
                    users.setdefault(user, {})[mechanism] = decode_credential(mechanism, json.loads(kv.value))
                elif rest.startswith("tokens/"):
                    token = TokenInfo.from_json(kv.value.decode())
                    tokens[token.token_id] = token
            except (ValueError, KeyError, TypeError):
                logs.warn("security.bad_etcd_key", key=kv.key[:200])
        self.applied_revision = revision
        if self.authorizer is not None:
            self.authorizer.acls = acls
        self.credentials.users = users
        self.tokens.replace(tokens)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Creates the bootstrap users that etcd lacks and loads everything before reporting ready
        (no request is authorized against rules not read yet), then follows etcd."""
        while True:
            try:
                await self._import_files()
                await self._bootstrap()
                await self.load()
                break
            except EtcdError as exc:
                logs.warn("security.etcd_load_failed", error=str(exc)[:200])
                await trio.sleep(RETRY_S)
        logs.event("security.etcd_loaded", acls=len(self.authorizer.acls) if self.authorizer else 0,
                   users=len(self.credentials.users), revision=self.applied_revision)
        task_status.started()
        while not self.stopping:
            await trio.sleep(POLL_INTERVAL_S)
            try:
                await self.load()
            except EtcdError as exc:
                # Keep enforcing what was last read; etcd being away changes no rule.
                logs.warn("security.etcd_load_failed", error=str(exc)[:200])

    async def _import_files(self) -> None:
        """The ACLs and users a single node kept in its data dir, created in etcd where absent
        (what etcd holds wins), once for the cluster. The marker is written last: a node that dies
        half way leaves it absent, and the next node imports again, idempotently."""
        if self.data_dir is None:
            return
        marker = self.root + "imported-files"
        kvs, _ = await self.client.get_prefix(marker)
        if any(kv.key == marker for kv in kvs):
            return
        acls = Authorizer(self.data_dir, frozenset(), False).acls
        users = CredentialStore(self.data_dir).users
        for binding in acls:
            await self.client.create_if_absent(self.acl_key(binding), "1", 0)
        for user, mechanisms in users.items():
            for mechanism, credential in mechanisms.items():
                await self.client.create_if_absent(self.scram_key(user, mechanism),
                                                   json.dumps(encode_credential(credential)), 0)
        await self.client.create_if_absent(marker, json.dumps({"acls": len(acls), "users": len(users)}), 0)
        if acls or users:
            logs.event("security.files_imported", acls=len(acls), users=len(users))

    async def _bootstrap(self) -> None:
        for user, password in self.bootstrap_users:
            for mechanism in MECHANISMS:
                credential = ScramCredential.from_password(mechanism, password)
                await self.client.create_if_absent(self.scram_key(user, mechanism),
                                                   json.dumps(encode_credential(credential)), 0)

    # ---- writing ----------------------------------------------------------------------------

    async def _apply(self, puts: dict[str, str], deletes: list[str]) -> None:
        items: list[tuple[str, str | None]] = [*puts.items(), *((k, None) for k in deletes)]
        for start in range(0, len(items), MAX_TXN_OPS):
            chunk = items[start:start + MAX_TXN_OPS]
            revision = await self.client.apply({k: v for k, v in chunk if v is not None},
                                               [k for k, v in chunk if v is None])
            self.applied_revision = max(self.applied_revision, revision)

    async def add_acls(self, bindings: list[AclBinding]) -> None:
        assert self.authorizer is not None
        await self._apply({self.acl_key(b): "1" for b in bindings}, [])
        self.authorizer.add(bindings)

    async def remove_acls(self, bindings: list[AclBinding]) -> None:
        assert self.authorizer is not None
        await self._apply({}, [self.acl_key(b) for b in bindings])
        gone = set(bindings)
        self.authorizer.acls = [a for a in self.authorizer.acls if a not in gone]

    async def alter_credentials(self, upserts: list[tuple[str, ScramCredential]],
                                deletes: list[tuple[str, str]]) -> None:
        await self._apply({self.scram_key(u, c.mechanism): json.dumps(encode_credential(c)) for u, c in upserts},
                          [self.scram_key(u, m) for u, m in deletes])
        for user, mechanism in deletes:
            self.credentials.delete(user, mechanism)
        for user, credential in upserts:
            self.credentials.upsert(user, credential)

    async def alter_tokens(self, keep: list[TokenInfo], forget: list[str]) -> None:
        await self._apply({self.token_key(t.token_id): t.to_json() for t in keep}, [self.token_key(i) for i in forget])
        for token in keep:
            self.tokens.keep(token)
        for token_id in forget:
            self.tokens.forget(token_id)
