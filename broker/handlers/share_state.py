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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Shape:
    """One API's structs: the request's topic, the response and its result per topic, and a
    partition's answer with an error (the fields beyond the error as Kafka's error answers set them)."""

    topic: Any
    response: Any
    result: Any
    failed: Callable[[int, int], Any]


_ReadP = ReadShareGroupStateResponse.ReadStateResult.PartitionResult
_SummaryP = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult.PartitionResult
INITIALIZE = _Shape(
    InitializeShareGroupStateRequest.InitializeStateData, InitializeShareGroupStateResponse,
    InitializeShareGroupStateResponse.InitializeStateResult,
    lambda p, code: InitializeShareGroupStateResponse.InitializeStateResult.PartitionResult(
        partition=p, error_code=code))
READ = _Shape(
    ReadShareGroupStateRequest.ReadStateData, ReadShareGroupStateResponse, ReadShareGroupStateResponse.ReadStateResult,
    lambda p, code: _ReadP(partition=p, error_code=code, state_epoch=0, start_offset=-1, state_batches=[]))
WRITE = _Shape(
    WriteShareGroupStateRequest.WriteStateData, WriteShareGroupStateResponse,
    WriteShareGroupStateResponse.WriteStateResult,
    lambda p, code: WriteShareGroupStateResponse.WriteStateResult.PartitionResult(partition=p, error_code=code))
DELETE = _Shape(
    DeleteShareGroupStateRequest.DeleteStateData, DeleteShareGroupStateResponse,
    DeleteShareGroupStateResponse.DeleteStateResult,
    lambda p, code: DeleteShareGroupStateResponse.DeleteStateResult.PartitionResult(partition=p, error_code=code))
SUMMARY = _Shape(
    ReadShareGroupStateSummaryRequest.ReadStateSummaryData, ReadShareGroupStateSummaryResponse,
    ReadShareGroupStateSummaryResponse.ReadStateSummaryResult,
    lambda p, code: _SummaryP(partition=p, error_code=code, state_epoch=0, leader_epoch=-1, start_offset=-1))


def _refused(shape: _Shape, body: Any, code: int) -> Any:
    return shape.response(results=[shape.result(topic_id=t.topic_id, partitions=[
        shape.failed(p.partition, code) for p in t.partitions]) for t in body.topics])


def refuse_initialize(req: Request[InitializeShareGroupStateRequest], code: int) -> InitializeShareGroupStateResponse:
    """Every partition of the request answered ``code``; the same for the four below."""
    answer: InitializeShareGroupStateResponse = _refused(INITIALIZE, req.body, code)
    return answer


def refuse_read(req: Request[ReadShareGroupStateRequest], code: int) -> ReadShareGroupStateResponse:
    answer: ReadShareGroupStateResponse = _refused(READ, req.body, code)
    return answer


def refuse_write(req: Request[WriteShareGroupStateRequest], code: int) -> WriteShareGroupStateResponse:
    answer: WriteShareGroupStateResponse = _refused(WRITE, req.body, code)
    return answer


def refuse_delete(req: Request[DeleteShareGroupStateRequest], code: int) -> DeleteShareGroupStateResponse:
    answer: DeleteShareGroupStateResponse = _refused(DELETE, req.body, code)
    return answer


def refuse_summary(req: Request[ReadShareGroupStateSummaryRequest], code: int) -> ReadShareGroupStateSummaryResponse:
    answer: ReadShareGroupStateSummaryResponse = _refused(SUMMARY, req.body, code)
    return answer


class ShareStateApis:
    """The five share-state APIs over this node's share coordinator: one typed handler each, all
    served the same way."""

    def __init__(self, coordinator: ShareStateCoordinator, peers: PeerSecret) -> None:
        self.coordinator = coordinator
        self.peers = peers

    def initialize(self, req: Request[InitializeShareGroupStateRequest]) -> None:
        self._serve(req, INITIALIZE)

    def read(self, req: Request[ReadShareGroupStateRequest]) -> None:
        self._serve(req, READ)

    def write(self, req: Request[WriteShareGroupStateRequest]) -> None:
        self._serve(req, WRITE)

    def delete(self, req: Request[DeleteShareGroupStateRequest]) -> None:
        self._serve(req, DELETE)

    def read_summary(self, req: Request[ReadShareGroupStateSummaryRequest]) -> None:
        self._serve(req, SUMMARY)

    def _serve(self, req: Request[Any], shape: _Shape) -> None:
        body = req.body
        if not self.peers.is_peer(req.client_id):
            req.reply.set(_refused(shape, body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
            return
        answers: dict[tuple[bytes, int], Any] = {}

        def answer(ok: bool) -> None:
            del ok
            req.reply.set(shape.response(results=[shape.result(topic_id=t.topic_id, partitions=[
                answers.get((t.topic_id, p.partition), shape.failed(p.partition, ErrorCode.NOT_COORDINATOR))
                for p in t.partitions]) for t in body.topics]))

        parts = [(t.topic_id, p) for t in body.topics for p in t.partitions]
        if not parts:
            answer(True)
            return
        countdown = Countdown(len(parts), answer)
        for topic_id, p in parts:
            # One key per request: each may live on a different shard.
            one: StateRequest = type(body)(group_id=body.group_id, topics=[shape.topic(topic_id=topic_id, partitions=[p])])

            def delivered(response: Any, topic_id: bytes = topic_id, index: int = p.partition) -> None:
                if response is not None:
                    answers[(topic_id, index)] = response.results[0].partitions[0]
                countdown.arrive()

            self.coordinator.send(one, delivered)
