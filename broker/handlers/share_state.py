"""The share coordinator's APIs between the nodes of a cluster: InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary
(KIP-932). The node leading a topic partition keeps its share partitions and reads and writes
their state at the node coordinating the key's ``__share_group_state`` partition
(``broker.share.remote``) with these requests. Served in cluster mode only, and to the cluster's
nodes only (``broker.cluster.peers``): anyone else gets CLUSTER_AUTHORIZATION_FAILED for every
partition, as WriteTxnMarkers.

Each partition of a request runs on the shard of its key and is answered once what it wrote is
durable; NOT_COORDINATOR when this node does not coordinate that key's partition now (the sender
finds the coordinator again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.cluster.peers import PeerSecret
from broker.network.router import Request
from broker.runtime.countdown import Countdown
from broker.share.coordinator import ShareStateCoordinator, StateRequest
from protocol.errors import ErrorCode
from protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)
from protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from protocol.messages.write_share_group_state import (
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)

# Per API: the request's topic struct, the response's result struct, and a partition's answer
# with an error (the fields beyond the error as Kafka's error answers set them).
_ReadP = ReadShareGroupStateResponse.ReadStateResult.PartitionResult
_SummaryP = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult.PartitionResult
_SHAPES: dict[str, tuple[Any, Any, Any, Callable[[int, int], Any]]] = {
    "InitializeShareGroupStateRequest": (
        InitializeShareGroupStateRequest.InitializeStateData, InitializeShareGroupStateResponse,
        InitializeShareGroupStateResponse.InitializeStateResult,
        lambda p, code: InitializeShareGroupStateResponse.InitializeStateResult.PartitionResult(
            partition=p, error_code=code)),
    "ReadShareGroupStateRequest": (
        ReadShareGroupStateRequest.ReadStateData, ReadShareGroupStateResponse, ReadShareGroupStateResponse.ReadStateResult,
        lambda p, code: _ReadP(partition=p, error_code=code, state_epoch=0, start_offset=-1, state_batches=[])),
    "WriteShareGroupStateRequest": (
        WriteShareGroupStateRequest.WriteStateData, WriteShareGroupStateResponse,
        WriteShareGroupStateResponse.WriteStateResult,
        lambda p, code: WriteShareGroupStateResponse.WriteStateResult.PartitionResult(partition=p, error_code=code)),
    "DeleteShareGroupStateRequest": (
        DeleteShareGroupStateRequest.DeleteStateData, DeleteShareGroupStateResponse,
        DeleteShareGroupStateResponse.DeleteStateResult,
        lambda p, code: DeleteShareGroupStateResponse.DeleteStateResult.PartitionResult(partition=p, error_code=code)),
    "ReadShareGroupStateSummaryRequest": (
        ReadShareGroupStateSummaryRequest.ReadStateSummaryData, ReadShareGroupStateSummaryResponse,
        ReadShareGroupStateSummaryResponse.ReadStateSummaryResult,
        lambda p, code: _SummaryP(partition=p, error_code=code, state_epoch=0, leader_epoch=-1, start_offset=-1)),
}


def _shape(body: Any) -> tuple[Any, Any, Any, Callable[[int, int], Any]]:
    return _SHAPES[type(body).__name__]


def refused(req: Request[Any], code: int) -> Any:
    """Every partition of the request answered ``code``."""
    _topic, response, result, failed = _shape(req.body)
    return response(results=[result(topic_id=t.topic_id, partitions=[failed(p.partition, code) for p in t.partitions])
                             for t in req.body.topics])


class ShareStateApis:
    """The five share-state APIs over this node's share coordinator."""

    def __init__(self, coordinator: ShareStateCoordinator, peers: PeerSecret) -> None:
        self.coordinator = coordinator
        self.peers = peers

    def __call__(self, req: Request[Any]) -> None:
        body = req.body
        if not self.peers.is_peer(req.client_id):
            req.reply.set(refused(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
            return
        topic_cls, response_cls, result_cls, failed = _shape(body)
        answers: dict[tuple[bytes, int], Any] = {}

        def answer(ok: bool) -> None:
            del ok
            req.reply.set(response_cls(results=[result_cls(topic_id=t.topic_id, partitions=[
                answers.get((t.topic_id, p.partition), failed(p.partition, ErrorCode.NOT_COORDINATOR))
                for p in t.partitions]) for t in body.topics]))

        parts = [(t.topic_id, p) for t in body.topics for p in t.partitions]
        if not parts:
            answer(True)
            return
        countdown = Countdown(len(parts), answer)
        for topic_id, p in parts:
            # One key per request: each may live on a different shard.
            one: StateRequest = type(body)(group_id=body.group_id, topics=[topic_cls(topic_id=topic_id, partitions=[p])])

            def delivered(response: Any, topic_id: bytes = topic_id, index: int = p.partition) -> None:
                if response is not None:
                    answers[(topic_id, index)] = response.results[0].partitions[0]
                countdown.arrive()

            self.coordinator.send(one, delivered)
