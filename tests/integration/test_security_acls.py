"""The ACL authorizer with real clients: a user allowed on group `a` can do nothing with group `b`,
prefixed ACLs work, a client certificate's subject is the principal ACLs name, ACLs are managed
with the admin API and survive a restart, and nothing a denied request carries reaches the log."""

from __future__ import annotations

import itertools
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from cryptography import x509

from protocol.partitioning import partition_for
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.security import SecureBroker, _sasl_wire_client

pytestmark = pytest.mark.timeout(90)
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUFFIX = uuid.uuid4().hex[:6]
TOPIC = f"orders-{SUFFIX}"
GROUP_A = f"a-{SUFFIX}"
GROUP_B = f"b-secret-{SUFFIX}"
# librdkafka holds a commit for a group whose coordinator it cannot look up (FindCoordinator is
# denied) for up to the session timeout before failing it with _WAIT_COORD: 45 s by default.
DENIED_GROUP_CONF = {"session.timeout.ms": 6000}


def _acl(resource: ResourceType, name: str, principal: str, operation: AclOperation,
         pattern: ResourcePatternType = ResourcePatternType.LITERAL,
         permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def _client_principal(secure: SecureBroker) -> str:
    cert = x509.load_pem_x509_certificate(secure.pki.client_cert.read_bytes())
    return "User:" + cert.subject.rfc4514_string()


SECURE_OVERRIDES = {
    "authorizer.class.name": AUTHORIZER, "super.users": "User:admin"}


def prepare_secure(broker: SecureBroker) -> None:
    """Once the module's broker serves: what every test of the module expects to find on it."""
    admin = AdminClient(broker.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    producer = Producer(broker.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    for i in range(3):
        producer.produce(TOPIC, f"m{i}".encode())
    assert producer.flush(15) == 0
    for group in (GROUP_A, GROUP_B):  # both groups exist, with a commit each, made by the admin
        admin_consumer = Consumer({**broker.confluent_conf("SASL_SSL", "PLAIN", user="admin"), "group.id": group})
        _commit_once_the_coordinator_is_known(admin_consumer, [TopicPartition(TOPIC, 0, 1)])
        admin_consumer.close()
    bindings = [
        _acl(ResourceType.GROUP, GROUP_A, "User:alice", AclOperation.READ),
        _acl(ResourceType.GROUP, f"team-{SUFFIX}-", "User:alice", AclOperation.ALL, ResourcePatternType.PREFIXED),
        _acl(ResourceType.TOPIC, "orders-", "User:alice", AclOperation.READ, ResourcePatternType.PREFIXED),
        _acl(ResourceType.GROUP, f"mtls-{SUFFIX}", _client_principal(broker), AclOperation.READ),
        _acl(ResourceType.TOPIC, TOPIC, _client_principal(broker), AclOperation.READ),
    ]
    for future in admin.create_acls(bindings).values():
        future.result(10)


def _commit_once_the_coordinator_is_known(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    def committed() -> bool:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return True
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._WAIT_COORD:
                raise
            return False

    wait_for(committed, 60, "the group's coordinator to be known", step=0.1)


def _alice(secure: SecureBroker, group: str, **extra: Any) -> Consumer:
    return Consumer({**secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="alice"), "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})


def _consume_and_commit(consumer: Consumer, count: int) -> list[bytes]:
    consumer.subscribe([TOPIC])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.commit(asynchronous=False)
    return got


def test_user_allowed_on_group_a_joins_commits_and_fetches(secure: SecureBroker) -> None:
    consumer = _alice(secure, GROUP_A)
    try:
        assert _consume_and_commit(consumer, 2) == [b"m1", b"m2"]  # from the admin's commit at 1
        assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 3
    finally:
        consumer.close()


def test_user_allowed_on_group_a_can_do_nothing_with_group_b(secure: SecureBroker) -> None:
    """As a librdkafka application sees it: FindCoordinator is refused already, so commits and
    fetches fail, the group error arrives through poll, and the admin API's describe and delete
    fail with GROUP_AUTHORIZATION_FAILED; listing does not show the group."""
    errors: list[KafkaError] = []
    consumer = _alice(secure, GROUP_B, error_cb=errors.append, **DENIED_GROUP_CONF)
    try:
        with pytest.raises(KafkaException):
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 2)], asynchronous=False)
        with pytest.raises(KafkaException):
            consumer.committed([TopicPartition(TOPIC, 0)], timeout=5)
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        seen: list[int] = []
        while time.monotonic() < deadline and KafkaError.GROUP_AUTHORIZATION_FAILED not in seen:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is not None:
                seen.append(msg.error().code())
            seen += [e.code() for e in errors]
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in seen
    finally:
        consumer.close()
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="alice"))
    with pytest.raises(KafkaException) as describe:
        admin.describe_consumer_groups([GROUP_B])[GROUP_B].result(10)
    assert describe.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as delete:
        admin.delete_consumer_groups([GROUP_B])[GROUP_B].result(10)
    assert delete.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    listed = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    assert GROUP_A in listed and GROUP_B not in listed
    _admin_sees_only_its_commit(secure)


def _admin_sees_only_its_commit(secure: SecureBroker) -> None:
    admin_view = Consumer({**secure.confluent_conf("SASL_SSL", "PLAIN", user="admin"), "group.id": GROUP_B})
    try:
        assert admin_view.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 1
    finally:
        admin_view.close()


def test_each_group_api_refuses_group_b_on_the_wire(secure: SecureBroker) -> None:
    """Request by request, as the broker answers them (the coordinator lookup aside)."""
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.delete_groups import DeleteGroupsRequest
    from protocol.messages.describe_groups import DescribeGroupsRequest
    from protocol.messages.find_coordinator import FindCoordinatorRequest
    from protocol.messages.heartbeat import HeartbeatRequest
    from protocol.messages.join_group import JoinGroupRequest
    from protocol.messages.offset_commit import OffsetCommitRequest
    from protocol.messages.offset_delete import OffsetDeleteRequest
    from protocol.messages.offset_fetch import OffsetFetchRequest
    from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from protocol.messages.sasl_handshake import SaslHandshakeRequest
    from protocol.messages.sync_group import SyncGroupRequest

    with WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as c:
        assert c.call(ApiKey.SaslHandshake, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        assert c.call(ApiKey.SaslAuthenticate, 2, SaslAuthenticateRequest(
            auth_bytes=b"\0alice\0alice-secret")).error_code == 0
        denied = 30  # GROUP_AUTHORIZATION_FAILED
        assert c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=GROUP_B)).error_code == denied
        assert c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=GROUP_A)).error_code == 0
        join = JoinGroupRequest(group_id=GROUP_B, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                protocol_type="consumer", protocols=[JoinGroupRequest.Protocol(name="range",
                                                                                               metadata=b"")])
        assert c.call(ApiKey.JoinGroup, 5, join).error_code == denied
        assert c.call(ApiKey.SyncGroup, 3, SyncGroupRequest(group_id=GROUP_B, generation_id=1, member_id="m",
                                                            assignments=[])).error_code == denied
        assert c.call(ApiKey.Heartbeat, 3, HeartbeatRequest(group_id=GROUP_B, generation_id=1,
                                                            member_id="m")).error_code == denied
        T, P = OffsetCommitRequest.Topic, OffsetCommitRequest.Topic.Partition
        commit = c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(group_id=GROUP_B, topics=[T(name=TOPIC, partitions=[
            P(partition_index=0, committed_offset=2, committed_metadata="")])]))
        assert commit.topics[0].partitions[0].error_code == denied
        G = OffsetFetchRequest.Group
        fetch = c.call(ApiKey.OffsetFetch, 8, OffsetFetchRequest(groups=[G(group_id=GROUP_B, topics=None),
                                                                         G(group_id=GROUP_A, topics=None)]))
        assert {g.group_id: g.error_code for g in fetch.groups} == {GROUP_B: denied, GROUP_A: 0}
        assert [g.topics for g in fetch.groups if g.group_id == GROUP_B] == [[]]
        described = c.call(ApiKey.DescribeGroups, 5, DescribeGroupsRequest(groups=[GROUP_B, GROUP_A],
                                                                           include_authorized_operations=True))
        assert {g.group_id: g.error_code for g in described.groups} == {GROUP_B: denied, GROUP_A: 0}
        assert [g.authorized_operations for g in described.groups if g.group_id == GROUP_A] == [(1 << 3) | (1 << 8)]
        deleted = c.call(ApiKey.DeleteGroups, 2, DeleteGroupsRequest(groups_names=[GROUP_B]))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [(GROUP_B, denied)]
        OT = OffsetDeleteRequest.Topic
        assert c.call(ApiKey.OffsetDelete, 0, OffsetDeleteRequest(group_id=GROUP_B, topics=[OT(
            name=TOPIC, partitions=[OT.Partition(partition_index=0)])])).error_code == denied
    _admin_sees_only_its_commit(secure)


def test_nothing_a_denied_request_carries_reaches_the_log(secure: SecureBroker) -> None:
    marker = f"denied-{uuid.uuid4().hex}"
    consumer = _alice(secure, marker, **DENIED_GROUP_CONF)
    try:
        with pytest.raises(KafkaException):
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 2, metadata=marker)], asynchronous=False)
    finally:
        consumer.close()
    # A barrier: the admin commits a second marker to the offsets partition of the denied group.
    # Once it is on disk, whatever the denied request had written there would be on disk too.
    data_dir: Path = secure.process.data_dir
    barrier = f"barrier-{uuid.uuid4().hex}"
    offsets_partition = partition_for(marker, 50)
    admin_group = next(g for i in itertools.count() if partition_for(g := f"admin-{i}", 50) == offsets_partition)
    admin_consumer = Consumer({**secure.confluent_conf("SASL_SSL", "PLAIN", user="admin"), "group.id": admin_group})
    try:
        _commit_once_the_coordinator_is_known(admin_consumer, [TopicPartition(TOPIC, 0, 1, metadata=barrier)])
    finally:
        admin_consumer.close()
    offsets_dir = data_dir / f"__consumer_offsets-{offsets_partition}"
    wait_for(lambda: any(barrier.encode() in p.read_bytes() for p in offsets_dir.glob("*.log")), 30,
             f"the barrier commit in {offsets_dir}", seen=lambda: sorted(p.name for p in offsets_dir.glob("*")))
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert marker.encode() not in path.read_bytes(), f"{marker} reached {path}"


def test_prefixed_acl_allows_every_group_with_the_prefix(secure: SecureBroker) -> None:
    consumer = _alice(secure, f"team-{SUFFIX}-billing")
    try:
        assert _consume_and_commit(consumer, 3) == [b"m0", b"m1", b"m2"]
        assert consumer.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 3
    finally:
        consumer.close()


def test_client_certificate_subject_is_the_principal(secure: SecureBroker) -> None:
    with_cert = Consumer({**secure.confluent_conf("SSL", client_cert=True), "group.id": f"mtls-{SUFFIX}"})
    try:
        _commit_once_the_coordinator_is_known(with_cert, [TopicPartition(TOPIC, 0, 2)])
        assert with_cert.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset == 2
    finally:
        with_cert.close()
    anonymous = Consumer({**secure.confluent_conf("SSL"), "group.id": f"mtls-{SUFFIX}", **DENIED_GROUP_CONF})
    try:
        # User:ANONYMOUS may not even look the group's coordinator up.
        with pytest.raises(KafkaException):
            anonymous.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)
    finally:
        anonymous.close()


def test_authorized_operations_are_reported_when_asked(secure: SecureBroker) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: F401 - the admin API's types load

    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="alice"))
    group = admin.describe_consumer_groups([GROUP_A], include_authorized_operations=True)[GROUP_A].result(10)
    assert set(group.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    topics = admin.describe_topics(_topic_collection([TOPIC]), include_authorized_operations=True)
    described = topics[TOPIC].result(10)
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}


def _topic_collection(names: list[str]) -> Any:
    from confluent_kafka import TopicCollection

    return TopicCollection(names)


def test_configs_cluster_and_offsets_show_only_what_the_principal_may_describe(secure: SecureBroker) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import ConfigResource

    hidden, group = f"hidden-{SUFFIX}", f"team-{SUFFIX}-offsets"
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(hidden, 1, 1)])[hidden].result(15)
    committer = Consumer({**secure.confluent_conf("SASL_SSL", "PLAIN", user="admin"), "group.id": group})
    _commit_once_the_coordinator_is_known(committer, [TopicPartition(TOPIC, 0, 2), TopicPartition(hidden, 0, 4)])
    committer.close()
    alice = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="alice"))

    # Offsets: all topics of the group leaves out the one alice may not describe; asking for it
    # by name answers TOPIC_AUTHORIZATION_FAILED.
    listed = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert [(tp.topic, tp.offset) for tp in listed.topic_partitions] == [(TOPIC, 2)]
    asked = alice.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(hidden, 0)])])
    assert asked[group].result(10).topic_partitions[0].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    as_admin = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    assert sorted((tp.topic, tp.offset) for tp in as_admin.topic_partitions) == sorted([(TOPIC, 2), (hidden, 4)])

    # DescribeConfigs needs DescribeConfigs on the topic (Read does not imply it) or the cluster.
    for resource in (ConfigResource(ConfigResource.Type.TOPIC, TOPIC), ConfigResource(ConfigResource.Type.BROKER, "1")):
        with pytest.raises(KafkaException) as denied:
            alice.describe_configs([resource])[resource].result(10)
        assert denied.value.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                               KafkaError.CLUSTER_AUTHORIZATION_FAILED)
        assert admin.describe_configs([resource])[resource].result(10)
    # Passwords and keys are sensitive: named, never shown, even to a super user.
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    shown = admin.describe_configs([broker_resource])[broker_resource].result(10)
    assert shown["sasl.bootstrap.users"].is_sensitive and shown["sasl.bootstrap.users"].value is None
    assert shown["ssl.keystore.location"].value and not shown["ssl.keystore.location"].is_sensitive
    assert not any("admin-secret" in (entry.value or "") for entry in shown.values())

    # DescribeCluster answers everyone; the cluster's operations are empty for alice.
    assert not alice.describe_cluster(include_authorized_operations=True).result(10).authorized_operations
    assert AclOperation.ALTER in admin.describe_cluster(include_authorized_operations=True).result(
        10).authorized_operations


def test_a_consumer_group_member_needs_describe_on_its_subscribed_topics(secure: SecureBroker) -> None:
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

    topic, group = f"cgh-topic-{SUFFIX}", f"cgh-{SUFFIX}"
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    for future in admin.create_acls([_acl(ResourceType.GROUP, group, "User:ANONYMOUS", AclOperation.READ)]).values():
        future.result(10)

    def join() -> int:
        with WireClient("127.0.0.1", secure.ports["PLAINTEXT"]) as c:  # User:ANONYMOUS
            return int(c.call(ApiKey.ConsumerGroupHeartbeat, 0, ConsumerGroupHeartbeatRequest(
                group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=10_000,
                subscribed_topic_names=[topic], topic_partitions=[])).error_code)

    assert join() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    for future in admin.create_acls([_acl(ResourceType.TOPIC, topic, "User:ANONYMOUS", AclOperation.DESCRIBE)]).values():
        future.result(10)
    assert join() == 0




def test_a_regex_subscription_is_resolved_to_the_topics_its_member_may_describe(secure: SecureBroker) -> None:
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
    from protocol.messages.metadata import MetadataRequest

    prefix, group = f"rx-{SUFFIX}-", f"rx-{SUFFIX}"
    shown, hidden = prefix + "shown", prefix + "hidden"
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    for future in admin.create_topics([NewTopic(shown, 2, 1), NewTopic(hidden, 2, 1)]).values():
        future.result(15)
    for future in admin.create_acls([_acl(ResourceType.GROUP, group, "User:ANONYMOUS", AclOperation.READ),
                                     _acl(ResourceType.TOPIC, shown, "User:ANONYMOUS",
                                          AclOperation.DESCRIBE)]).values():
        future.result(10)
    with _sasl_wire_client(secure, "admin") as c:
        metadata = c.call(ApiKey.Metadata, 12, MetadataRequest(topics=[MetadataRequest.Topic(name=shown),
                                                                        MetadataRequest.Topic(name=hidden)]))
    ids = {t.name: t.topic_id for t in metadata.topics}
    assert set(ids) == {shown, hidden}

    member_id = uuid.uuid4().hex
    with WireClient("127.0.0.1", secure.ports["PLAINTEXT"]) as c:  # User:ANONYMOUS
        joined = c.call(ApiKey.ConsumerGroupHeartbeat, 1, ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=10_000,
            subscribed_topic_regex=prefix + ".*", topic_partitions=[]))
        # The expression is resolved after the heartbeat that brought it, as Kafka does: a later
        # heartbeat is given what it matched.
        assert joined.error_code == 0 and joined.assignment.topic_partitions == []
        answers: list[Any] = [joined]

        def assigned() -> bool:
            answer = c.call(ApiKey.ConsumerGroupHeartbeat, 1, ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=answers[-1].member_epoch,
                topic_partitions=[]))
            assert answer.error_code == 0, answer
            answers.append(answer)
            return answer.assignment is not None and answer.assignment.topic_partitions != []

        wait_for(assigned, 60, "the member to be assigned what its expression matched", step=0.2,
                 seen=lambda: answers[-1])
    # Both topics match; the member may describe one, and only that one is assigned to it.
    given = answers[-1].assignment.topic_partitions
    assert [(tp.topic_id, list(tp.partitions)) for tp in given] == [(ids[shown], [0, 1])]


def test_consumer_group_describe_refuses_a_group_over_topics_the_client_may_not_describe(
        secure: SecureBroker) -> None:
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

    topic, group = f"cgd-topic-{SUFFIX}", f"cgd-{SUFFIX}"
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    for future in admin.create_acls([_acl(ResourceType.GROUP, group, "User:ANONYMOUS", AclOperation.READ),
                                     _acl(ResourceType.TOPIC, topic, "User:ANONYMOUS", AclOperation.DESCRIBE),
                                     _acl(ResourceType.GROUP, group, "User:alice", AclOperation.DESCRIBE)]).values():
        future.result(10)
    with WireClient("127.0.0.1", secure.ports["PLAINTEXT"]) as c:  # User:ANONYMOUS
        assert c.call(ApiKey.ConsumerGroupHeartbeat, 0, ConsumerGroupHeartbeatRequest(
            group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=10_000,
            subscribed_topic_names=[topic], topic_partitions=[])).error_code == 0

    def describe(user: str) -> Any:
        with _sasl_wire_client(secure, user) as c:
            return c.call(ApiKey.ConsumerGroupDescribe, 0, ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]

    refused = describe("alice")  # may describe the group, not its topic
    assert (refused.error_code, refused.error_message, refused.members) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "The group has described topic(s) that the client is not authorized to describe.", [])
    described = describe("admin")
    assert described.error_code == 0
    assert [m.subscribed_topic_names for m in described.members] == [[topic]]


def test_acls_are_managed_by_admins_only_and_survive_a_restart(secure: SecureBroker) -> None:
    alice_admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="alice"))
    extra = _acl(ResourceType.GROUP, f"extra-{SUFFIX}", "User:bob", AclOperation.READ)
    with pytest.raises(KafkaException) as denied:
        next(iter(alice_admin.create_acls([extra]).values())).result(10)
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    next(iter(admin.create_acls([extra]).values())).result(10)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    before = set(map(str, admin.describe_acls(everything).result(10)))
    assert str(extra) in before
    secure.process.kill()  # acknowledged ACLs must already be on disk
    secure.process.start()
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    assert set(map(str, admin.describe_acls(everything).result(10))) == before
    bob_filter = AclBindingFilter(ResourceType.GROUP, f"extra-{SUFFIX}", ResourcePatternType.LITERAL, "User:bob",
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    deleted = next(iter(admin.delete_acls([bob_filter]).values())).result(10)
    assert [str(b) for b in deleted] == [str(extra)]
    assert str(extra) not in set(map(str, admin.describe_acls(everything).result(10)))


def test_altering_configs_needs_alter_configs(secure: SecureBroker) -> None:
    """IncrementalAlterConfigs needs AlterConfigs on the topic, the group or (a broker) the
    cluster; a denied resource is answered with its error and the others of the request served."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    mine = f"alice-configs-{SUFFIX}"
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(mine, 1, 1)])[mine].result(15)
    admin.create_acls([_acl(ResourceType.TOPIC, mine, "User:alice", AclOperation.ALTER_CONFIGS)])[
        _acl(ResourceType.TOPIC, mine, "User:alice", AclOperation.ALTER_CONFIGS)].result(10)
    alice = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="alice"))

    def resource(kind: Any, name: str, config: str, value: str) -> Any:
        found = ConfigResource(kind, name)
        found.add_incremental_config(ConfigEntry(config, value, incremental_operation=AlterConfigOpType.SET))
        return found

    # The values the other tests of the module's broker may meet (its defaults, or beyond reach).
    allowed = resource(ConfigResource.Type.TOPIC, mine, "retention.ms", "60000")
    denied = [resource(ConfigResource.Type.TOPIC, TOPIC, "max.compaction.lag.ms", "86400000"),
              resource(ConfigResource.Type.GROUP, GROUP_B, "consumer.session.timeout.ms", "50000"),
              resource(ConfigResource.Type.BROKER, "1", "log.retention.ms", "604800000")]
    for r in denied:
        futures = alice.incremental_alter_configs([allowed, r])
        futures[allowed].result(10)
        with pytest.raises(KafkaException) as refused:
            futures[r].result(10)
        assert refused.value.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                KafkaError.GROUP_AUTHORIZATION_FAILED,
                                                KafkaError.CLUSTER_AUTHORIZATION_FAILED)
        admin.incremental_alter_configs([r])[r].result(10)
    shown = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, mine)])
    assert next(iter(shown.values())).result(10)["retention.ms"].value == "60000"


def test_offsets_by_topic_id_are_checked_on_the_topic_the_id_names(secure: SecureBroker) -> None:
    """OffsetCommit and OffsetFetch v10 name topics by id: Read (commit) or Describe (fetch) is
    checked on the topic the id names, and an id no topic has is UNKNOWN_TOPIC_ID, as in Kafka."""
    from protocol.messages.metadata import MetadataRequest
    from protocol.messages.offset_commit import OffsetCommitRequest
    from protocol.messages.offset_fetch import OffsetFetchRequest
    from protocol.messages.unregister_broker import UnregisterBrokerRequest

    hidden, group = f"hidden-ids-{SUFFIX}", f"team-{SUFFIX}-by-id"
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(hidden, 1, 1)])[hidden].result(15)
    unknown = uuid.uuid4().bytes
    T, P, G = OffsetCommitRequest.Topic, OffsetCommitRequest.Topic.Partition, OffsetFetchRequest.Group
    with _sasl_wire_client(secure, "admin") as c:
        meta = c.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        ids = {t.name: t.topic_id for t in meta.topics}
        me = meta.brokers[0].node_id
        assert c.call(8, 10, OffsetCommitRequest(group_id=group, topics=[T(topic_id=ids[hidden], partitions=[
            P(partition_index=0, committed_offset=4)])])).topics[0].partitions[0].error_code == 0
        # UnregisterBroker needs Alter on the cluster: the admin may, and is refused the running node.
        assert c.call(64, 0, UnregisterBrokerRequest(broker_id=me)).error_code == 44  # POLICY_VIOLATION
        assert c.call(64, 0, UnregisterBrokerRequest(broker_id=me + 100)).error_code == 102
    with _sasl_wire_client(secure, "alice") as c:
        committed = c.call(8, 10, OffsetCommitRequest(group_id=group, topics=[
            T(topic_id=topic_id, partitions=[P(partition_index=0, committed_offset=2)])
            for topic_id in (ids[TOPIC], ids[hidden], unknown)]))
        assert {t.topic_id: t.partitions[0].error_code for t in committed.topics} == {
            ids[TOPIC]: 0, ids[hidden]: 29, unknown: 100}  # TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID
        fetched = c.call(9, 10, OffsetFetchRequest(groups=[G(group_id=group, topics=[
            G.Topics(topic_id=topic_id, partition_indexes=[0]) for topic_id in (ids[TOPIC], ids[hidden], unknown)])]))
        assert {t.topic_id: (t.partitions[0].committed_offset, t.partitions[0].error_code)
                for t in fetched.groups[0].topics} == {ids[TOPIC]: (2, 0), ids[hidden]: (-1, 29), unknown: (-1, 100)}
        every = c.call(9, 10, OffsetFetchRequest(groups=[G(group_id=group, topics=None)]))
        assert [t.topic_id for t in every.groups[0].topics] == [ids[TOPIC]]
        assert c.call(64, 0, UnregisterBrokerRequest(broker_id=me)).error_code == 31  # CLUSTER_AUTHORIZATION_FAILED


def test_a_fetch_session_is_authorized_again_at_each_fetch(secure: SecureBroker) -> None:
    """An incremental fetch names only what changed; the partitions its session holds from earlier
    fetches are authorized again, so a Read ACL removed mid-session stops the reads (as in Kafka)."""
    from protocol.messages.fetch import FetchRequest

    topic = f"sessioned-{SUFFIX}"
    admin = AdminClient(secure.confluent_conf("SASL_SSL", "SCRAM-SHA-512", user="admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    read = _acl(ResourceType.TOPIC, topic, "User:alice", AclOperation.READ)
    for future in admin.create_acls([read]).values():
        future.result(10)

    def fetch(c: Any, session_id: int, epoch: int, named: bool) -> Any:
        topics = [FetchRequest.Topic(topic=topic, partitions=[
            FetchRequest.Topic.Partition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])] if named else []
        return c.call(1, 12, FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                          session_id=session_id, session_epoch=epoch, topics=topics,
                                          forgotten_topics_data=[]))

    with _sasl_wire_client(secure, "alice") as c:
        opened = fetch(c, 0, 0, named=True)
        assert opened.error_code == 0 and opened.session_id != 0
        assert [p.error_code for t in opened.responses for p in t.partitions] == [0]
        assert fetch(c, opened.session_id, 1, named=False).responses == []  # nothing new
        for future in admin.delete_acls([AclBindingFilter(
                ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                AclPermissionType.ALLOW)]).values():
            future.result(10)
        refused = fetch(c, opened.session_id, 2, named=False)
        assert refused.error_code == 0
        assert [p.error_code for t in refused.responses for p in t.partitions] == [29]  # TOPIC_AUTHORIZATION_FAILED
