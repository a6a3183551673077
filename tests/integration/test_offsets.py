"""Committed offsets through real clients: commit, fetch, alter, delete, and Kafka's per-partition errors."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from tests.integration.helpers.clients import ThreadedConsumer, covers_exactly, create_topic, wait_for

pytestmark = pytest.mark.timeout(120)


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})


def test_commit_sync_async_with_metadata_and_read_back_from_a_fresh_consumer(broker) -> None:
    create_topic(broker.bootstrap, "orders", 3)
    c = _consumer(broker.bootstrap, "billing")
    c.commit(offsets=[TopicPartition("orders", 0, 100, metadata="batch-7")], asynchronous=False)
    c.commit(offsets=[TopicPartition("orders", 1, 5)], asynchronous=True)
    c.commit(offsets=[TopicPartition("orders", 0, 120, metadata="batch-8")], asynchronous=False)
    c.close()

    fresh = _consumer(broker.bootstrap, "billing")
    got = fresh.committed([TopicPartition("orders", p) for p in range(3)], timeout=10)
    fresh.close()
    assert [(tp.partition, tp.offset) for tp in got] == [(0, 120), (1, 5), (2, -1001)]
    assert got[0].metadata == "batch-8"


def test_member_commits_and_admin_views(broker) -> None:
    create_topic(broker.bootstrap, "clicks", 4)
    members = [ThreadedConsumer(broker.bootstrap, "analytics", ["clicks"]) for _ in range(2)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        wait_for(lambda: covers_exactly(members, "clicks", 4), 30, "assignment")
        for m in members:
            m.commit([TopicPartition(t, p, 1000 + p) for t, p in sorted(m.held())])

        def committed() -> dict[tuple[str, int], int]:
            listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("analytics")])
            return {(tp.topic, tp.partition): tp.offset for tp in listed["analytics"].result(10).topic_partitions}

        wait_for(lambda: committed() == {("clicks", p): 1000 + p for p in range(4)}, 20, "member commits")
        # An admin may not move the offsets of a group that has members (Kafka: UNKNOWN_MEMBER_ID).
        try:
            result = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                "analytics", [TopicPartition("clicks", 0, 1)])])["analytics"].result(10)
            refused = [tp.error for tp in result.topic_partitions]
        except Exception as exc:  # some client versions raise the partition error
            refused = [exc]
        assert refused and all(e is not None and "UNKNOWN_MEMBER_ID" in str(e) for e in refused), refused
        assert committed()[("clicks", 0)] == 1000
    finally:
        for m in members:
            m.close()

    # Once the group is empty an admin may rewind it.
    wait_for(lambda: not admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("analytics")])["analytics"].exception(), 10, "group readable")
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "analytics", [TopicPartition("clicks", 0, 1)])])["analytics"].result(10)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("analytics")])
    offsets = {tp.partition: tp.offset for tp in listed["analytics"].result(10).topic_partitions}
    assert offsets[0] == 1 and offsets[3] == 1003
    admin.delete_consumer_groups(["analytics"])["analytics"].result(10)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("analytics")])
    assert listed["analytics"].result(10).topic_partitions == []


def test_assign_only_consumer_commits_without_membership(broker) -> None:
    create_topic(broker.bootstrap, "manual", 2)
    c = _consumer(broker.bootstrap, "manual-group")
    c.assign([TopicPartition("manual", 0), TopicPartition("manual", 1)])
    c.commit(offsets=[TopicPartition("manual", 1, 77)], asynchronous=False)
    assert c.committed([TopicPartition("manual", 1)], timeout=10)[0].offset == 77
    c.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    group = admin.describe_consumer_groups(["manual-group"])["manual-group"].result(10)
    assert group.members == [] and str(group.state).endswith("EMPTY")


def test_kafka_python_lists_and_deletes_offsets(broker) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.structs import TopicPartition as KTP

    create_topic(broker.bootstrap, "kp", 2)
    c = _consumer(broker.bootstrap, "kp-group")
    c.commit(offsets=[TopicPartition("kp", 0, 10), TopicPartition("kp", 1, 20)], asynchronous=False)
    c.close()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets("kp-group")["kp-group"]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 10, 1: 20}
        result = admin.delete_group_offsets("kp-group", [KTP("kp", 0)])
        assert all(err is None or getattr(err, "errno", 0) == 0 for err in _flatten(result))
        offsets = admin.list_group_offsets("kp-group")["kp-group"]
        assert {tp.partition for tp in offsets} == {1}
    finally:
        admin.close()


def _flatten(result: object) -> list[object]:
    if isinstance(result, dict):
        return [e for v in result.values() for e in _flatten(v)]
    return [result]


def test_aiokafka_commit_and_committed(broker) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    create_topic(broker.bootstrap, "aio", 1)

    async def run() -> int | None:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="aio-group",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([ATP("aio", 0)])
            await consumer.commit({ATP("aio", 0): 33})
            return await consumer.committed(ATP("aio", 0))
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == 33


def test_bad_commits_get_per_partition_errors_and_disturb_nothing(broker) -> None:
    create_topic(broker.bootstrap, "guarded", 2)
    P = OffsetCommitRequest.Topic.Partition
    with WireClient("127.0.0.1", broker.port) as c:
        resp = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
            group_id="guard", generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.Topic(name="guarded", partitions=[
                    P(partition_index=0, committed_offset=5, committed_metadata="ok"),
                    P(partition_index=7, committed_offset=5, committed_metadata=""),
                    P(partition_index=1, committed_offset=6, committed_metadata="x" * (1024 * 1024)),
                ]),
                OffsetCommitRequest.Topic(name="no-such-topic", partitions=[P(partition_index=0, committed_offset=1)]),
            ]))
        errors = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
        assert errors == {
            ("guarded", 0): ErrorCode.NONE,
            ("guarded", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("guarded", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
            ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        many = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
            group_id="guard", generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.Topic(name="guarded", partitions=[
                    P(partition_index=i % 2 if i < 2 else i, committed_offset=i) for i in range(10_000)])]))
        codes = [p.error_code for p in many.topics[0].partitions]
        assert len(codes) == 10_000
        assert codes[:2] == [0, 0] and set(codes[2:]) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

        fetched = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id="guard", topics=None))
        stored = {(t.name, p.partition_index): (p.committed_offset, p.metadata)
                  for t in fetched.topics for p in t.partitions}
        assert stored == {("guarded", 0): (0, ""), ("guarded", 1): (1, "")}
