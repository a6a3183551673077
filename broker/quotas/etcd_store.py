"""The client quotas of a cluster, kept in etcd so that every node enforces the same ones: one key
per entity, ``quotas/entity/<entity as a JSON array of [type, name]>``, its quota values as a JSON
object, mirrored by every node (broker/cluster/mirror.py). The quotas a single node kept in its
data dir are imported once, by the first node to start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, KeyValue
from broker.cluster.mirror import EtcdMirror
from broker.observability import logs
from broker.quotas.model import Entity
from broker.quotas.store import QuotaStore, Values, decode_entity, encode_entity

ENTITY = "entity/"


class EtcdQuotaStore:
    def __init__(self, client: EtcdClient, prefix: str, store: QuotaStore, data_dir: Path | None = None) -> None:
        self.store = store
        self.data_dir = data_dir
        self.mirror = EtcdMirror(client, prefix.rstrip("/") + "/quotas/", "quotas", self._replace, self._import_file)

    @staticmethod
    def key(entity: Entity) -> str:
        return ENTITY + json.dumps(encode_entity(entity), separators=(",", ":"))

    def _replace(self, kvs: list[tuple[str, KeyValue]]) -> None:
        quotas: dict[Entity, Values] = {}
        for key, kv in kvs:
            if not key.startswith(ENTITY):
                continue
            try:
                entity = decode_entity(json.loads(key[len(ENTITY):]))
                quotas[entity] = {str(k): float(v) for k, v in json.loads(kv.value).items()}
            except (ValueError, TypeError, AttributeError):
                logs.warn("quotas.bad_etcd_key", key=kv.key[:200])
        self.store.replace(quotas)

    async def load(self) -> None:
        """Reads etcd now (rather than at the next poll)."""
        await self.mirror.load()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Loads the cluster's quotas before reporting ready, then follows etcd."""
        await self.mirror.run(task_status=task_status)

    async def _import_file(self) -> None:
        if self.data_dir is None:
            return
        data_dir = self.data_dir

        async def write() -> dict[str, int]:
            quotas = QuotaStore(data_dir).quotas
            for entity, values in quotas.items():
                await self.mirror.create_if_absent(self.key(entity), json.dumps(values))
            return {"entities": len(quotas)}

        await self.mirror.import_once("imported-file", write)

    async def alter(self, quotas: dict[Entity, Values], changed: list[Entity]) -> None:
        """Writes the entities of ``changed`` as ``quotas`` holds them (absent = deleted), then
        has the store hold ``quotas``."""
        await self.mirror.apply({self.key(e): json.dumps(quotas[e]) for e in changed if quotas.get(e)},
                                [self.key(e) for e in changed if not quotas.get(e)])
        self.store.replace(quotas)
