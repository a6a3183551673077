"""The topology APIs where a partition has no owner (a cluster node died and its lease has not
expired yet): no leader, no replica to elect, nothing to reassign to; and UpdateFeatures' checks."""

from __future__ import annotations

from pathlib import Path

from broker.cluster.view import ClusterView
from broker.handlers.topology import TopologyApis
from broker.network.reply import Reply
from broker.network.router import ConnectionInfo, Request
from broker.topics.catalog import TopicCatalog
from protocol.codec import decode
from protocol.errors import ErrorCode
from protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from protocol.schema import Data, Message


class OrphanView(ClusterView):
    """Partition 1 of every topic has no owner; the others are led by node 2 of nodes 1 and 2."""

    def __init__(self) -> None:
        super().__init__(1, "cluster", None, ("127.0.0.1", 9000), {})

    def live_nodes(self, listener: str) -> list[tuple[int, str, int]]:
        return [(1, "127.0.0.1", 9000), (2, "127.0.0.1", 9001)]

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return (-1, -1) if partition == 1 else (2, 5)


def apis(tmp_path: Path) -> TopologyApis:
    catalog = TopicCatalog(tmp_path, 1)
    catalog.create("t", 2)
    return TopologyApis(OrphanView(), catalog, None, lambda: [68], lambda: 1_000)


def call(handler: object, request: Message, response: Message, body: Data, version: int) -> Data:
    reply = Reply(response, version, 1, response.is_flexible(version))
    assert request.api_key is not None
    req = Request(body, reply, request.api_key, version, "test", "User:ANONYMOUS", "PLAINTEXT", "127.0.0.1",
                  ConnectionInfo(1, "127.0.0.1", 1))
    handler(req)  # type: ignore[operator]
    assert reply.data is not None
    header = 9 if response.is_flexible(version) else 8  # size, correlation id (and its tagged fields)
    return decode(response, reply.data[header:], version)


def test_a_partition_without_owner(tmp_path: Path) -> None:
    t = apis(tmp_path)
    described = call(t.describe_topic_partitions, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
                     DescribeTopicPartitionsRequest(topics=[DescribeTopicPartitionsRequest.TopicRequest(name="t")]), 0)
    owned, orphan = described.topics[0].partitions  # type: ignore[attr-defined]
    assert (owned.leader_id, owned.leader_epoch, owned.replica_nodes, owned.isr_nodes) == (2, 5, [2], [2])
    assert (orphan.leader_id, orphan.replica_nodes, orphan.isr_nodes, orphan.eligible_leader_replicas) == (-1, [], [], [])
    asked = [ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 1])]
    codes = []
    for election in (0, 1):
        elected = call(t.elect_leaders, ElectLeadersRequest, ElectLeadersResponse,
                       ElectLeadersRequest(election_type=election, topic_partitions=asked, timeout_ms=1000), 2)
        codes.append([p.error_code for p in elected.replica_election_results[0].partition_result])  # type: ignore[attr-defined]
    assert codes == [[ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE],
                     [ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE]]


def test_reassignments_in_a_cluster(tmp_path: Path) -> None:
    """Only the replica a partition has is accepted: kcoord places partitions itself."""
    t = apis(tmp_path)
    P = AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition
    moves = [P(partition_index=0, replicas=[2]), P(partition_index=0, replicas=[1]),
             P(partition_index=0, replicas=[1, 2]), P(partition_index=1, replicas=[1]), P(partition_index=0, replicas=[3])]
    answer = call(t.alter_partition_reassignments, AlterPartitionReassignmentsRequest,
                  AlterPartitionReassignmentsResponse, AlterPartitionReassignmentsRequest(
                      topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name="t", partitions=moves)]), 1)
    assert [p.error_code for p in answer.responses[0].partitions] == [  # type: ignore[attr-defined]
        0] + [ErrorCode.INVALID_REPLICA_ASSIGNMENT] * 4


def test_update_features_keeps_every_level(tmp_path: Path) -> None:
    t = apis(tmp_path)
    U = UpdateFeaturesRequest.FeatureUpdateKey

    def code(version: int, *updates: UpdateFeaturesRequest.FeatureUpdateKey) -> int:
        answer = call(t.update_features, UpdateFeaturesRequest, UpdateFeaturesResponse,
                      UpdateFeaturesRequest(feature_updates=list(updates), validate_only=True), version)
        return answer.error_code  # type: ignore[attr-defined]

    assert code(2, U(feature="group.version", max_version_level=1)) == 0
    assert code(2, U(feature="metadata.version", max_version_level=33)) == 0
    assert code(0, U(feature="group.version", max_version_level=0, allow_downgrade=True)) == ErrorCode.INVALID_UPDATE_VERSION
    assert code(2, U(feature="transaction.version", max_version_level=2)) == 0  # where it is
    assert code(2, U(feature="transaction.version", max_version_level=1, upgrade_type=2)) == ErrorCode.INVALID_UPDATE_VERSION
    assert code(2, U(feature="share.version", max_version_level=1)) == ErrorCode.INVALID_UPDATE_VERSION
