"""Which live node should own each partition: rendezvous (highest-random-weight) hashing with a
bound on each node's load.

Every node computes the same answer from the same set of live nodes, with no coordination: a
partition goes to the node with the highest hash of (node, partition) that still has room, room
being an even share (the partition count over the node count, rounded up, per topic). Plain
rendezvous hashing moves the fewest partitions (a joining node takes only those where it scores
highest, a leaving node's partitions are spread over the survivors) but leaves shares uneven with
few partitions (50 over 4 nodes: 10 to 14); the bound evens them out at the price of a few more
moves when membership changes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from protocol.group_events import EVENTS_TOPIC
from storage.layout import OFFSETS_TOPIC

PartitionKey = tuple[str, int]


def _score(node_id: int, partition: PartitionKey) -> int:
    digest = hashlib.blake2b(f"{node_id}\0{partition[0]}\0{partition[1]}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner_of(partition: PartitionKey, nodes: Sequence[int]) -> int | None:
    """The node that should own ``partition`` among ``nodes`` (None without nodes)."""
    if not nodes:
        return None
    return max(nodes, key=lambda node: (_score(node, partition), node))


def _preference(partition: PartitionKey, nodes: Sequence[int]) -> list[int]:
    return sorted(nodes, key=lambda node: (_score(node, partition), node), reverse=True)


def desired_owners(partitions: Iterable[PartitionKey], nodes: Sequence[int]) -> dict[PartitionKey, int]:
    """Owner of every partition, each topic spread evenly: no node gets more than its share."""
    if not nodes:
        return {}
    by_topic: dict[str, list[PartitionKey]] = {}
    for p in partitions:
        by_topic.setdefault(p[0], []).append(p)
    owners: dict[PartitionKey, int] = {}
    for topic_partitions in by_topic.values():
        room = -(-len(topic_partitions) // len(nodes))
        load = dict.fromkeys(nodes, 0)
        # Partitions that score highest on some node choose first, so the bound bites the fewest.
        ranked = [(_preference(p, nodes), p) for p in sorted(topic_partitions)]
        ranked.sort(key=lambda item: -_score(item[0][0], item[1]))
        for preference, p in ranked:
            node = next(n for n in preference if load[n] < room)
            load[node] += 1
            owners[p] = node
    return owners


def owning_partition(topic: str, partition: int) -> tuple[str, int]:
    """The partition whose owner (cluster mode) serves ``topic``'s ``partition``: itself, but a
    rebalance-journal partition follows the ``__consumer_offsets`` partition of the same index
    (the node coordinating those groups writes their events)."""
    return (OFFSETS_TOPIC, partition) if topic == EVENTS_TOPIC else (topic, partition)
