"""The share coordinator's APIs between the nodes of a cluster: InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary
(KIP-932). The node leading a topic partition keeps its share partitions and reads and writes
their state at the node coordinating the key's ``__share_group_state`` partition
(``broker.share_partitions.service.remote``) with these requests. Served in cluster mode only, and to the cluster's
nodes only (``broker.cluster.peers``): anyone else gets CLUSTER_AUTHORIZATION_FAILED for every
partition, as WriteTxnMarkers.

Each partition of a request runs on the shard of its key and is answered once what it wrote is
durable; NOT_COORDINATOR when this node does not coordinate that key's partition now (the sender
finds the coordinator again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from broker.cluster.peers import PeerSecret
from broker.coordinators.share.service.coordinator import ShareCoordinatorService, StateRequest
from broker.network.router import Request
from broker.runtime.countdown import Countdown
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
from protocol.schema import Data

R = TypeVar("R", bound=StateRequest)


@dataclass(frozen=True)
class Shape(Generic[R]):
    """One API's structs: the request's topic, the response and its result per topic, and a
    partition's answer with an error (the fields beyond the error as Kafka's error answers set them)."""

    topic: Any
    response: Any
    result: Any
    failed: Callable[[int, int], Any]

    def answer(self, body: Any, code: int, answered: dict[tuple[bytes, int], Any] | None = None) -> Any:
        """The response to ``body``: each partition's answer from ``answered`` (by topic id and
        partition), the others answered ``code``."""
        got = answered or {}

        def one(topic_id: bytes, partition: int) -> Any:
            found = got.get((topic_id, partition))
            return self.failed(partition, code) if found is None else found

        return self.response(results=[self.result(topic_id=t.topic_id, partitions=[
            one(t.topic_id, p.partition) for p in t.partitions]) for t in body.topics])

    def refuse(self, req: Request[R], code: int) -> Data:
        """The API's refusal (its entry in ``broker/apis.py``): every partition answered ``code``."""
        refused: Data = self.answer(req.body, code)
        return refused


_ReadP = ReadShareGroupStateResponse.ReadStateResult.PartitionResult
_SummaryP = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult.PartitionResult
INITIALIZE: Shape[InitializeShareGroupStateRequest] = Shape(
    InitializeShareGroupStateRequest.InitializeStateData, InitializeShareGroupStateResponse,
    InitializeShareGroupStateResponse.InitializeStateResult,
    lambda p, code: InitializeShareGroupStateResponse.InitializeStateResult.PartitionResult(
        partition=p, error_code=code))
READ: Shape[ReadShareGroupStateRequest] = Shape(
    ReadShareGroupStateRequest.ReadStateData, ReadShareGroupStateResponse, ReadShareGroupStateResponse.ReadStateResult,
    lambda p, code: _ReadP(partition=p, error_code=code, state_epoch=0, start_offset=-1, state_batches=[]))
WRITE: Shape[WriteShareGroupStateRequest] = Shape(
    WriteShareGroupStateRequest.WriteStateData, WriteShareGroupStateResponse,
    WriteShareGroupStateResponse.WriteStateResult,
    lambda p, code: WriteShareGroupStateResponse.WriteStateResult.PartitionResult(partition=p, error_code=code))
DELETE: Shape[DeleteShareGroupStateRequest] = Shape(
    DeleteShareGroupStateRequest.DeleteStateData, DeleteShareGroupStateResponse,
    DeleteShareGroupStateResponse.DeleteStateResult,
    lambda p, code: DeleteShareGroupStateResponse.DeleteStateResult.PartitionResult(partition=p, error_code=code))
SUMMARY: Shape[ReadShareGroupStateSummaryRequest] = Shape(
    ReadShareGroupStateSummaryRequest.ReadStateSummaryData, ReadShareGroupStateSummaryResponse,
    ReadShareGroupStateSummaryResponse.ReadStateSummaryResult,
    lambda p, code: _SummaryP(partition=p, error_code=code, state_epoch=0, leader_epoch=-1, start_offset=-1))


class ShareStateApis:
    """The five share-state APIs over this node's share coordinator: one typed handler each, all
    served the same way."""

    def __init__(self, coordinator: ShareCoordinatorService, peers: PeerSecret) -> None:
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

    def _serve(self, req: Request[R], shape: Shape[R]) -> None:
        body = req.body
        if not self.peers.is_peer(req.client_id):
            req.reply.set(shape.answer(body, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
            return
        answers: dict[tuple[bytes, int], Any] = {}

        def answer(ok: bool) -> None:
            del ok  # a partition without an answer is one this node does not coordinate now
            req.reply.set(shape.answer(body, ErrorCode.NOT_COORDINATOR, answers))

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
