"""Where partitions live, through real clients and Kafka's own tools: kafka-topics --describe
(DescribeTopicPartitions, paged), kafka-reassign-partitions --list and --verify,
kafka-metadata-quorum, kafka-leader-election and kafka-features against kcoord; the admin calls
of kafka-python and confluent-kafka that use these APIs; and their ACL checks."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.errors import ClusterAuthorizationFailedError, InvalidUpdateVersionError
from kafka.structs import TopicPartition

from kclient.wire_client import WireClient
from protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from protocol.messages.describe_quorum import DescribeQuorumRequest
from protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from protocol.messages.elect_leaders import ElectLeadersRequest
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.cluster import Cluster
from tests.integration.helpers.kafka_programs import Tools

pytestmark = pytest.mark.timeout(180)

TOPICS = "org.apache.kafka.tools.TopicCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
ELECTION_NOT_NEEDED, INVALID_REPLICA_ASSIGNMENT = 84, 39
TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def kcoord(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("kcoord-topology") / "data", {"node.id": "1"}).start()
    broker.wait_loaded()
    yield broker
    broker.kill()


@pytest.fixture(scope="module")
def tools(kafka_libs: Path, kcoord: BrokerProcess) -> Tools:
    return Tools(kafka_libs, kcoord.bootstrap)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def test_kafka_topics_describe_pages_through_partitions(tools: Tools, kcoord: BrokerProcess) -> None:
    """kafka-topics asks with DescribeTopicPartitions; one partition per answer makes it follow the
    cursor through every partition of both topics."""
    first, second = sorted((unique("describe-a"), unique("describe-b")))
    create(kcoord.bootstrap, first, 3)
    create(kcoord.bootstrap, second, 2)
    out = tools.out(TOPICS, "--describe", "--topic", f"{first}|{second}", "--partition-size-limit-per-response", "1")
    rows = [dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
            for line in out.splitlines() if line.startswith("\tTopic:")]
    # The tool prints the topics in the order its own set of names gives (as against Kafka); each
    # topic's partitions come in order.
    described = [(r["Topic"], r["Partition"]) for r in rows]
    assert sorted(described) == [(first, "0"), (first, "1"), (first, "2"), (second, "0"), (second, "1")]
    assert [p for t, p in described if t == first] == ["0", "1", "2"]
    assert all(r["Leader"] == "1" and r["Replicas"] == "1" and r["Isr"] == "1" for r in rows)
    assert f"Topic: {first}\tTopicId: " in out and "PartitionCount: 3\tReplicationFactor: 1" in out
    assert "Elr: \tLastKnownElr: " in out  # DescribeTopicPartitions' own fields: no eligible leader replicas


def test_kafka_reassign_partitions_list_and_verify(tools: Tools, kcoord: BrokerProcess, tmp_path: Path) -> None:
    topic = unique("reassign")
    create(kcoord.bootstrap, topic, 2)
    assert "No partition reassignments found." in tools.out(REASSIGN, "--list")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [1], "log_dirs": ["any"]} for p in (0, 1)]}))
    out = tools.out(REASSIGN, "--verify", "--reassignment-json-file", str(plan))
    assert f"Reassignment of partition {topic}-0 is completed." in out
    assert f"Reassignment of partition {topic}-1 is completed." in out
    # Without --preserve-throttles the tool clears the throttles with IncrementalAlterConfigs (deleting the
    # brokers' throttled rates and the topics' throttled replicas) and fails if any of them is refused.
    assert "Clearing broker-level throttles on broker 1" in out
    assert f"Clearing topic-level throttles on topic {topic}" in out


def test_kafka_metadata_quorum_sees_a_one_node_quorum(tools: Tools, kcoord: BrokerProcess) -> None:
    status = dict(line.split(":", 1) for line in tools.out(QUORUM, "describe", "--status").splitlines() if ":" in line)
    assert status["LeaderId"].strip() == "1"
    assert status["HighWatermark"].strip() == "0"
    assert json.loads(status["CurrentVoters"]) == [{"id": 1, "endpoints": [f"PLAINTEXT://{kcoord.bootstrap}"]}]
    assert json.loads(status["CurrentObservers"]) == []


def test_kafka_leader_election_finds_nothing_to_elect(tools: Tools, kcoord: BrokerProcess) -> None:
    topic = unique("elect")
    create(kcoord.bootstrap, topic, 1)
    out = tools.out(ELECTION, "--election-type", "preferred", "--topic", topic, "--partition", "0")
    assert f"Valid replica already elected for partitions {topic}-0" in out


def test_kafka_features_describe(tools: Tools) -> None:
    rows = {line.split()[1]: line for line in tools.out(FEATURES, "describe").splitlines() if line.startswith("Feature:")}
    assert "FinalizedVersionLevel: 4.4-IV2" in rows["metadata.version"]
    assert "FinalizedVersionLevel: 1" in rows["group.version"]
    assert "SupportedMaxVersion: 2" in rows["transaction.version"]
    assert "FinalizedVersionLevel: 2" in rows["transaction.version"]
    assert set(rows) == {"metadata.version", "kraft.version", "group.version", "transaction.version",
                         "eligible.leader.replicas.version", "share.version", "streams.version"}


def test_kafka_python_admin(kcoord: BrokerProcess) -> None:
    topic = unique("kafka-python")
    create(kcoord.bootstrap, topic, 3)
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, client_id="topology")
    try:
        page = admin.describe_topic_partitions([topic], response_partition_limit=2)
        assert [p["partition_index"] for p in page["topics"][0]["partitions"]] == [0, 1]
        rest = admin.describe_topic_partitions([topic], cursor=page["next_cursor"])
        assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [2]
        assert rest["next_cursor"] is None
        elected = admin.elect_leaders(0, {topic: [0, 1, 2]}, raise_errors=False)
        assert [p[1] for p in elected.replica_election_results[0][1]] == [ELECTION_NOT_NEEDED] * 3
        assert admin.alter_partition_reassignments({TopicPartition(topic, 0): [1]}) == {TopicPartition(topic, 0): None}
        assert admin.list_partition_reassignments() == {}
        quorum = admin.describe_metadata_quorum()
        assert quorum["topics"][0]["partitions"][0]["leader_id"] == 1
        features = admin.describe_features()
        assert features["metadata.version"]["finalized"] == (33, 33)
        assert features["transaction.version"] == {"supported": (0, 2), "finalized": (2, 2), "finalized_epoch": 1}
        assert admin.update_features({"group.version": 1}, validate_only=True) == {"group.version": "OK"}
        with pytest.raises(InvalidUpdateVersionError):
            admin.update_features({"group.version": 0}, validate_only=True)
    finally:
        admin.close()


def test_confluent_elect_leaders(kcoord: BrokerProcess) -> None:
    topic = unique("confluent-elect")
    create(kcoord.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": kcoord.bootstrap})
    results = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(topic, 0), CTopicPartition(topic, 1)]).result(30)
    # librdkafka reports a partition whose leader is already the preferred one as no error.
    assert {(tp.topic, tp.partition) for tp in results} == {(topic, 0), (topic, 1)}
    assert all(error is None or error.code() == ELECTION_NOT_NEEDED for error in results.values())


def test_acls_of_the_topology_apis(tmp_path: Path) -> None:
    """Alter on the cluster for ElectLeaders, Describe on each topic for DescribeTopicPartitions
    (a denied topic asked by name is refused, one not named is left out) with the principal's own
    authorized operations."""
    broker = BrokerProcess(tmp_path / "data", {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"}).start()
    try:
        broker.wait_loaded()
        shown, hidden = unique("shown"), unique("hidden")
        create(broker.bootstrap, shown, 1)
        create(broker.bootstrap, hidden, 1)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        deny = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.ALTER, AclPermissionType.DENY),
                AclBinding(ResourceType.TOPIC, hidden, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.DESCRIBE, AclPermissionType.DENY),
                AclBinding(ResourceType.TOPIC, shown, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.WRITE, AclPermissionType.DENY),
                AclBinding(ResourceType.TOPIC, shown, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.DESCRIBE, AclPermissionType.ALLOW)]
        for future in admin.create_acls(deny).values():
            future.result(30)
        with WireClient("127.0.0.1", broker.port) as c:
            elect = c.call(43, 2, ElectLeadersRequest(election_type=0, timeout_ms=10000, topic_partitions=[
                ElectLeadersRequest.TopicPartitions(topic=shown, partitions=[0])]))
            assert elect.error_code == CLUSTER_AUTHORIZATION_FAILED
            assert elect.replica_election_results[0].partition_result[0].error_code == CLUSTER_AUTHORIZATION_FAILED
            T = DescribeTopicPartitionsRequest.TopicRequest
            named = c.call(75, 0, DescribeTopicPartitionsRequest(topics=[T(name=shown), T(name=hidden)]))
            by_name = {t.name: t for t in named.topics}
            assert by_name[hidden].error_code == TOPIC_AUTHORIZATION_FAILED and by_name[hidden].partitions == []
            assert by_name[hidden].topic_id == bytes(16)
            assert by_name[shown].error_code == 0 and len(by_name[shown].partitions) == 1
            write_bit = 1 << 4
            assert by_name[shown].topic_authorized_operations & write_bit == 0
            assert by_name[shown].topic_authorized_operations & (1 << 8)  # Describe
            everything = c.call(75, 0, DescribeTopicPartitionsRequest(topics=[]))
            names = {t.name for t in everything.topics}
            assert shown in names and hidden not in names
        with pytest.raises(KafkaException):
            admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(shown, 0)]).result(30)
        python_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="topology-acl")
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                python_admin.alter_partition_reassignments({TopicPartition(shown, 0): [1]})
        finally:
            python_admin.close()
    finally:
        broker.kill()


def test_in_a_cluster(cluster: Cluster) -> None:
    """Two nodes: each partition's owner is its leader, replica and ISR on every node;
    DescribeQuorum names the lowest live node as the quorum's one voter, as Metadata names it
    controller; a partition can be "reassigned" only to the node that owns it."""
    for node in (1, 2):
        cluster.start_node(node)
    cluster.wait_spread({1, 2})
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    topic = unique("cluster-topology")
    create(bootstrap, topic, 4)
    owners = cluster.wait_topic_spread(topic, {1, 2})
    T = DescribeTopicPartitionsRequest.TopicRequest
    P = AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition
    for b in cluster.alive():
        with WireClient("127.0.0.1", b.port) as c:
            described = c.call(75, 0, DescribeTopicPartitionsRequest(topics=[T(name=topic)]))
            assert {p.partition_index: (p.leader_id, p.replica_nodes, p.isr_nodes)
                    for p in described.topics[0].partitions} == {i: (n, [n], [n]) for i, n in owners.items()}
            quorum = c.call(55, 2, DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.TopicData.PartitionData(
                    partition_index=0)])]))
            part = quorum.topics[0].partitions[0]
            assert (part.leader_id, [v.replica_id for v in part.current_voters]) == (1, [1])
            assert [(n.node_id, n.listeners[0].port) for n in quorum.nodes] == [(1, cluster.nodes[1].port)]
            other = {i: 3 - n for i, n in owners.items()}
            moved = c.call(45, 1, AlterPartitionReassignmentsRequest(topics=[
                AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
                    P(partition_index=0, replicas=[owners[0]]), P(partition_index=1, replicas=[other[1]]),
                    P(partition_index=2, replicas=[1, 2]), P(partition_index=3, replicas=[7])])]))
            assert [p.error_code for p in moved.responses[0].partitions] == [0, INVALID_REPLICA_ASSIGNMENT,
                                                                           INVALID_REPLICA_ASSIGNMENT,
                                                                           INVALID_REPLICA_ASSIGNMENT]
            elected = c.call(43, 2, ElectLeadersRequest(election_type=0, timeout_ms=10000, topic_partitions=[
                ElectLeadersRequest.TopicPartitions(topic=topic, partitions=[0, 1, 2, 3])]))
            assert {p.error_code for p in elected.replica_election_results[0].partition_result} == {ELECTION_NOT_NEEDED}
