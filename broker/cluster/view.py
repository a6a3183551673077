"""What clients are told about the cluster: its nodes, at the address of the listener each client
came in through, and who leads each partition (this node alone, or the owners recorded in etcd)."""

from __future__ import annotations

from broker.cluster.assignment import owning_partition
from broker.cluster.node import ClusterNode


class ClusterView:
    def __init__(self, node_id: int, cluster_id: str, cluster: ClusterNode | None, advertised: tuple[str, int],
                 advertised_by_listener: dict[str, tuple[str, int]]) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.cluster = cluster
        # The first listener's address, and each listener's as given to clients that connected
        # through it (a port 0 is replaced by the bound one when the listeners open).
        self.advertised = advertised
        self.advertised_by_listener = advertised_by_listener

    @property
    def clustered(self) -> bool:
        return self.cluster is not None

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """The address of the listener a client came in through: a client of the SASL_SSL
        listener must be sent back to it, not to the first one."""
        return self.advertised_by_listener.get(listener, self.advertised)

    def live_nodes(self, listener: str) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every node clients may talk to: this one alone, or every node
        registered in the cluster. This node is given as the listener the client came in through."""
        host, port = self.advertised_for(listener)
        cluster = self.cluster
        if cluster is None:
            return [(self.node_id, host, port)]
        nodes = {node: cluster.node_listeners.get(node, {}).get(listener, address)
                 for node, address in cluster.nodes.items()}
        nodes[self.node_id] = (host, port)
        return [(node, h, p) for node, (h, p) in sorted(nodes.items())]

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader node, leader epoch) of a partition; (-1, -1) while nobody owns it."""
        if self.cluster is None:
            return self.node_id, 0
        owner = self.cluster.owner_of(owning_partition(topic, partition))
        if owner is None:
            return -1, -1
        return owner[0], owner[1] & 0x7FFFFFFF
