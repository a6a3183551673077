"""Client-metrics subscriptions of a cluster, kept in etcd so that every node gives clients the
same subscriptions: one key per subscription, ``client-metrics/subscription/<name>``, its configs
as a JSON object, mirrored by every node (broker/cluster/mirror.py). The subscriptions a single
node kept in its data dir are imported once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, KeyValue
from broker.cluster.mirror import EtcdMirror
from broker.observability import logs
from broker.telemetry.subscriptions import SubscriptionStore

SUBSCRIPTION = "subscription/"


class EtcdSubscriptionStore:
    def __init__(self, client: EtcdClient, prefix: str, store: SubscriptionStore, data_dir: Path | None = None) -> None:
        self.store = store
        self.data_dir = data_dir
        self.mirror = EtcdMirror(client, prefix.rstrip("/") + "/client-metrics/", "telemetry", self._replace,
                                 self._import_file)
        store.remote = self.write

    async def write(self, name: str, configs: dict[str, str] | None) -> None:
        key = SUBSCRIPTION + name
        await self.mirror.apply({key: json.dumps(configs)} if configs else {}, [] if configs else [key])

    def _replace(self, kvs: list[tuple[str, KeyValue]]) -> None:
        configs: dict[str, dict[str, str]] = {}
        for key, kv in kvs:
            if not key.startswith(SUBSCRIPTION):
                continue
            try:
                configs[key[len(SUBSCRIPTION):]] = {str(k): str(v) for k, v in json.loads(kv.value).items()}
            except (ValueError, AttributeError):
                logs.warn("telemetry.bad_etcd_key", key=kv.key[:200])
        self.store.replace(configs)

    async def load(self) -> None:
        """Reads etcd now (rather than at the next poll)."""
        await self.mirror.load()

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self.mirror.run(task_status=task_status)

    async def _import_file(self) -> None:
        if self.data_dir is None:
            return
        data_dir = self.data_dir

        async def write() -> dict[str, int]:
            configs = SubscriptionStore(data_dir).configs
            for name, values in configs.items():
                await self.mirror.create_if_absent(SUBSCRIPTION + name, json.dumps(values))
            return {"subscriptions": len(configs)}

        await self.mirror.import_once("imported-file", write)
