"""What confluent-kafka's admin client relies on, as its own integration tests exercise it against
Kafka: a read pipelined behind DeleteRecords sees the new log start, SUBTRACT may leave
`cleanup.policy` empty, and describing SCRAM credentials without naming users lists them all."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from testkit.kcoord import BrokerProcess

pytestmark = [pytest.mark.timeout(90)]


def admin_for(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})


def test_list_offsets_sent_right_after_delete_records_sees_the_new_start(broker: BrokerProcess) -> None:
    admin, topic = admin_for(broker), f"dr-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    for i in range(5):
        producer.produce(topic, b"m%d" % i, partition=0)
    assert producer.flush(30) == 0
    earliest = {TopicPartition(topic, 0): OffsetSpec.earliest()}
    for cut in (2, 4):
        # Both requests leave before either answer comes back, on the same connection.
        deleted = admin.delete_records([TopicPartition(topic, 0, cut)])
        listed = admin.list_offsets(earliest)
        low = next(iter(deleted.values())).result(30).low_watermark
        assert low == cut == next(iter(listed.values())).result(30).offset


def test_subtract_may_leave_cleanup_policy_empty(broker: BrokerProcess) -> None:
    admin, topic = admin_for(broker), f"cp-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)])
    next(iter(admin.incremental_alter_configs([resource]).values())).result(30)
    described = next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values())).result(30)
    assert described["cleanup.policy"].value == ""


def test_describing_scram_credentials_without_users_lists_every_user(broker: BrokerProcess) -> None:
    admin = admin_for(broker)
    users = [f"u-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for f in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(u, info, b"secret-password") for u in users]).values():
        f.result(30)
    # No users named: the request carries none, and Kafka answers every user with credentials.
    found = admin.describe_user_scram_credentials().result(30)
    assert set(users) <= set(found)
    assert all(found[u].scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_256 for u in users)


def test_a_new_topic_shows_the_cluster_wide_min_insync_replicas(broker: BrokerProcess) -> None:
    # A Kafka 4 cluster is formatted with min.insync.replicas=1 as a cluster-wide dynamic default,
    # so it is not a default in any topic's description.
    admin, topic = admin_for(broker), f"mi-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    described = next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values())).result(30)
    entry = described["min.insync.replicas"]
    assert (entry.value, entry.is_default, entry.source) == ("1", False, 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
