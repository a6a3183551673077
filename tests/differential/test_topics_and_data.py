"""Topics and the data plane (Metadata, CreateTopics, CreatePartitions, DeleteTopics, Produce,
Fetch, ListOffsets) against Apache Kafka and kcoord: answers compared field by field, records
compared decoded (offsets, timestamps, keys, values, batch attributes)."""

from __future__ import annotations

import pytest

from kclient.wire_client import WireClient
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import ProduceRequest
from tests.differential.data_ops import Topic, fetch, produce
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import batch, create_topic, wait_topic

pytestmark = pytest.mark.differential

Config = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig








def metadata(c: WireClient, topics: list[str] | None, version: int = 12, auto_create: bool = False) -> object:
    return c.call(3, version, MetadataRequest(
        topics=None if topics is None else [MetadataRequest.Topic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create))


def test_metadata_of_a_topic(pair: Pair) -> None:
    topic, missing = unique("meta"), unique("meta-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 3)
        return [metadata(c, [topic, missing]), metadata(c, [topic], 4), metadata(c, [topic], 9),
                metadata(c, ["bad name!"]), metadata(c, [])]

    answers = pair.compare(scenario)
    assert answers[0]["topics"][1]["error_code"] == 3  # type: ignore[index]


def test_create_topics_validation(pair: Pair) -> None:
    existing, fresh = unique("create-existing"), unique("create-fresh")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, existing, 1)
        answer = c.call(19, 7, CreateTopicsRequest(timeout_ms=30000, topics=[
            Topic(name=existing, num_partitions=1, replication_factor=1),
            Topic(name="bad name!", num_partitions=1, replication_factor=1),
            Topic(name="..", num_partitions=1, replication_factor=1),
            Topic(name="x" * 250, num_partitions=1, replication_factor=1),
            Topic(name=fresh + "-zero", num_partitions=0, replication_factor=1),
            Topic(name=fresh + "-negative", num_partitions=-5, replication_factor=1),
            Topic(name=fresh + "-rf", num_partitions=1, replication_factor=2),
            Topic(name=fresh + "-rf0", num_partitions=1, replication_factor=0),
            Topic(name=fresh + "-config", num_partitions=1, replication_factor=1,
                  configs=[Config(name="no.such.config", value="1")]),
            Topic(name=fresh + "-value", num_partitions=1, replication_factor=1,
                  configs=[Config(name="cleanup.policy", value="bogus")]),
            Topic(name=fresh + "-retention", num_partitions=1, replication_factor=1,
                  configs=[Config(name="retention.ms", value="soon")]),
        ]))
        return answer

    answers = pair.compare(scenario, extra_dropped=frozenset({"configs"}))
    assert answers["topics"][0]["error_code"] == 36  # type: ignore[index]


def test_create_topics_validate_only_and_defaults(pair: Pair) -> None:
    name = unique("validate")

    def scenario(t: Target) -> object:
        c = t.client()
        checked = c.call(19, 7, CreateTopicsRequest(timeout_ms=30000, validate_only=True, topics=[
            Topic(name=name, num_partitions=4, replication_factor=1)]))
        after = metadata(c, [name])
        created = c.call(19, 7, CreateTopicsRequest(timeout_ms=30000, topics=[
            Topic(name=name, num_partitions=-1, replication_factor=-1)]))
        wait_topic(c, name, 1)
        return [checked, after, created, c.call(19, 4, CreateTopicsRequest(timeout_ms=30000, topics=[
            Topic(name=name, num_partitions=1, replication_factor=1)]))]

    answers = pair.compare(scenario, extra_dropped=frozenset({"configs"}))
    assert answers[0]["topics"][0]["num_partitions"] == 4  # type: ignore[index]


def test_create_partitions(pair: Pair) -> None:
    topic, missing = unique("grow"), unique("grow-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)

        def grow(count: int, name: str = topic, validate_only: bool = False) -> object:
            return c.call(37, 3, CreatePartitionsRequest(timeout_ms=30000, validate_only=validate_only, topics=[
                CreatePartitionsRequest.Topic(name=name, count=count, assignments=None)]))

        out = [grow(3, validate_only=True), grow(3)]
        wait_topic(c, topic, 3)
        out += [grow(2), grow(3), grow(4, missing), metadata(c, [topic])]
        return out

    pair.compare(scenario)


def test_delete_topics(pair: Pair) -> None:
    topic, missing = unique("delete-topic"), unique("delete-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        deleted = c.call(20, 6, DeleteTopicsRequest(timeout_ms=30000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name=topic), DeleteTopicsRequest.DeleteTopicState(name=missing)]))
        old = c.call(20, 4, DeleteTopicsRequest(timeout_ms=30000, topic_names=[missing]))
        # Kafka answers the topics it refuses up front before those its controller deleted.
        deleted.responses.sort(key=lambda r: r.name != topic)
        return [deleted, old, metadata(c, [topic])]

    answers = pair.compare(scenario)
    assert [r["error_code"] for r in answers[0]["responses"]] == [0, 3]  # type: ignore[index]


@pytest.mark.parametrize(("acks", "version"), [(1, 9), (-1, 9), (-1, 3), (1, 7)])
def test_produce_and_fetch(pair: Pair, acks: int, version: int) -> None:
    topic = unique("produce")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        first = produce(c, topic, 0, batch(b"a", b"b", b"c", key=b"k"), acks=acks, version=version)
        second = produce(c, topic, 0, batch(b"d", timestamp=1_700_000_001_000), acks=acks, version=version)
        other = produce(c, topic, 1, batch(b"e"), acks=acks, version=version)
        return [first, second, other, fetch(c, topic, [0, 1]), fetch(c, topic, [0], 2),
                fetch(c, topic, [0], 4, version=4), fetch(c, topic, [0], 99)]

    pair.compare(scenario)


def test_produce_errors(pair: Pair) -> None:
    topic, missing = unique("produce-errors"), unique("produce-missing")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 1)
        return [
            produce(c, topic, 5, batch(b"x")),
            produce(c, missing, 0, batch(b"x")),
            produce(c, topic, 0, batch(b"x" * 1_100_000)),
            produce(c, topic, 0, batch(b"y"), acks=2),
            fetch(c, topic, [0, 5]),
        ]

    pair.compare(scenario)


def test_list_offsets(pair: Pair) -> None:
    topic = unique("offsets-list")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic, 2)
        produce(c, topic, 0, batch(b"a", b"b", b"c", timestamp=1_000_000, step=10))
        produce(c, topic, 0, batch(b"d", b"e", timestamp=1_000_005, step=100))

        def offsets(version: int, *timestamps: int, partition: int = 0) -> object:
            return c.call(2, version, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.Topic(
                name=topic, partitions=[ListOffsetsRequest.Topic.Partition(partition_index=partition, timestamp=ts)
                                        for ts in timestamps])]))

        return [offsets(7, -2), offsets(7, -1), offsets(7, -3), offsets(7, 1_000_000), offsets(7, 1_000_011),
                offsets(7, 1_000_105), offsets(7, 9_000_000), offsets(1, -1), offsets(5, 1_000_020),
                offsets(7, -1, partition=1), offsets(7, -3, partition=1), offsets(7, -1, partition=9)]

    pair.compare(scenario)


def test_authorized_operations_without_an_authorizer(pair: Pair) -> None:
    topic = unique("ops-topic")

    def scenario(t: Target) -> object:
        from protocol.messages.describe_cluster import DescribeClusterRequest

        c = t.client()
        create_topic(c, topic, 1)
        return [c.call(3, 10, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                              allow_auto_topic_creation=False,
                                              include_cluster_authorized_operations=True,
                                              include_topic_authorized_operations=True)),
                c.call(3, 12, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                              include_topic_authorized_operations=True)),
                c.call(60, 1, DescribeClusterRequest(include_cluster_authorized_operations=True)),
                c.call(60, 0, DescribeClusterRequest())]

    pair.compare(scenario)


def test_produce_without_acknowledgement(pair: Pair) -> None:
    topic = unique("acks0")

    def scenario(t: Target) -> object:

        c = t.client()
        create_topic(c, topic, 1)
        # acks=0: no answer comes; the next request on the connection is answered first.
        c.send(0, 9, ProduceRequest(acks=0, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                index=0, records=batch(b"fire", b"forget"))])]))
        # The append is asynchronous: wait for it (setup), then compare what is read.
        return retry(lambda: fetch(c, topic, [0]),
                     lambda answer: bool(answer["responses"][0]["partitions"][0]["records"]))  # type: ignore[index]

    answers = pair.compare(scenario)
    assert answers["responses"][0]["partitions"][0]["high_watermark"] == 2  # type: ignore[index]


def test_idempotent_producer_and_compacted_topic_errors(pair: Pair) -> None:
    topic, compacted = unique("idempotent"), unique("compacted")

    def scenario(t: Target) -> object:
        from protocol.messages.init_producer_id import InitProducerIdRequest

        c = t.client()
        create_topic(c, topic, 1)
        made = c.call(19, 7, CreateTopicsRequest(timeout_ms=30000, topics=[
            Topic(name=compacted, num_partitions=1, replication_factor=1,
                  configs=[Config(name="cleanup.policy", value="compact")])]))
        wait_topic(c, compacted, 1)
        ids = c.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))

        def send(sequence: int, *values: bytes, epoch: int | None = None, pid: int | None = None) -> object:
            return produce(c, topic, 0, batch(*values, producer_id=ids.producer_id if pid is None else pid,
                                              producer_epoch=ids.producer_epoch if epoch is None else epoch,
                                              base_sequence=sequence))

        return {"made": made, "ids": ids, "first": send(0, b"a", b"b"), "duplicate": send(0, b"a", b"b"),
                "gap": send(5, b"c"), "next": send(2, b"c"), "old_epoch": send(3, b"d", epoch=ids.producer_epoch - 1)
                if ids.producer_epoch > 0 else None,
                "fetched": fetch(c, topic, [0]),
                "no_key": produce(c, compacted, 0, batch(b"keyless")),
                "keyed": produce(c, compacted, 0, batch(b"v", key=b"k"))}

    pair.compare(scenario, extra_dropped=frozenset({"configs"}))
