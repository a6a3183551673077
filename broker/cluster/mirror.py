"""A key space of etcd that every node keeps a copy of: the cluster-wide state that is not owned by
one node (ACLs, SCRAM users and delegation tokens; client quotas; client-metrics subscriptions).

Its keys have no lease: they outlive every node. A change is one etcd transaction, committed (on a
quorum) before the request that made it is answered, and applied at once by the node that made it;
every node reads the whole key space every ``POLL_INTERVAL_S`` and replaces its copy with what it
read, so a change made through another node holds everywhere within a fraction of a second. A read
older than this node's own last write is ignored (it could not contain it). While etcd is away a
node keeps what it last read.

Before the first read a mirror may prepare the key space (import a former single node's file, create
bootstrap users), retried with the read until etcd answers: no client is served from a copy that
was never read."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from broker.cluster.etcd import EtcdClient, EtcdError, KeyValue
from broker.observability import logs

POLL_INTERVAL_S = 0.25
RETRY_S = 0.5
MAX_TXN_OPS = 128  # etcd's default --max-txn-ops


class EtcdMirror:
    """``root``'s keys read whole and handed to ``replace`` (each key without the root), followed
    until ``stopping``; ``prepare`` runs once before the first read."""

    def __init__(self, client: EtcdClient, root: str, name: str,
                 replace: Callable[[list[tuple[str, KeyValue]]], None],
                 prepare: Callable[[], Awaitable[None]] | None = None) -> None:
        self.client = client
        self.root = root
        self.name = name
        self.replace = replace
        self.prepare = prepare
        self.applied_revision = 0
        self.stopping = False

    async def load(self) -> None:
        """Replaces this node's copy with what etcd holds now."""
        kvs, revision = await self.client.get_prefix(self.root)
        if revision < self.applied_revision:
            return
        self.applied_revision = revision
        self.replace([(kv.key[len(self.root):], kv) for kv in kvs])

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        while True:
            try:
                if self.prepare is not None:
                    await self.prepare()
                await self.load()
                break
            except EtcdError as exc:
                logs.warn(f"{self.name}.etcd_load_failed", error=str(exc)[:200])
                await trio.sleep(RETRY_S)
        task_status.started()
        while not self.stopping:
            await trio.sleep(POLL_INTERVAL_S)
            try:
                await self.load()
            except EtcdError as exc:
                # Keep what was last read; etcd being away changes nothing here.
                logs.warn(f"{self.name}.etcd_load_failed", error=str(exc)[:200])

    async def apply(self, puts: dict[str, str], deletes: list[str]) -> None:
        """Writes keys under the root (names without it), ``MAX_TXN_OPS`` to a transaction."""
        items: list[tuple[str, str | None]] = [*puts.items(), *((k, None) for k in deletes)]
        for start in range(0, len(items), MAX_TXN_OPS):
            chunk = items[start:start + MAX_TXN_OPS]
            revision = await self.client.apply({self.root + k: v for k, v in chunk if v is not None},
                                               [self.root + k for k, v in chunk if v is None])
            self.applied_revision = max(self.applied_revision, revision)

    async def import_once(self, marker: str, write: Callable[[], Awaitable[dict[str, int]]]) -> None:
        """Runs ``write`` (creating what a former single node's file held, where etcd has nothing)
        unless the marker key says it ran; the marker is written last, so a node that dies half
        way leaves it absent and the next one imports again, idempotently."""
        kvs, _ = await self.client.get_prefix(self.root + marker)
        if any(kv.key == self.root + marker for kv in kvs):
            return
        counts = await write()
        await self.client.create_if_absent(self.root + marker, json.dumps(counts), 0)

    async def create_if_absent(self, key: str, value: str) -> None:
        await self.client.create_if_absent(self.root + key, value, 0)
