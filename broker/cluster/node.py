"""This node's membership and partition ownership, kept in etcd under one lease.

Keys under ``etcd.prefix``:

- ``nodes/<node.id>``: this node's advertised host and port, attached to its lease;
- ``owners/<topic>/<partition>``: the owner of a partition, attached to its owner's lease, created
  only if absent (an etcd transaction), so there is at most one. Its create revision is the owner
  epoch: every change of owner creates the key anew, at a higher revision.

Every node reads the whole key space a few times a second, computes who should own what from the
live nodes (``assignment.desired_owners``), releases what it should no longer own (after it has
stopped serving it) and claims what it should own once nobody holds it. A dead node's keys vanish
when its lease expires (``broker.session.timeout.ms``); a node stopping on SIGTERM releases its
partitions and revokes its lease at once.

**Fencing.** The lease is renewed every third of its TTL. etcd expires it at the earliest TTL after
it received the last renewal, so TTL after the *sending* of the last successful renewal is a
deadline no other node can beat. ``may_write`` turns false a margin before it, measured on
``CLOCK_BOOTTIME``, which keeps running while the process is stopped (SIGSTOP) and while the host
or VM is suspended (``CLOCK_MONOTONIC`` stops during a suspend): from then on the node writes
nothing and acknowledges nothing, whatever it still believes it owns.

Each claim of a partition gets a ``Fence`` (``storage.fencing``), the right to change the
partition's files for that tenure: valid while ``may_write`` holds and until it is revoked. The log
checks it right before every change of a file, so a node resuming after a pause (mid-append,
mid-roll, mid-compaction) refuses the change before it has heard anything from etcd. Losing a
partition revokes its fence first, synchronously, before anything else is done about it; a
controlled release revokes it once what was queued is durable, before the owner key is deleted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from broker.cluster.assignment import PartitionKey, desired_owners
from broker.cluster.etcd import EtcdClient, EtcdError
from broker.observability import logs
from broker.observability.metrics import METRICS
from storage.fencing import REVOKED, Fence

SYNC_INTERVAL_S = 0.2
RETRY_S = 0.5


_BOOTTIME: int | None = getattr(time, "CLOCK_BOOTTIME", None)


def boottime() -> float:
    """Seconds on a clock that counts time the host was suspended (Linux ``CLOCK_BOOTTIME``;
    elsewhere the monotonic clock, the best there is)."""
    if _BOOTTIME is None:
        return time.monotonic()
    return time.clock_gettime(_BOOTTIME)


class OwnershipListener(Protocol):
    def on_gain(self, partition: PartitionKey, epoch: int) -> None:
        """Start serving ``partition`` (load it) as its owner at ``epoch``."""

    async def on_release(self, partition: PartitionKey) -> None:
        """Stop serving ``partition`` and make what was acknowledged durable; returns when done."""

    def on_lose(self, partition: PartitionKey) -> None:
        """Stop serving ``partition`` at once: this node no longer owns it."""


@dataclass(frozen=True, slots=True)
class Owner:
    node_id: int
    epoch: int


class ClusterNode:
    def __init__(self, client: EtcdClient, prefix: str, node_id: int, host: str, port: int, ttl_ms: int,
                 partitions: Callable[[], Iterable[PartitionKey]], clock: Callable[[], float] = boottime) -> None:
        self.client = client
        self.prefix = prefix.rstrip("/")
        self.node_id = node_id
        self.address = (host, port)
        self.ttl_s = max(1, ttl_ms // 1000)
        # Stop writing this long after sending the last renewal that etcd accepted: a third of the
        # TTL before the lease can expire, room for a write or a flush already under way.
        self.fence_after_s = self.ttl_s * 2 / 3
        self.partitions = partitions
        self.clock = clock
        self.listener: OwnershipListener | None = None
        self.lease = 0
        self.renewed_at = float("-inf")
        self.nodes: dict[int, tuple[str, int]] = {}
        # Every listener's advertised address, of this node (set by the broker) and of each node
        # registered: a client is sent to other nodes' listener of the same name as its own.
        self.listener_addresses: dict[str, tuple[str, int]] = {}
        self.node_listeners: dict[int, dict[str, tuple[str, int]]] = {}
        self.owners: dict[PartitionKey, Owner] = {}
        self.mine: dict[PartitionKey, int] = {}  # partition -> epoch (the owner key's create revision)
        # The fence of each claim held (see the module's docstring).
        self.fences: dict[PartitionKey, Fence] = {}
        self.releasing: set[PartitionKey] = set()
        self.stopping = False
        self._poke = trio.Event()
        self.takeovers = 0
        # Called when this node drops every partition it held at once (its lease expired, or it
        # could not renew it in time: paused, suspended, cut from etcd), after the partitions are
        # dropped and with etcd's view as fresh as the node could read it.
        self.on_lost_everything: list[Callable[[str], None]] = []

    # ---- what the rest of the broker asks -----------------------------------------------------

    def may_write(self) -> bool:
        """The lease is certainly still ours: writing and acknowledging are allowed."""
        return self.clock() - self.renewed_at < self.fence_after_s

    def owns(self, partition: PartitionKey) -> bool:
        return partition in self.mine and partition not in self.releasing and self.may_write()

    def owner_of(self, partition: PartitionKey) -> tuple[int, int] | None:
        """(node id, epoch) of ``partition``'s owner as last read from etcd, or None."""
        if partition in self.mine and self.may_write():
            return self.node_id, self.mine[partition]
        owner = self.owners.get(partition)
        if owner is None or owner.node_id not in self.nodes:
            return None
        if owner.node_id == self.node_id:
            # Ours in etcd's last word but not served (fenced, lost, or being released): naming this
            # node would send clients back here for a NOT_LEADER_OR_FOLLOWER, over and over.
            return None
        return owner.node_id, owner.epoch

    def fence_for(self, partition: PartitionKey) -> Fence:
        """The fence of this node's current claim of ``partition`` (a revoked one without a claim)."""
        return self.fences.get(partition, REVOKED)

    def _revoke(self, partition: PartitionKey) -> None:
        fence = self.fences.pop(partition, None)
        if fence is not None:
            fence.revoke()

    def relinquish(self, partition: PartitionKey, reason: str) -> None:
        """The broker stopped serving ``partition`` on its own (a write refused while the lease
        could have expired, which then turned out to be alive): drop the claim too, so that its
        owner key, still ours, is handed back and the partition claimed afresh from its files,
        rather than held here unserved."""
        if partition in self.mine:
            self._lose(partition, reason)
        self.poke()

    def poke(self) -> None:
        """Look at etcd again now (a topic was created, say) rather than at the next tick."""
        self._poke.set()

    def _key(self, *parts: object) -> str:
        return "/".join([self.prefix, *map(str, parts)])

    # ---- registration and the lease ------------------------------------------------------------

    async def register(self) -> None:
        sent = self.clock()
        self.lease = await self.client.grant(self.ttl_s)
        host, port = self.address
        listeners = {name: [h, p] for name, (h, p) in self.listener_addresses.items()}
        await self.client.put(self._key("nodes", self.node_id),
                              json.dumps({"host": host, "port": port, "listeners": listeners}), self.lease)
        self.renewed_at = sent
        logs.event("cluster.registered", node=self.node_id, lease=self.lease, ttl_s=self.ttl_s, prefix=self.prefix)

    async def _keep_alive(self) -> None:
        while not self.stopping:
            sent = self.clock()
            try:
                ttl = await self.client.keepalive(self.lease)
            except EtcdError as exc:
                METRICS.cluster_lease_failures.inc()
                logs.warn("cluster.lease_renewal_failed", node=self.node_id, error=str(exc)[:200])
                await trio.sleep(RETRY_S)
                continue
            if ttl <= 0:
                METRICS.cluster_lease_failures.inc()
                logs.warn("cluster.lease_lost", node=self.node_id, lease=self.lease)
                self._lose_everything("lease expired")
                await self._rejoin()
                continue
            self.renewed_at = sent
            METRICS.cluster_lease_renewals.inc()
            await trio.sleep(self.ttl_s / 3)

    async def _rejoin(self) -> None:
        """A node whose lease expired comes back as a new member, owning nothing."""
        while not self.stopping:
            try:
                await self.register()
                return
            except EtcdError as exc:
                logs.warn("cluster.register_failed", node=self.node_id, error=str(exc)[:200])
                await trio.sleep(RETRY_S)

    def _lose_everything(self, reason: str) -> None:
        # Every fence first: no file of any of them changes from here on, whatever runs next.
        held = bool(self.fences or self.mine)
        for partition in list(self.fences):
            self._revoke(partition)
        for partition in list(self.mine):
            self._lose(partition, reason)
        if held:
            # Every request the clients connected here still carry (or queued while the node was
            # stopped) is for partitions it no longer serves: the hooks (the broker closing every
            # client connection) let them go and ask the cluster again now, rather than wait for
            # answers to a backlog or for their own request timeouts.
            for hook in self.on_lost_everything:
                hook(reason)

    def _lose(self, partition: PartitionKey, reason: str) -> None:
        self._revoke(partition)
        self.mine.pop(partition, None)
        self.releasing.discard(partition)
        logs.warn("cluster.partition_lost", node=self.node_id, topic=partition[0], partition=partition[1],
                  reason=reason)
        if self.listener is not None:
            self.listener.on_lose(partition)
        METRICS.cluster_partitions_owned.set(len(self.mine))

    # ---- the ownership loop ------------------------------------------------------------------

    async def _read(self) -> None:
        kvs, _revision = await self.client.get_prefix(self.prefix + "/")
        nodes: dict[int, tuple[str, int]] = {}
        node_listeners: dict[int, dict[str, tuple[str, int]]] = {}
        owners: dict[PartitionKey, Owner] = {}
        base = len(self.prefix) + 1
        for kv in kvs:
            parts = kv.key[base:].split("/")
            try:
                if parts[0] == "nodes" and len(parts) == 2:
                    doc = json.loads(kv.value)
                    nodes[int(parts[1])] = (str(doc["host"]), int(doc["port"]))
                    node_listeners[int(parts[1])] = {str(name): (str(a[0]), int(a[1]))
                                                     for name, a in doc.get("listeners", {}).items()}
                elif parts[0] == "owners" and len(parts) == 3:
                    doc = json.loads(kv.value)
                    owners[(parts[1], int(parts[2]))] = Owner(int(doc["node"]), kv.create_revision)
            except (ValueError, KeyError, TypeError):
                logs.warn("cluster.bad_key", key=kv.key)
        self.nodes, self.owners, self.node_listeners = nodes, owners, node_listeners

    async def sync_once(self) -> None:
        await self._read()
        if not self.may_write():
            self._lose_everything("lease not renewed in time")
            return
        # What etcd no longer says is ours (our lease expired and the key went with it).
        for partition, epoch in list(self.mine.items()):
            owner = self.owners.get(partition)
            if owner is None or owner.node_id != self.node_id or owner.epoch != epoch:
                self._lose(partition, "owner key gone")
        if self.node_id not in self.nodes or self.stopping:
            return
        # Keys of ours that we do not serve: left by this node's previous life (a restart within
        # the lease: the node lock keeps two processes of one node id apart) or dropped after a
        # fencing whose lease then turned out to be still alive. Handing them back lets them be
        # claimed afresh, under a new epoch, instead of waiting for a lease that may never end.
        for partition, owner in list(self.owners.items()):
            stale = owner.node_id == self.node_id and partition not in self.mine and partition not in self.releasing
            if stale and await self.client.delete_if_revision(self._key("owners", *partition), owner.epoch):
                self.owners.pop(partition, None)
        desired = desired_owners(self.partitions(), sorted(self.nodes))
        for partition in [p for p in self.mine if desired.get(p) != self.node_id]:
            await self._release(partition)
        for partition, node in sorted(desired.items()):
            if node == self.node_id and partition not in self.owners and partition not in self.mine:
                await self._claim(partition)
        METRICS.cluster_partitions_owned.set(len(self.mine))
        METRICS.cluster_nodes.set(len(self.nodes))

    async def _claim(self, partition: PartitionKey) -> None:
        value = json.dumps({"node": self.node_id})
        revision = await self.client.create_if_absent(self._key("owners", *partition), value, self.lease)
        if revision is None or not self.may_write():
            return
        self.fences[partition] = Fence(f"{partition[0]}-{partition[1]}", revision, self.may_write)
        self.mine[partition] = revision
        self.owners[partition] = Owner(self.node_id, revision)
        self.takeovers += 1
        METRICS.cluster_takeovers.inc()
        logs.event("cluster.partition_claimed", node=self.node_id, topic=partition[0], partition=partition[1],
                   epoch=revision)
        if self.listener is not None:
            self.listener.on_gain(partition, revision)

    async def _release(self, partition: PartitionKey) -> None:
        epoch = self.mine.get(partition)
        if epoch is None:
            return  # lost meanwhile (relinquished, fenced) while an earlier release was awaited
        self.releasing.add(partition)
        if self.listener is not None:
            await self.listener.on_release(partition)
        # What was queued is durable and the partition closed: no file of it changes any more.
        self._revoke(partition)
        self.releasing.discard(partition)
        self.mine.pop(partition, None)
        try:
            await self.client.delete_if_revision(self._key("owners", *partition), epoch)
        except EtcdError as exc:
            # The key stays until our lease ends; the next owner waits that long.
            logs.warn("cluster.release_failed", node=self.node_id, topic=partition[0], partition=partition[1],
                      error=str(exc)[:200])
            return
        self.owners.pop(partition, None)
        logs.event("cluster.partition_released", node=self.node_id, topic=partition[0], partition=partition[1])

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await self._rejoin()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._keep_alive)
            task_status.started()
            while not self.stopping:
                try:
                    await self.sync_once()
                except EtcdError as exc:
                    logs.warn("cluster.sync_failed", node=self.node_id, error=str(exc)[:200])
                    if not self.may_write():
                        self._lose_everything("lease not renewed in time")
                with trio.move_on_after(SYNC_INTERVAL_S):
                    await self._poke.wait()
                self._poke = trio.Event()
            nursery.cancel_scope.cancel()

    async def shutdown(self, release_one: Callable[[PartitionKey], Awaitable[None]] | None = None) -> None:
        """Controlled shutdown: every partition handed back (served no more, then its key deleted)
        and the lease revoked, so that the others take over now rather than after the TTL."""
        self.stopping = True
        for partition in list(self.mine):
            try:
                await self._release(partition)
            except EtcdError:
                break
        for partition in list(self.fences):
            self._revoke(partition)
        try:
            await self.client.revoke(self.lease)
        except EtcdError as exc:
            logs.warn("cluster.revoke_failed", node=self.node_id, error=str(exc)[:200])
        self.mine.clear()
        logs.event("cluster.left", node=self.node_id)
