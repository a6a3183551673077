"""WriteTxnMarkers (API 27): another node's transaction coordinator has this node write COMMIT or
ABORT markers to partitions it owns (``broker.transactions.markers`` sends it). Served in cluster
mode only (a single node's coordinator writes every marker itself), and to the cluster's nodes only
(``broker.cluster.peers``): anyone else gets CLUSTER_AUTHORIZATION_FAILED for every partition.

Each partition is answered once its marker is durable: NOT_LEADER_OR_FOLLOWER when this node does
not own it (the coordinator finds the owner again and retries), UNKNOWN_TOPIC_OR_PARTITION when it
does not exist (no marker needed), KAFKA_STORAGE_ERROR when the write failed.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from broker.network.router import Request
from protocol.errors import ErrorCode
from protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

if TYPE_CHECKING:
    from broker.server import Broker

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


def register(broker: Broker) -> None:
    if broker.cluster is None:
        return  # a single node's coordinator writes every marker itself
    markers = broker.transactions.markers
    peers = broker.peer_secret

    def write_txn_markers(req: Request[WriteTxnMarkersRequest]) -> None:
        body = req.body
        allowed = peers.is_peer(req.header.client_id)
        codes: list[dict[tuple[str, int], int]] = [{} for _ in body.markers]
        left = [sum(len(t.partition_indexes) for m in body.markers for t in m.topics)]

        def answer() -> None:
            req.reply.set(WriteTxnMarkersResponse(markers=[MarkerResult(
                producer_id=m.producer_id,
                topics=[TopicResult(name=t.name, partitions=[
                    PartitionResult(partition_index=p, error_code=codes[i].get((t.name, p), ErrorCode.NONE))
                    for p in t.partition_indexes]) for t in m.topics])
                for i, m in enumerate(body.markers)]))

        def settle(i: int, tp: tuple[str, int], code: int) -> None:
            codes[i][tp] = code
            left[0] -= 1
            if left[0] == 0:
                answer()

        def written(i: int, tp: tuple[str, int], ok: bool) -> None:
            settle(i, tp, ErrorCode.NONE if ok else ErrorCode.KAFKA_STORAGE_ERROR)

        if left[0] == 0:
            answer()
            return
        for i, marker in enumerate(body.markers):
            for topic in marker.topics:
                for p in topic.partition_indexes:
                    tp = (topic.name, p)
                    if not allowed:
                        settle(i, tp, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    elif not markers.exists(tp):
                        settle(i, tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    elif not markers.owned_here(tp):
                        settle(i, tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    else:
                        markers.write_local(marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                            marker.coordinator_epoch, tp, partial(written, i, tp))

    broker.router.register(WriteTxnMarkersRequest, WriteTxnMarkersResponse, write_txn_markers, versions=(1, 1))
