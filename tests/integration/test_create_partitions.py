"""CreatePartitions against a real broker: Kafka's checks and error codes at every version, the new
partitions served by the data plane and kept across a restart, and a running classic group that
ends up consuming them when confluent-kafka's AdminClient grows its topic."""

from __future__ import annotations

import os
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.metadata import MetadataRequest
from tests.integration.helpers.clients import ThreadedConsumer, covers_exactly, create_topic, wait_for
from tests.integration.helpers.dataplane import create, fetch, list_offset, produce, records, values

pytestmark = pytest.mark.timeout(120)

CREATE_PARTITIONS = 37
Topic = CreatePartitionsRequest.Topic
Assignment = CreatePartitionsRequest.Topic.Assignment


def grow(c: WireClient, *topics: Topic, version: int = 3, validate_only: bool = False) -> dict[str, tuple[int, Any]]:
    body = CreatePartitionsRequest(topics=list(topics), timeout_ms=5000, validate_only=validate_only)
    return {r.name: (r.error_code, r.error_message) for r in c.call(CREATE_PARTITIONS, version, body).results}


def partition_count(c: WireClient, topic: str) -> int:
    body = MetadataRequest(topics=[MetadataRequest.Topic(name=topic)], allow_auto_topic_creation=False)
    (t,) = c.call(3, 12, body).topics
    assert t.error_code == 0
    return len(t.partitions)


def test_advertised_in_api_versions(client: WireClient) -> None:
    keys = {k.api_key: (k.min_version, k.max_version) for k in client.call(18, 3, ApiVersionsRequest(
        client_software_name="t", client_software_version="1")).api_keys}
    assert keys[CREATE_PARTITIONS] == (0, 3)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_grows_a_topic_and_metadata_shows_it_at_once(client: WireClient, version: int) -> None:
    create(client, "grown", 2)
    assert grow(client, Topic(name="grown", count=5, assignments=None), version=version) == {"grown": (0, None)}
    assert partition_count(client, "grown") == 5


def test_kafkas_checks_and_error_codes(client: WireClient) -> None:
    create(client, "t", 3)
    got = grow(
        client,
        Topic(name="missing", count=4, assignments=None),
        Topic(name="__consumer_offsets", count=60, assignments=None),
    )
    assert got["missing"][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert got["__consumer_offsets"][0] == ErrorCode.INVALID_TOPIC_EXCEPTION

    assert grow(client, Topic(name="t", count=3, assignments=None))["t"] == (
        ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    assert grow(client, Topic(name="t", count=2, assignments=None))["t"] == (
        ErrorCode.INVALID_PARTITIONS, "The topic t currently has 3 partition(s); 2 would not be an increase.")

    # Explicit assignments must name one replica on this broker (node 1) per new partition.
    for assignments in ([[1]], [[1], [2]], [[1], [1, 1]], [[1], []]):
        code, _ = grow(client, Topic(name="t", count=5,
                                     assignments=[Assignment(broker_ids=ids) for ids in assignments]))["t"]
        assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT, assignments
    assert partition_count(client, "t") == 3

    # Duplicates answer INVALID_REQUEST once, and are not applied; the other topics are.
    create(client, "u", 1)
    got = grow(client, Topic(name="t", count=4, assignments=None), Topic(name="t", count=4, assignments=None),
               Topic(name="u", count=2, assignments=[Assignment(broker_ids=[1])]))
    assert got == {"t": (ErrorCode.INVALID_REQUEST, "Duplicate topic name."), "u": (0, None)}
    assert (partition_count(client, "t"), partition_count(client, "u")) == (3, 2)


def test_validate_only_checks_without_growing(client: WireClient) -> None:
    create(client, "dry", 1)
    assert grow(client, Topic(name="dry", count=4, assignments=None), validate_only=True) == {"dry": (0, None)}
    assert grow(client, Topic(name="dry", count=1, assignments=None), validate_only=True)["dry"][0] == \
        ErrorCode.INVALID_PARTITIONS
    assert partition_count(client, "dry") == 1


def test_new_partitions_are_served_and_survive_a_restart(broker_factory: Any) -> None:
    broker = broker_factory()
    with WireClient("127.0.0.1", broker.port) as c:
        create(c, "wider", 1)
        assert produce(c, "wider", records(2), partition=1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert grow(c, Topic(name="wider", count=3, assignments=None)) == {"wider": (0, None)}
        for p in (1, 2):
            assert produce(c, "wider", records(p + 1), partition=p).error_code == 0
        assert values(fetch(c, "wider", 0, partition=2).responses[0].partitions[0].records) == [
            b"value-0", b"value-1", b"value-2"]
        assert list_offset(c, "wider", -1, partition=1).offset == 2
    assert broker.stop() == 0
    broker = broker_factory(data_dir=broker.data_dir)
    with WireClient("127.0.0.1", broker.port) as c:
        assert partition_count(c, "wider") == 3
        assert list_offset(c, "wider", -1, partition=2).offset == 3
        assert produce(c, "wider", records(1), partition=2).base_offset == 3


def test_a_running_classic_group_consumes_partitions_added_by_the_admin_client(broker: Any) -> None:
    topic, group = "orders", "billing"
    create_topic(broker.bootstrap, topic, 2)
    # librdkafka refreshes topic metadata every 5 minutes by default; the leader rejoins as soon
    # as a refresh shows more partitions, so a short interval keeps the test short.
    conf = {"topic.metadata.refresh.interval.ms": 500}
    consumers = [ThreadedConsumer(broker.bootstrap, group, [topic], **conf) for _ in range(2)]
    try:
        wait_for(lambda: covers_exactly(consumers, topic, 2), 30, "the group to share 2 partitions")

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(15)

        wait_for(lambda: covers_exactly(consumers, topic, 6), 40, "the group to share all 6 partitions")
        producer = Producer({"bootstrap.servers": broker.bootstrap, "topic.metadata.refresh.interval.ms": 500})
        for p in range(6):
            producer.produce(topic, value=b"to-%d" % p, partition=p)
        assert producer.flush(15) == 0

        def consumed() -> set[int]:
            return {p for c in consumers for (_t, p, _o, v) in list(c.messages) if v and v.startswith(b"to-")}

        wait_for(lambda: consumed() == set(range(6)), 30, "a message from every partition")
    finally:
        for c in consumers:
            c.close()


def test_a_topic_of_many_partitions_does_not_hold_up_other_clients(broker: Any) -> None:
    """Its logs open in the background: other clients are answered meanwhile (opened in one go,
    1,000 partitions held every connection for 4-10 s), a partition not opened yet is written on
    the spot, and a topic deleted while its logs open leaves none behind."""
    import threading
    import time

    from protocol.messages.delete_topics import DeleteTopicsRequest

    opened_when_answered: list[int] = []  # logs of "wide" open when each ping was answered
    slowest: list[float] = []
    done = threading.Event()

    def logs_open() -> int:
        return sum(1 for name in os.listdir(broker.data_dir) if name.startswith("wide-"))

    def ping() -> None:
        with WireClient("127.0.0.1", broker.port) as c:
            while not done.is_set():
                started = time.monotonic()
                c.call(18, 0, ApiVersionsRequest())
                slowest.append(time.monotonic() - started)
                opened_when_answered.append(logs_open())
                time.sleep(0.01)  # the scenario: a client asking all along, not flat out

    pinger = threading.Thread(target=ping)
    pinger.start()
    try:
        with WireClient("127.0.0.1", broker.port) as c:
            create(c, "wide", 1000)
            assert produce(c, "wide", records(1), partition=999).error_code == 0
            create(c, "short-lived", 1000)
            deleted = c.call(20, 4, DeleteTopicsRequest(topic_names=["short-lived"], timeout_ms=5000))
            assert deleted.responses[0].error_code == 0
            wait_for(lambda: logs_open() == 1000, 60, "every log of the topic to open")
    finally:
        done.set()
        pinger.join(10)
    # Another client was answered while the logs were opening, not only before and after.
    midway = [n for n in opened_when_answered if 1 < n < 1000]
    assert midway, (sorted(set(opened_when_answered))[:10], f"slowest ping {max(slowest):.2f} s")
    assert not [p for p in broker.data_dir.glob("short-lived-*") if not p.name.endswith("-delete")]
