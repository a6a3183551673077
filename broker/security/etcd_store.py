"""ACLs, SCRAM credentials and delegation tokens of a cluster, kept in etcd so that every node
enforces the same rules and authenticates the same users, mirrored by every node
(broker/cluster/mirror.py: committed before the answer, read by every node within a fraction of a
second, kept as last read while etcd is away).

Keys under ``etcd.prefix``:

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

Before its first read a node creates the bootstrap users etcd lacks, never overwriting one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, KeyValue
from broker.cluster.mirror import EtcdMirror
from broker.observability import logs
from broker.security.acl_model import AclBinding
from broker.security.authorizer import FIELDS, Authorizer
from broker.security.credentials import CredentialStore, decode_credential, encode_credential
from broker.security.scram import MECHANISMS, ScramCredential
from broker.security.tokens import DelegationTokens, TokenInfo

ACLS, SCRAM, TOKENS = "acls/", "scram/", "tokens/"


class EtcdSecurityStore:
    def __init__(self, client: EtcdClient, prefix: str, authorizer: Authorizer | None,
                 credentials: CredentialStore, bootstrap_users: list[tuple[str, str]],
                 data_dir: Path | None = None, tokens: DelegationTokens | None = None) -> None:
        self.authorizer = authorizer
        self.credentials = credentials
        self.tokens = tokens if tokens is not None else DelegationTokens(None, 0, 0)
        self.bootstrap_users = bootstrap_users
        self.data_dir = data_dir
        self.mirror = EtcdMirror(client, prefix.rstrip("/") + "/security/", "security", self._replace, self._prepare)
        self.loaded = False

    @staticmethod
    def acl_key(binding: AclBinding) -> str:
        return ACLS + json.dumps([getattr(binding, f) for f in FIELDS], separators=(",", ":"))

    @staticmethod
    def scram_key(user: str, mechanism: str) -> str:
        return f"{SCRAM}{user}/{mechanism}"

    @staticmethod
    def token_key(token_id: str) -> str:
        return TOKENS + token_id

    # ---- reading ----------------------------------------------------------------------------

    def _replace(self, kvs: list[tuple[str, KeyValue]]) -> None:
        """This node's ACLs, users and tokens become what etcd holds."""
        acls: list[AclBinding] = []
        users: dict[str, dict[str, ScramCredential]] = {}
        tokens: dict[str, TokenInfo] = {}
        for key, kv in kvs:
            try:
                if key.startswith(ACLS):
                    acls.append(AclBinding(*json.loads(key[len(ACLS):])))
                elif key.startswith(SCRAM):
                    user, _, mechanism = key[len(SCRAM):].rpartition("/")
                    users.setdefault(user, {})[mechanism] = decode_credential(mechanism, json.loads(kv.value))
                elif key.startswith(TOKENS):
                    token = TokenInfo.from_json(kv.value.decode())
                    tokens[token.token_id] = token
            except (ValueError, KeyError, TypeError):
                logs.warn("security.bad_etcd_key", key=kv.key[:200])
        if self.authorizer is not None:
            self.authorizer.acls = acls
        self.credentials.users = users
        self.tokens.replace(tokens)
        if not self.loaded:
            self.loaded = True
            logs.event("security.etcd_loaded", acls=len(acls), users=len(users), tokens=len(tokens),
                       revision=self.mirror.applied_revision)

    async def load(self) -> None:
        await self.mirror.load()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Creates the bootstrap users that etcd lacks and loads everything before reporting ready
        (no request is authorized against rules not read yet), then follows etcd."""
        await self.mirror.run(task_status=task_status)

    async def _prepare(self) -> None:
        await self._import_files()
        for user, password in self.bootstrap_users:
            for mechanism in MECHANISMS:
                credential = ScramCredential.from_password(mechanism, password)
                await self.mirror.create_if_absent(self.scram_key(user, mechanism),
                                                   json.dumps(encode_credential(credential)))

    async def _import_files(self) -> None:
        """The ACLs and users a single node kept in its data dir, created in etcd where absent
        (what etcd holds wins), once for the cluster."""
        if self.data_dir is None:
            return
        data_dir = self.data_dir

        async def write() -> dict[str, int]:
            acls = Authorizer(data_dir, frozenset(), False).acls
            users = CredentialStore(data_dir).users
            for binding in acls:
                await self.mirror.create_if_absent(self.acl_key(binding), "1")
            for user, mechanisms in users.items():
                for mechanism, credential in mechanisms.items():
                    await self.mirror.create_if_absent(self.scram_key(user, mechanism),
                                                       json.dumps(encode_credential(credential)))
            if acls or users:
                logs.event("security.files_imported", acls=len(acls), users=len(users))
            return {"acls": len(acls), "users": len(users)}

        await self.mirror.import_once("imported-files", write)

    # ---- writing ----------------------------------------------------------------------------

    async def add_acls(self, bindings: list[AclBinding]) -> None:
        assert self.authorizer is not None
        await self.mirror.apply({self.acl_key(b): "1" for b in bindings}, [])
        self.authorizer.add(bindings)

    async def remove_acls(self, bindings: list[AclBinding]) -> None:
        assert self.authorizer is not None
        await self.mirror.apply({}, [self.acl_key(b) for b in bindings])
        gone = set(bindings)
        self.authorizer.acls = [a for a in self.authorizer.acls if a not in gone]

    async def alter_credentials(self, upserts: list[tuple[str, ScramCredential]],
                                deletes: list[tuple[str, str]]) -> None:
        await self.mirror.apply({self.scram_key(u, c.mechanism): json.dumps(encode_credential(c)) for u, c in upserts},
                                [self.scram_key(u, m) for u, m in deletes])
        for user, mechanism in deletes:
            self.credentials.delete(user, mechanism)
        for user, credential in upserts:
            self.credentials.upsert(user, credential)

    async def alter_tokens(self, keep: list[TokenInfo], forget: list[str]) -> None:
        await self.mirror.apply({self.token_key(t.token_id): t.to_json() for t in keep},
                                [self.token_key(i) for i in forget])
        for token in keep:
            self.tokens.keep(token)
        for token_id in forget:
            self.tokens.forget(token_id)
