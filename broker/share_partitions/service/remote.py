"""Share partitions' state in a cluster: each key's ``__share_group_state`` partition is owned like
the coordinators' partitions (claimed through etcd), and the node leading a topic partition reads
and writes its share partitions' state at that partition's owner. This node's own share
coordinator serves the keys of the partitions it owns; any other key's request goes to its owner
over ``broker.cluster.peers`` (Read/Write/Initialize/DeleteShareGroupState,
ReadShareGroupStateSummary, served to nodes only by ``broker.handlers.share_state``).

An answer whose partition says NOT_COORDINATOR, or none at all (the owner moved, died, or has not
loaded the partition yet), is delivered as None: the share partition is not served until it can
be read, and a write is not acknowledged."""

from __future__ import annotations

from typing import Any

from broker.cluster.node import ClusterNode
from broker.cluster.peers import PeerClient
from broker.coordinators.share.service.coordinator import (
    STATE_TOPIC,
    Deliver,
    ShareCoordinatorService,
    StateRequest,
    request_key,
)
from protocol.errors import ErrorCode
from protocol.messages import ApiKey

_APIS: dict[str, tuple[ApiKey, int]] = {
    "InitializeShareGroupStateRequest": (ApiKey.InitializeShareGroupState, 0),
    "ReadShareGroupStateRequest": (ApiKey.ReadShareGroupState, 0),
    "WriteShareGroupStateRequest": (ApiKey.WriteShareGroupState, 1),
    "DeleteShareGroupStateRequest": (ApiKey.DeleteShareGroupState, 0),
    "ReadShareGroupStateSummaryRequest": (ApiKey.ReadShareGroupStateSummary, 1),
}


class ClusterPersister:
    def __init__(self, local: ShareCoordinatorService, cluster: ClusterNode, peers: PeerClient) -> None:
        self.local = local
        self.cluster = cluster
        self.peers = peers

    def send(self, request: StateRequest, deliver: Deliver) -> None:
        partition = (STATE_TOPIC, self.local.partition_for(request_key(request)))
        if self.cluster.owns(partition):
            self.local.send(request, deliver)
            return
        owner = self.cluster.owner_of(partition)
        if owner is None:
            deliver(None)
            return
        api_key, version = _APIS[type(request).__name__]

        def answered(response: Any) -> None:
            if response is None or response.results[0].partitions[0].error_code in (
                    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
                deliver(None)
            else:
                deliver(response)

        self.peers.send(owner[0], api_key, version, request, answered)
