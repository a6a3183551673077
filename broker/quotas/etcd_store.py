"""The client quotas of a cluster, kept in etcd so that every node enforces the same ones.

One key per entity under ``etcd.prefix``: ``quotas/<entity as a JSON array of [type, name]>``,
its quota values as a JSON object (no lease: they outlive every node). A change is one etcd
transaction, committed before the request that made it is answered, and applied at once by the
node that made it; every node reads the whole ``quotas/`` key space every ``POLL_INTERVAL_S``, so
a change made through another node is enforced within a fraction of a second. The quotas a
single node kept in its data dir are imported once, by the first node to start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, EtcdError
from broker.observability import logs
from broker.quotas.model import Entity
from broker.quotas.store import QuotaStore, Values, decode_entity, encode_entity

POLL_INTERVAL_S = 0.25
RETRY_S = 0.5


class EtcdQuotaStore:
    def __init__(self, client: EtcdClient, prefix: str, store: QuotaStore, data_dir: Path | None = None) -> None:
        self.client = client
        self.root = prefix.rstrip("/") + "/quotas/"
        self.store = store
        self.data_dir = data_dir
        self.applied_revision = 0
        self.stopping = False

    def key(self, entity: Entity) -> str:
        return self.root + "entity/" + json.dumps(encode_entity(entity), separators=(",", ":"))

    async def load(self) -> None:
        kvs, revision = await self.client.get_prefix(self.root + "entity/")
        if revision < self.applied_revision:
            return  # older than this node's own last write
        quotas: dict[Entity, Values] = {}
        for kv in kvs:
            try:
                entity = decode_entity(json.loads(kv.key[len(self.root + "entity/"):]))
                quotas[entity] = {str(k): float(v) for k, v in json.loads(kv.value).items()}
            except (ValueError, TypeError, AttributeError):
                logs.warn("quotas.bad_etcd_key", key=kv.key[:200])
        self.applied_revision = revision
        self.store.replace(quotas)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Loads the cluster's quotas before reporting ready, then follows etcd."""
        while True:
            try:
                await self._import_file()
                await self.load()
                break
            except EtcdError as exc:
                logs.warn("quotas.etcd_load_failed", error=str(exc)[:200])
                await trio.sleep(RETRY_S)
        task_status.started()
        while not self.stopping:
            await trio.sleep(POLL_INTERVAL_S)
            try:
                await self.load()
            except EtcdError as exc:
                logs.warn("quotas.etcd_load_failed", error=str(exc)[:200])

    async def _import_file(self) -> None:
        if self.data_dir is None:
            return
        marker = self.root + "imported-file"
        kvs, _ = await self.client.get_prefix(marker)
        if any(kv.key == marker for kv in kvs):
            return
        quotas = QuotaStore(self.data_dir).quotas
        for entity, values in quotas.items():
            await self.client.create_if_absent(self.key(entity), json.dumps(values), 0)
        await self.client.create_if_absent(marker, json.dumps({"entities": len(quotas)}), 0)

    async def alter(self, quotas: dict[Entity, Values], changed: list[Entity]) -> None:
        """Writes the entities of ``changed`` as ``quotas`` holds them (absent = deleted), then
        has the store hold ``quotas``."""
        puts: dict[str, bytes | str] = {}
        deletes: list[str] = []
        for entity in changed:
            values = quotas.get(entity)
            if values:
                puts[self.key(entity)] = json.dumps(values)
            else:
                deletes.append(self.key(entity))
        revision = await self.client.apply(puts, deletes)
        self.applied_revision = max(self.applied_revision, revision)
        self.store.replace(quotas)
