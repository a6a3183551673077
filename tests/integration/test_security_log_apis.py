"""The ACLs of the records and log-directory APIs, on the wire, as Kafka checks them: Delete on the
topic for DeleteRecords, Describe on the topic (or ClusterAction) for OffsetForLeaderEpoch, Read on
the topic for DescribeProducers, Describe and Alter on the cluster for DescribeLogDirs and
AlterReplicaLogDirs. A denied DeleteRecords moves nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from protocol.messages import ApiKey
from protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from protocol.messages.delete_records import DeleteRecordsRequest
from protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from protocol.messages.describe_producers import DescribeProducersRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from tests.integration.helpers.security import SecureBroker, _sasl_wire_client

pytestmark = pytest.mark.timeout(90)
SUFFIX = uuid.uuid4().hex[:6]
READABLE = f"readable-{SUFFIX}"  # alice may read (so describe) it
DELETABLE = f"deletable-{SUFFIX}"  # alice may delete its records
HIDDEN = f"hidden-{SUFFIX}"  # alice may do nothing with it
TOPIC_DENIED, CLUSTER_DENIED = 29, 31

SECURE_OVERRIDES = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                    "super.users": "User:admin"}


def prepare_secure(broker: SecureBroker) -> None:
    conf = broker.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin")
    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (READABLE, DELETABLE, HIDDEN)]).values():
        future.result(15)
    producer = Producer(conf)
    for topic in (READABLE, DELETABLE, HIDDEN):
        for i in range(5):
            producer.produce(topic, f"m{i}".encode())
    assert producer.flush(15) == 0
    allow = [(READABLE, AclOperation.READ), (DELETABLE, AclOperation.DELETE)]
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:alice",
                                                "*", op, AclPermissionType.ALLOW) for name, op in allow]).values():
        future.result(10)


def _delete(c: Any, topic: str, offset: int) -> tuple[int, int]:
    answer = c.call(ApiKey.DeleteRecords, 2, DeleteRecordsRequest(timeout_ms=10000, topics=[
        DeleteRecordsRequest.Topic(name=topic, partitions=[
            DeleteRecordsRequest.Topic.Partition(partition_index=0, offset=offset)])]))
    (p,) = answer.topics[0].partitions
    return p.error_code, p.low_watermark


def _earliest(c: Any, topic: str) -> int:
    answer = c.call(ApiKey.ListOffsets, 7, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.Topic(
        name=topic, partitions=[ListOffsetsRequest.Topic.Partition(partition_index=0, timestamp=-2)])]))
    return int(answer.topics[0].partitions[0].offset)


def test_each_api_checks_what_kafka_checks(secure: SecureBroker) -> None:
    alice, admin = _sasl_wire_client(secure, "alice"), _sasl_wire_client(secure, "admin")
    try:
        assert _delete(alice, HIDDEN, 2) == (TOPIC_DENIED, -1)
        assert _delete(alice, READABLE, 2) == (TOPIC_DENIED, -1)
        assert _earliest(admin, READABLE) == 0 and _earliest(admin, HIDDEN) == 0  # nothing moved
        assert _delete(alice, DELETABLE, 2) == (0, 2)
        both = alice.call(ApiKey.DeleteRecords, 2, DeleteRecordsRequest(timeout_ms=10000, topics=[
            DeleteRecordsRequest.Topic(name=t, partitions=[DeleteRecordsRequest.Topic.Partition(
                partition_index=0, offset=3)]) for t in (HIDDEN, DELETABLE)]))
        assert {t.name: (t.partitions[0].error_code, t.partitions[0].low_watermark) for t in both.topics} == {
            HIDDEN: (TOPIC_DENIED, -1), DELETABLE: (0, 3)}

        L = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        epochs = alice.call(ApiKey.OffsetForLeaderEpoch, 4, OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            L(topic=t, partitions=[L.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])
            for t in (READABLE, HIDDEN)]))
        assert {t.topic: (t.partitions[0].error_code, t.partitions[0].end_offset) for t in epochs.topics} == {
            READABLE: (0, 5), HIDDEN: (TOPIC_DENIED, -1)}

        T = DescribeProducersRequest.TopicRequest
        producers = alice.call(ApiKey.DescribeProducers, 0, DescribeProducersRequest(topics=[
            T(name=READABLE, partition_indexes=[0]), T(name=HIDDEN, partition_indexes=[0])]))
        assert {t.name: t.partitions[0].error_code for t in producers.topics} == {READABLE: 0, HIDDEN: TOPIC_DENIED}

        refused = alice.call(ApiKey.DescribeLogDirs, 4, DescribeLogDirsRequest(topics=None))
        assert (refused.error_code, refused.results) == (CLUSTER_DENIED, [])
        described = admin.call(ApiKey.DescribeLogDirs, 4, DescribeLogDirsRequest(topics=None))
        assert described.error_code == 0
        assert {t.name for t in described.results[0].topics} >= {READABLE, DELETABLE, HIDDEN}

        D = AlterReplicaLogDirsRequest.AlterReplicaLogDir
        moved = alice.call(ApiKey.AlterReplicaLogDirs, 2, AlterReplicaLogDirsRequest(dirs=[D(
            path=described.results[0].log_dir, topics=[D.AlterReplicaLogDirTopic(name=READABLE, partitions=[0])])]))
        assert moved.results[0].partitions[0].error_code == CLUSTER_DENIED
    finally:
        alice.close()
        admin.close()
