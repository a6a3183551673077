"""The share-state APIs between nodes (``broker/handlers/share_state.py``): only a node of the
cluster is served; each partition of a request runs on its own key's shard and the answers are put
back together in the request's order; a partition whose coordinator is not this node is answered
NOT_COORDINATOR."""

from __future__ import annotations

from typing import Any

from broker.cluster.peers import PeerSecret
from broker.coordinators.share.core.shard import ShareCoordinatorShard
from broker.coordinators.share.service.coordinator import request_key
from broker.handlers.share_state import ShareStateApis
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Request
from protocol.codec import decode
from protocol.errors import ErrorCode
from protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from protocol.schema import Data, Message

TOPIC = bytes(range(1, 17))


class TwoShards:
    """A coordinator of two shards: partition 1 of the topic is not coordinated here."""

    def __init__(self) -> None:
        self.shards = {0: ShareCoordinatorShard(0), 2: ShareCoordinatorShard(2)}
        self.sent: list[Any] = []

    def send(self, request: Any, deliver: Any) -> None:
        self.sent.append(request)
        shard = self.shards.get(request_key(request)[2])
        if shard is None:
            deliver(None)
        elif isinstance(request, InitializeShareGroupStateRequest):
            deliver(shard.initialize_state(1, request, 0).replies[0][1])
        else:
            deliver(shard.read_state(1, request, 0).replies[0][1])


def call(apis: ShareStateApis, request: Message, response: Message, body: Data, client_id: str) -> Any:
    reply = Reply(response, 0, 1, True)
    assert request.api_key is not None
    handler = {InitializeShareGroupStateRequest: apis.initialize, ReadShareGroupStateRequest: apis.read}[request]
    handler(Request(body, reply, request.api_key, 0, client_id, "User:ANONYMOUS", "PLAINTEXT", "127.0.0.1",
                 ConnectionInfo(1, "127.0.0.1", 1)))
    assert reply.data is not None
    return decode(response, reply.data[9:], 0)  # size, correlation id, tagged fields


def secret() -> PeerSecret:
    s = PeerSecret()
    s.secret = b"k" * 32
    return s


def init_request() -> Any:
    D = InitializeShareGroupStateRequest.InitializeStateData
    return InitializeShareGroupStateRequest(group_id="g", topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=p, state_epoch=1, start_offset=10 * p) for p in (2, 1, 0)])])


def test_a_client_is_refused_on_every_partition() -> None:
    coordinator = TwoShards()
    apis = ShareStateApis(coordinator, secret())  # type: ignore[arg-type]
    r = call(apis, InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, init_request(), "rdkafka")
    assert [p.error_code for p in r.results[0].partitions] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 3
    assert coordinator.sent == []


def test_each_partition_on_its_shard_answered_in_order() -> None:
    coordinator = TwoShards()
    peers = secret()
    apis = ShareStateApis(coordinator, peers)  # type: ignore[arg-type]
    node = peers.client_id(2)
    r = call(apis, InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, init_request(), node)
    assert [(p.partition, p.error_code) for p in r.results[0].partitions] == [
        (2, 0), (1, ErrorCode.NOT_COORDINATOR), (0, 0)]
    D = ReadShareGroupStateRequest.ReadStateData
    read = ReadShareGroupStateRequest(group_id="g", topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=p, leader_epoch=-1) for p in (0, 2)])])
    r = call(apis, ReadShareGroupStateRequest, ReadShareGroupStateResponse, read, node)
    assert [(p.partition, p.start_offset, p.state_epoch) for p in r.results[0].partitions] == [(0, 0, 1), (2, 20, 1)]
