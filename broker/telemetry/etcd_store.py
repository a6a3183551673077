"""Client-metrics subscriptions of a cluster, kept in etcd so that every node gives clients the
same subscriptions: one key per subscription, ``client-metrics/subscription/<name>``, its configs
as a JSON object (no lease). A change is committed in etcd before the request that made it is
answered and applied at once by the node that made it; every node reads them all every
``POLL_INTERVAL_S``. The subscriptions a single node kept in its data dir are imported once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, EtcdError
from broker.observability import logs
from broker.telemetry.subscriptions import SubscriptionStore

POLL_INTERVAL_S = 0.25
RETRY_S = 0.5


class EtcdSubscriptionStore:
    def __init__(self, client: EtcdClient, prefix: str, store: SubscriptionStore, data_dir: Path | None = None) -> None:
        self.client = client
        self.root = prefix.rstrip("/") + "/client-metrics/"
        self.store = store
        self.data_dir = data_dir
        self.applied_revision = 0
        self.stopping = False
        store.remote = self.write

    def key(self, name: str) -> str:
        return self.root + "subscription/" + name

    async def write(self, name: str, configs: dict[str, str] | None) -> None:
        if configs:
            revision = await self.client.apply({self.key(name): json.dumps(configs)}, [])
        else:
            revision = await self.client.apply({}, [self.key(name)])
        self.applied_revision = max(self.applied_revision, revision)

    async def load(self) -> None:
        kvs, revision = await self.client.get_prefix(self.root + "subscription/")
        if revision < self.applied_revision:
            return  # older than this node's own last write
        configs: dict[str, dict[str, str]] = {}
        for kv in kvs:
            try:
                configs[kv.key[len(self.root + "subscription/"):]] = {
                    str(k): str(v) for k, v in json.loads(kv.value).items()}
            except (ValueError, AttributeError):
                logs.warn("telemetry.bad_etcd_key", key=kv.key[:200])
        self.applied_revision = revision
        self.store.replace(configs)

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        while True:
            try:
                await self._import_file()
                await self.load()
                break
            except EtcdError as exc:
                logs.warn("telemetry.etcd_load_failed", error=str(exc)[:200])
                await trio.sleep(RETRY_S)
        task_status.started()
        while not self.stopping:
            await trio.sleep(POLL_INTERVAL_S)
            try:
                await self.load()
            except EtcdError as exc:
                logs.warn("telemetry.etcd_load_failed", error=str(exc)[:200])

    async def _import_file(self) -> None:
        if self.data_dir is None:
            return
        marker = self.root + "imported-file"
        kvs, _ = await self.client.get_prefix(marker)
        if any(kv.key == marker for kv in kvs):
            return
        configs = SubscriptionStore(self.data_dir).configs
        for name, values in configs.items():
            await self.client.create_if_absent(self.key(name), json.dumps(values), 0)
        await self.client.create_if_absent(marker, json.dumps({"subscriptions": len(configs)}), 0)
