"""Share groups under the ACL authorizer, with confluent's ShareConsumer over SASL_SSL: a user
with Read on a group and its topic consumes through a share group; on a group it may not read,
the heartbeat is refused with GROUP_AUTHORIZATION_FAILED and nothing is delivered."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.helpers.security import SecureBroker

pytestmark = pytest.mark.timeout(120)
SUFFIX = uuid.uuid4().hex[:6]
TOPIC = f"queue-{SUFFIX}"
ALLOWED = f"share-a-{SUFFIX}"
DENIED = f"share-b-{SUFFIX}"
SECURE_OVERRIDES = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                    "super.users": "User:admin", "group.share.heartbeat.interval.ms": "500",
                    "group.share.min.heartbeat.interval.ms": "500"}


def prepare_secure(broker: SecureBroker) -> None:
    admin = AdminClient(broker.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    bindings = [AclBinding(resource, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                           AclPermissionType.ALLOW)
                for resource, name in ((ResourceType.GROUP, ALLOWED), (ResourceType.TOPIC, TOPIC))]
    # Describe (not Read) on the other group: FindCoordinator answers, ShareGroupHeartbeat refuses.
    bindings.append(AclBinding(ResourceType.GROUP, DENIED, ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.DESCRIBE, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(10)


def share_consumer(secure: SecureBroker, group: str) -> ShareConsumer:
    c = ShareConsumer({**secure.confluent_conf("SASL_SSL", "PLAIN", user="alice"), "group.id": group})
    c.subscribe([TOPIC])
    return c


def denied_poll(c: ShareConsumer, errors: list[int], timeout: float) -> None:
    """Polls the denied consumer: librdkafka raises the group's authorization error or returns
    it as a message."""
    try:
        for m in c.poll(timeout):
            if m.error() is None:
                raise AssertionError("a denied share group was delivered a record")
            errors.append(m.error().code())
    except KafkaException as exc:
        errors.append(exc.args[0].code())


def test_read_on_the_group_and_topic_is_needed(secure: SecureBroker) -> None:
    allowed, denied = share_consumer(secure, ALLOWED), share_consumer(secure, DENIED)
    try:
        errors: list[int] = []
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            allowed.poll(0.2)
            denied_poll(denied, errors, 0.2)
        producer = Producer(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
        for i in range(3):
            producer.produce(TOPIC, f"m{i}".encode())
        assert producer.flush(15) == 0
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 3 and time.monotonic() < deadline:
            got += [m.value() for m in allowed.poll(0.3) if m.error() is None]
            denied_poll(denied, errors, 0.1)
        allowed.commit_sync()
        assert sorted(got) == [b"m0", b"m1", b"m2"]
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    finally:
        allowed.close()
        denied.close()
