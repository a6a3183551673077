"""Where partitions live, against Apache Kafka 4.4 and kcoord: DescribeTopicPartitions (pages,
cursors, unknown and invalid topics), ElectLeaders, AlterPartitionReassignments and
ListPartitionReassignments, DescribeQuorum, UpdateFeatures, the features ApiVersions lists and
UnregisterBroker of a broker id nobody has.
Both brokers are one node with one replica per partition, which is what kcoord always is."""

from __future__ import annotations

import pytest

from kclient.wire_client import WireClient
from protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.messages.elect_leaders import ElectLeadersRequest
from protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.unregister_broker import UnregisterBrokerRequest
from protocol.messages.update_features import UpdateFeaturesRequest
from tests.differential.harness import Pair, Target, unique
from tests.differential.ops import create_topic

pytestmark = pytest.mark.differential

DTP = DescribeTopicPartitionsRequest
EL = ElectLeadersRequest
APR = AlterPartitionReassignmentsRequest
Reassign = APR.ReassignableTopic.ReassignablePartition
FU = UpdateFeaturesRequest.FeatureUpdateKey
REQUEST_TIMED_OUT, NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT = 7, 85, 39
ELECTION_NOT_NEEDED, INVALID_UPDATE_VERSION, RESOURCE_NOT_FOUND = 84, 95, 91


def describe(c: WireClient, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> object:
    return c.call(75, 0, DTP(topics=[DTP.TopicRequest(name=n) for n in topics], response_partition_limit=limit,
                             cursor=None if cursor is None else DTP.Cursor(topic_name=cursor[0],
                                                                           partition_index=cursor[1])))


def leader_of(c: WireClient, topic: str) -> int:
    answer: MetadataResponse = c.call(3, 12, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                                             allow_auto_topic_creation=False))
    return answer.topics[0].partitions[0].leader_id


def test_describe_topic_partitions_pages_and_cursors(pair: Pair) -> None:
    a, b = sorted((unique("dtp-a"), unique("dtp-b")))
    missing = unique("dtp-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, a, 3)
        create_topic(c, b, 2)
        return [
            describe(c, [b, a, missing]),
            describe(c, [b, a, missing], limit=2),  # a's first two partitions, then a cursor into a
            describe(c, [a, b], limit=2, cursor=(a, 2)),  # from a-2: a-2 and b-0, cursor b-1
            describe(c, [a, b], limit=3, cursor=(a, 1)),  # ends with a: the cursor names b from 0
            describe(c, [a, b], limit=10, cursor=(a, 7)),  # past a's last partition: none of a
            describe(c, [b], cursor=(a, 0)),  # the cursor's topic is not asked for: INVALID_REQUEST
            describe(c, [a], limit=0),  # at least one partition
            describe(c, ["bad name!", a, a]),
            describe(c, [""]),
        ]

    answers = pair.compare(scenario)
    assert answers[1]["next_cursor"] == {"topic_name": a, "partition_index": 2}  # type: ignore[index]
    assert answers[5]["topics"][0]["error_code"] == 42  # type: ignore[index]


def test_elect_leaders_of_one_replica_partitions(pair: Pair) -> None:
    topic, missing = unique("elect"), unique("elect-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        asked = [EL.TopicPartitions(topic=topic, partitions=[0, 1, 5, -1]),
                 EL.TopicPartitions(topic=missing, partitions=[0]),
                 EL.TopicPartitions(topic="__consumer_offsets", partitions=[0])]
        answers = [c.call(43, v, EL(election_type=kind, topic_partitions=asked, timeout_ms=10000))
                   for v, kind in ((0, 0), (1, 0), (2, 0), (2, 1))]
        answers.append(c.call(43, 2, EL(election_type=3, topic_partitions=asked, timeout_ms=10000)))
        answers.append(c.call(43, 2, EL(election_type=0, topic_partitions=asked[:1], timeout_ms=0)))
        answers.append(c.call(43, 2, EL(election_type=0, topic_partitions=[], timeout_ms=10000)))
        # Every partition: those whose leader is already the preferred one are left out.
        every = c.call(43, 2, EL(election_type=0, topic_partitions=None, timeout_ms=10000))
        answers.append([r for r in every.replica_election_results if r.topic == topic])
        return answers

    answers = pair.compare(scenario)
    first = answers[2]["replica_election_results"][0]["partition_result"]  # type: ignore[index]
    assert [p["error_code"] for p in first] == [ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED, 3, 3]
    assert answers[5]["error_code"] == REQUEST_TIMED_OUT  # type: ignore[index]


def test_partition_reassignments_that_cannot_happen(pair: Pair) -> None:
    topic, missing = unique("reassign"), unique("reassign-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 3)
        node = leader_of(c, topic)
        moves = [APR.ReassignableTopic(name=topic, partitions=[
            Reassign(partition_index=0, replicas=[node]),  # where it is: done at once
            Reassign(partition_index=1, replicas=[12345]),  # no such broker
            Reassign(partition_index=2, replicas=None),  # cancel: nothing in progress
            Reassign(partition_index=9, replicas=[node]),
            Reassign(partition_index=0, replicas=[node, node]),
            Reassign(partition_index=1, replicas=[]),
        ]), APR.ReassignableTopic(name=missing, partitions=[Reassign(partition_index=0, replicas=[node])])]
        LT = ListPartitionReassignmentsRequest.Topics
        return [
            c.call(45, 0, APR(timeout_ms=10000, topics=moves)),
            c.call(45, 1, APR(timeout_ms=10000, allow_replication_factor_change=False, topics=moves)),
            c.call(45, 1, APR(timeout_ms=0, topics=moves[:1])),
            c.call(46, 0, ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None)),
            c.call(46, 0, ListPartitionReassignmentsRequest(timeout_ms=10000, topics=[
                LT(name=topic, partition_indexes=[0, 7]), LT(name=missing, partition_indexes=[0])])),
        ]

    answers = pair.compare(scenario)
    # (Partitions come sorted by index, in request order within one index.)
    codes = [p["error_code"] for p in answers[0]["responses"][0]["partitions"]]  # type: ignore[index]
    assert codes == [0, INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICA_ASSIGNMENT, INVALID_REPLICA_ASSIGNMENT,
                     NO_REASSIGNMENT_IN_PROGRESS, 3]


def test_describe_quorum(pair: Pair) -> None:
    """A one-node quorum led by the node; its offsets and timestamps are its own (kcoord has no
    metadata log), and Kafka's voter listens on its controller listener, kcoord's on the client's."""
    TD, PD = DescribeQuorumRequest.TopicData, DescribeQuorumRequest.TopicData.PartitionData

    def scenario(t: Target) -> object:
        c = t.client()
        answers = []
        for version in (0, 1, 2):
            answer: DescribeQuorumResponse = c.call(55, version, DescribeQuorumRequest(topics=[
                TD(topic_name="__cluster_metadata", partitions=[PD(partition_index=0)])]))
            part = answer.topics[0].partitions[0]
            assert part.high_watermark >= 0 and part.current_voters[0].log_end_offset >= 0
            assert part.current_voters[0].replica_id == part.leader_id
            answers.append({"error_code": answer.error_code, "leader_id": part.leader_id,
                            "leader_epoch": part.leader_epoch, "voters": len(part.current_voters),
                            "observers": part.observers, "nodes": [{"node_id": n.node_id} for n in answer.nodes]})
        for topics in ([TD(topic_name="__cluster_metadata", partitions=[PD(partition_index=1)])],
                       [TD(topic_name="some-topic", partitions=[PD(partition_index=0)])], [],
                       [TD(topic_name="__cluster_metadata", partitions=[PD(partition_index=0)] * 2)]):
            refused: DescribeQuorumResponse = c.call(55, 2, DescribeQuorumRequest(topics=topics))
            # A refused partition's leader is 0 on both: not a node, so not renamed as one.
            answers.append({"error_code": refused.error_code, "nodes": refused.nodes, "topics": [
                (t.topic_name, [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.high_watermark,
                                 p.current_voters, p.observers) for p in t.partitions]) for t in refused.topics]})
        return answers

    pair.compare(scenario)


def test_update_features_kcoord_and_kafka_agree_on(pair: Pair) -> None:
    """The updates both refuse, and those both accept (a level kept where it is). Where the two
    differ (Kafka may move a level kcoord implements at one level only) is in docs/differential.md."""
    def updates(*u: FU) -> list[FU]:
        return list(u)

    cases = [
        (0, updates(FU(feature="group.version", max_version_level=1, allow_downgrade=False))),
        (1, updates(FU(feature="group.version", max_version_level=1, upgrade_type=1))),
        (1, updates(FU(feature="group.version", max_version_level=1), FU(feature="foo.version", max_version_level=1))),
        (2, updates(FU(feature="foo.version", max_version_level=1))),
        (2, updates(FU(feature="group.version", max_version_level=5))),
        (2, updates(FU(feature="group.version", max_version_level=0, upgrade_type=1))),
        (2, updates(FU(feature="group.version", max_version_level=1, upgrade_type=7))),
        (2, updates(FU(feature="group.version", max_version_level=-1, upgrade_type=2))),
        (2, updates(FU(feature="metadata.version", max_version_level=25, upgrade_type=2))),
        (2, updates(FU(feature="metadata.version", max_version_level=25, upgrade_type=3))),
        (2, updates(FU(feature="metadata.version", max_version_level=33, upgrade_type=1))),
        (2, updates(FU(feature="metadata.version", max_version_level=99, upgrade_type=1))),
        (2, updates()),
    ]

    def scenario(t: Target) -> object:
        c = t.client()
        return [c.call(57, v, UpdateFeaturesRequest(timeout_ms=10000, feature_updates=u, validate_only=True))
                for v, u in cases]

    answers = pair.compare(scenario)
    assert answers[3]["error_code"] == INVALID_UPDATE_VERSION  # type: ignore[index]


# Features whose finalized level differs, Kafka's level first: none. kcoord finalizes share.version
# 2 and streams.version 1 as Kafka 4.4 does, since it serves both kinds of groups, and
# transaction.version 2 as a Kafka 4.4 cluster is formatted (its property, 2 by default).
FINALIZED_DIFFERENCES: dict[str, tuple[int | None, int | None]] = {}


def test_features_in_api_versions(pair: Pair) -> None:
    def features(t: Target) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]], dict[str, int]]:
        c = t.client()
        answers: list[ApiVersionsResponse] = [c.call(18, v, ApiVersionsRequest(
            client_software_name="differential", client_software_version="1")) for v in (3, 4)]
        v3, v4 = ({f.name: (f.min_version, f.max_version) for f in a.supported_features} for a in answers)
        finalized = {f.name: f.max_version_level for f in answers[1].finalized_features}
        assert all(f.min_version_level == f.max_version_level for f in answers[1].finalized_features)
        return v3, v4, finalized

    with pair.kafka.session():
        kafka_v3, kafka_v4, kafka_final = features(pair.kafka)
    with pair.kcoord.session():
        ours_v3, ours_v4, ours_final = features(pair.kcoord)
    # The same features, listed alike: below v4 only those whose minimum is not 0.
    assert set(ours_v4) == set(kafka_v4)
    assert set(ours_v3) == set(kafka_v3) == {"metadata.version"}
    for name, (low, high) in ours_v4.items():
        assert kafka_v4[name][0] <= low <= high <= kafka_v4[name][1], name
    differ = {n: (kafka_final.get(n), ours_final.get(n)) for n in set(kafka_final) | set(ours_final)
              if kafka_final.get(n) != ours_final.get(n)}
    assert differ == FINALIZED_DIFFERENCES


def test_describe_scram_credentials_of_users_that_do_not_exist(pair: Pair) -> None:
    """Each unknown user is answered RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE."""
    U = DescribeUserScramCredentialsRequest.UserName
    ghost, nobody = unique("ghost"), unique("nobody")

    def scenario(t: Target) -> object:
        c = t.client()
        answers = []
        for users in ([U(name=nobody), U(name=ghost)], [U(name=ghost), U(name=ghost)], [U(name="")], []):
            answer: DescribeUserScramCredentialsResponse = c.call(50, 0, DescribeUserScramCredentialsRequest(
                users=users))
            # Kafka answers users, and each user's mechanisms, in no particular order (hash maps); a
            # client finds each by name. (The session's brokers have SASL users: `[]` lists them.)
            answers.append((answer.error_code, sorted(
                (r.user, r.error_code, sorted(r.credential_infos, key=lambda i: i.mechanism))
                for r in answer.results)))
        return answers

    answers = pair.compare(scenario)
    assert answers[0][1][0][1] == RESOURCE_NOT_FOUND  # type: ignore[index]


def test_unregister_a_broker_id_nobody_has(pair: Pair) -> None:
    """Kafka's controller answers BROKER_ID_NOT_REGISTERED, and so does kcoord, message included.
    (Unregistering the live broker is not compared: it would take the shared Kafka out of its own
    cluster; kcoord refuses it, docs/limits.md.)"""

    def scenario(t: Target) -> object:
        c = t.client()
        answers = [c.call(64, 0, UnregisterBrokerRequest(broker_id=broker_id)) for broker_id in (4242, -1)]
        return {"answers": answers, "messages": [a.error_message for a in answers]}

    answers = pair.compare(scenario)
    assert [a["error_code"] for a in answers["answers"]] == [102, 102]  # type: ignore[index]
