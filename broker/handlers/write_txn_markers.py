"""WriteTxnMarkers (API 27): another node's transaction coordinator has this node write COMMIT or
ABORT markers to partitions it owns (``broker.coordinators.transaction.service.markers`` sends it). Served in cluster
mode only (a single node's coordinator writes every marker itself), and to the cluster's nodes only
(``broker.cluster.peers``): anyone else gets CLUSTER_AUTHORIZATION_FAILED for every partition.

Each partition is answered once its marker is durable: NOT_LEADER_OR_FOLLOWER when this node does
not own it (the coordinator finds the owner again and retries), UNKNOWN_TOPIC_OR_PARTITION when it
does not exist (no marker needed), KAFKA_STORAGE_ERROR when the write failed, INVALID_PRODUCER_EPOCH
when the producer's epoch on the partition refuses the marker's by the rule of the marker's
transaction version (v2's ``TransactionVersion``; 0 in a v1 request), as Kafka's partition leader
checks it (``broker.topics.producer_state``).
"""

from __future__ import annotations

from functools import partial

from broker.cluster.peers import PeerSecret
from broker.coordinators.transaction.service.markers import MarkerWriter
from broker.network.router import Request
from broker.runtime.countdown import Countdown
from protocol.errors import ErrorCode
from protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


def refused(req: Request[WriteTxnMarkersRequest], code: int) -> WriteTxnMarkersResponse:
    """Every partition of every marker answered ``code``."""
    return WriteTxnMarkersResponse(markers=[MarkerResult(producer_id=m.producer_id, topics=[
        TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p, error_code=code)
                                             for p in t.partition_indexes]) for t in m.topics])
        for m in req.body.markers])


class WriteTxnMarkersApi:
    """WriteTxnMarkers over the transaction service's marker writer."""

    def __init__(self, markers: MarkerWriter, peers: PeerSecret) -> None:
        self.markers = markers
        self.peers = peers

    def __call__(self, req: Request[WriteTxnMarkersRequest]) -> None:
        body = req.body
        allowed = self.peers.is_peer(req.client_id)
        codes: list[dict[tuple[str, int], int]] = [{} for _ in body.markers]

        def answer(_ok: bool) -> None:
            req.reply.set(WriteTxnMarkersResponse(markers=[MarkerResult(
                producer_id=m.producer_id,
                topics=[TopicResult(name=t.name, partitions=[
                    PartitionResult(partition_index=p, error_code=codes[i].get((t.name, p), ErrorCode.NONE))
                    for p in t.partition_indexes]) for t in m.topics])
                for i, m in enumerate(body.markers)]))

        # Answered once every partition has its code (Countdown(0) answers at once).
        countdown = Countdown(sum(len(t.partition_indexes) for m in body.markers for t in m.topics), answer)

        def settle(i: int, tp: tuple[str, int], code: int) -> None:
            codes[i][tp] = code
            countdown.arrive()

        for i, marker in enumerate(body.markers):
            for topic in marker.topics:
                for p in topic.partition_indexes:
                    tp = (topic.name, p)
                    if not allowed:
                        settle(i, tp, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    elif not self.markers.exists(tp):
                        settle(i, tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    elif not self.markers.owned_here(tp):
                        settle(i, tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    else:
                        self.markers.write_local(marker.producer_id, marker.producer_epoch,
                                                 marker.transaction_result, marker.coordinator_epoch,
                                                 marker.transaction_version, tp, partial(settle, i, tp))
