"""ShareFetch and ShareAcknowledge over the wire as Kafka 4.4 answers librdkafka's share consumer:
the acknowledgements a member sends when it closes, after its leave heartbeat, still count; a
batch-optimized fetch acquires whole batches past MaxRecords, a record-limit one (v2) stops at it;
and a topic just deleted is not auto-created again by a racing Metadata request."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest
from protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from protocol.messages.share_fetch import ShareFetchRequest
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import set_group_configs
from tests.integration.helpers.cluster import wait_for

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    NewTopic,
)

ACCEPT = 1
_Topic = ShareFetchRequest.FetchTopic
_Ack = ShareAcknowledgeRequest.AcknowledgeTopic


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(Path(tmp_path_factory.mktemp("share-fetch")), {"auto.create.topics.enable": "true"})
    b.start_loaded()
    yield b
    b.kill()


def topic_with_records(broker: BrokerProcess, count: int) -> tuple[str, str, bytes]:
    """A new topic holding ``count`` records in one batch, and a group that reads it from the start."""
    bootstrap = f"127.0.0.1:{broker.port}"
    name, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 500})
    for i in range(count):
        p.produce(name, value=f"m{i}".encode())
    p.flush(10)
    with WireClient("127.0.0.1", broker.port) as c:
        meta = c.call(3, 12, MetadataRequest(topics=[MetadataRequest.Topic(name=name)],
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
    return name, group, meta.topics[0].topic_id


def fetch(c: WireClient, group: str, member: str, topic_id: bytes, epoch: int, max_records: int,
          version: int = 1, mode: int = 0) -> Any:
    return c.call(78, version, ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=0, min_bytes=0,
        max_bytes=1 << 20, max_records=max_records, batch_size=max_records, share_acquire_mode=mode,
        topics=[_Topic(topic_id=topic_id, partitions=[_Topic.FetchPartition(partition_index=0,
                                                                            acknowledgement_batches=[])])],
        forgotten_topics_data=[]))


def acquired(answer: Any) -> list[tuple[int, int]]:
    return [(a.first_offset, a.last_offset) for t in answer.responses for p in t.partitions
            for a in p.acquired_records]


def test_acknowledgements_sent_after_the_leave_heartbeat_count(broker: BrokerProcess) -> None:
    """A closing consumer leaves the group and then sends its last acknowledgements with the
    session's close (epoch -1): they are applied, and nothing is delivered again."""
    _name, group, topic_id = topic_with_records(broker, 3)
    with WireClient("127.0.0.1", broker.port) as c:
        joined = c.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id="m1-" + "x" * 19,
                                                          member_epoch=0, subscribed_topic_names=[_name]))
        assert joined.error_code == 0
        member = joined.member_id
        assert acquired(fetch(c, group, member, topic_id, 0, 10)) == [(0, 2)]
        left = c.call(76, 1, ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1))
        assert left.error_code == 0
        closed = c.call(79, 1, ShareAcknowledgeRequest(
            group_id=group, member_id=member, share_session_epoch=-1,
            topics=[_Ack(topic_id=topic_id, partitions=[_Ack.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[_Ack.AcknowledgePartition.AcknowledgementBatch(
                    first_offset=0, last_offset=2, acknowledge_types=[ACCEPT])])])]))
        assert closed.error_code == 0
        assert [p.error_code for t in closed.responses for p in t.partitions] == [0]
        assert acquired(fetch(c, group, "m2-" + "y" * 19, topic_id, 0, 10)) == []


def test_batch_optimized_fetch_takes_whole_batches_record_limit_does_not(broker: BrokerProcess) -> None:
    _name, group, topic_id = topic_with_records(broker, 20)
    with WireClient("127.0.0.1", broker.port) as c:
        # Record-limit mode (ShareFetch v2): exactly MaxRecords.
        assert acquired(fetch(c, group, "a", topic_id, 0, 5, version=2, mode=1)) == [(0, 4)]
        # Batch-optimized (the default, and v1): the rest of the batch begun, past MaxRecords.
        assert acquired(fetch(c, group, "b", topic_id, 0, 5)) == [(5, 19)]


def test_a_topic_just_deleted_is_not_auto_created_again_at_once(broker: BrokerProcess) -> None:
    name, _group, _topic_id = topic_with_records(broker, 1)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    ask = MetadataRequest(topics=[MetadataRequest.Topic(name=name)], allow_auto_topic_creation=True,
                          include_topic_authorized_operations=False)
    # Connected before the deletion: the Metadata request follows its answer at once.
    with WireClient("127.0.0.1", broker.port) as c:
        admin.delete_topics([name])[name].result(15)
        assert c.call(3, 12, ask).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # The admin that deleted it may create it again (and a later auto-creation would).
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
        assert c.call(3, 12, ask).topics[0].error_code == 0
        admin.delete_topics([name])[name].result(15)
        # Past the moment's grace (a quarter second), a Metadata request auto-creates it again,
        # as Kafka would; within it, each asks in vain (and creates nothing).
        codes: list[int] = []

        def created() -> bool:
            codes.append(c.call(3, 12, ask).topics[0].error_code)
            return codes[-1] == 0

        wait_for(created, 30, "the topic auto-created again", seen=lambda: codes[-5:])


def test_a_closed_connection_ends_its_share_sessions(broker: BrokerProcess) -> None:
    """The records a member holds come back as soon as the connection that opened its share
    session closes (a consumer that dies), not after their 30 s locks, as in Kafka 4.4."""
    _name, group, topic_id = topic_with_records(broker, 3)
    with WireClient("127.0.0.1", broker.port) as first:
        assert acquired(fetch(first, group, "dies", topic_id, 0, 10)) == [(0, 2)]
    with WireClient("127.0.0.1", broker.port) as second:
        answers: list[Any] = []

        def released() -> bool:
            """A new session (epoch 0) acquires the records; closed again (epoch -1) if it got none."""
            answers.append(fetch(second, group, "lives", topic_id, 0, 10))
            if acquired(answers[-1]):
                return True
            fetch(second, group, "lives", topic_id, -1, 10)
            return False

        wait_for(released, 30, "the closed connection's records released", step=0.1,
                 seen=lambda: answers[-1] if answers else None)
        got = answers[-1]
        assert acquired(got) == [(0, 2)]
        assert [a.delivery_count for t in got.responses for p in t.partitions for a in p.acquired_records] == [2]


def test_share_fetch_counts_against_the_consumer_byte_rate(broker: BrokerProcess) -> None:
    """A client over its consumer_byte_rate is told to wait (throttle_time_ms) and answered with
    no records, as Kafka answers a throttled ShareFetch."""
    from protocol.messages.alter_client_quotas import AlterClientQuotasRequest

    _name, group, topic_id = topic_with_records(broker, 200)
    client_id = f"slow-{uuid.uuid4().hex[:6]}"
    entry = AlterClientQuotasRequest.EntryData
    with WireClient("127.0.0.1", broker.port) as admin:
        answer = admin.call(49, 1, AlterClientQuotasRequest(validate_only=False, entries=[entry(
            entity=[entry.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[entry.OpData(key="consumer_byte_rate", value=100.0, remove=False)])]))
        assert [e.error_code for e in answer.entries] == [0]
    with WireClient("127.0.0.1", broker.port, client_id=client_id) as c:
        first = fetch(c, group, "m", topic_id, 0, 500)
        answers = [first]
        if first.throttle_time_ms == 0:
            # Let through under its cap (the quota's window had room): the next one is over.
            answers.append(fetch(c, group, "m", topic_id, 1, 500))
        throttled = [a for a in answers if a.throttle_time_ms > 0]
        assert throttled and acquired(throttled[0]) == []
