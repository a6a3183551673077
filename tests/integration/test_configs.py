"""Configs of topics, brokers and groups through the admin clients of kafka-python and
confluent-kafka: AlterConfigs, IncrementalAlterConfigs, DescribeConfigs and ListConfigResources,
and the changes taking effect (produce limits, retention, a group's session timeout) and
surviving a restart."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as PyConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from protocol.messages.fetch import FetchRequest
from protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from protocol.record_batch import iter_batches
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.cluster import Cluster, wait_for

# Short enough for a test: retention runs every 200 ms, and groups may have 1 s sessions.
OVERRIDES = {
    "log.retention.check.interval.ms": "200",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "200",
    "log.cleaner.backoff.ms": "200",
}
BrokerFactory = Callable[..., BrokerProcess]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the tests that change only their own topics and groups."""
    broker = BrokerProcess(tmp_path_factory.mktemp("configs") / "data", OVERRIDES).start_loaded()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def admin(served: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": served.bootstrap})


def create_topic(admin: AdminClient, name: str, configs: dict[str, str] | None = None) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=configs or {})])[name].result(15)


def describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    found: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(15)
    return found


def incremental(admin: AdminClient, resource: ConfigResource, *ops: tuple[str, AlterConfigOpType, str | None],
                validate_only: bool = False) -> None:
    for name, op, value in ops:
        resource.add_incremental_config(ConfigEntry(name, value, incremental_operation=op))
    admin.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(15)


def test_incremental_alter_and_describe_a_topic(admin: AdminClient) -> None:
    """SET, DELETE, APPEND and SUBTRACT on a topic; DescribeConfigs shows each config with its
    source, its type and the synonyms below it, as Kafka shows them."""
    create_topic(admin, "cfg-topic", {"retention.ms": "3600000"})
    topic = ConfigResource(ConfigResource.Type.TOPIC, "cfg-topic")
    incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-topic"),
                ("max.message.bytes", AlterConfigOpType.SET, "500000"),
                ("cleanup.policy", AlterConfigOpType.APPEND, "compact"),
                ("retention.ms", AlterConfigOpType.DELETE, None))
    configs = describe(admin, topic)
    mmb = configs["max.message.bytes"]
    assert (mmb.value, mmb.source, mmb.is_read_only, mmb.is_sensitive) == (
        "500000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False, False)
    assert [(s.name, s.value, s.source) for s in mmb.synonyms.values()] == [
        ("max.message.bytes", "500000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG.value)]
    assert configs["cleanup.policy"].value == "delete,compact"
    retention = configs["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == (
        "604800000", ConfigSource.DEFAULT_CONFIG.value, True)
    assert len(configs) == 37  # every topic config of Kafka 4.4

    incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-topic"),
                ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete"))
    assert describe(admin, topic)["cleanup.policy"].value == "compact"

    # Checked, not applied.
    incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-topic"),
                ("segment.bytes", AlterConfigOpType.SET, "2000000"), validate_only=True)
    assert describe(admin, topic)["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.parametrize(("ops", "code", "message"), [
    ([("no.such.config", AlterConfigOpType.SET, "1")], KafkaError.INVALID_CONFIG,
     "Unknown topic config name: no.such.config"),
    ([("retention.ms", AlterConfigOpType.SET, "soon")], KafkaError.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ([("cleanup.policy", AlterConfigOpType.SET, "forever")], KafkaError.INVALID_CONFIG,
     "Invalid value forever for configuration cleanup.policy: String must be one of: compact, delete"),
    ([("segment.bytes", AlterConfigOpType.SET, "10")], KafkaError.INVALID_CONFIG,
     "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576"),
    ([("retention.ms", AlterConfigOpType.APPEND, "5")], KafkaError.INVALID_CONFIG,
     "Can't APPEND to key retention.ms because its type is not LIST."),
])
def test_bad_topic_alters_answered_as_kafka(admin: AdminClient, ops: list[tuple[str, AlterConfigOpType, str]],
                                            code: int, message: str) -> None:
    topic = f"cfg-bad-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic)
    with pytest.raises(KafkaException) as raised:
        incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, topic), *ops)
    error = raised.value.args[0]
    assert (error.code(), error.str()) == (code, message)
    assert describe(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))["retention.ms"].source == \
        ConfigSource.DEFAULT_CONFIG.value


def test_unknown_topic_and_broker_answers(admin: AdminClient) -> None:
    with pytest.raises(KafkaException) as raised:
        incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-never"),
                    ("retention.ms", AlterConfigOpType.SET, "1000"))
    assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException) as raised:
        incremental(admin, ConfigResource(ConfigResource.Type.BROKER, "1"),
                    ("node.id", AlterConfigOpType.SET, "7"))
    error = raised.value.args[0]
    assert (error.code(), error.str()) == (KafkaError.INVALID_REQUEST, "Cannot update these configs dynamically: "
                                                                       "[node.id]")


def set_cluster_default(port: int, name: str, value: str) -> None:
    """IncrementalAlterConfigs on broker "" (librdkafka refuses an empty resource name)."""
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    with WireClient("127.0.0.1", port) as c:
        answer = c.call(ApiKey.IncrementalAlterConfigs, 1, IncrementalAlterConfigsRequest(resources=[Resource(
            resource_type=4, resource_name="", configs=[Resource.AlterableConfig(name=name, config_operation=0,
                                                                                 value=value)])],
            validate_only=False))
    assert answer.responses[0].error_code == 0, answer


def test_broker_configs_types_sources_and_secrets(broker_factory: BrokerFactory) -> None:
    """A broker's configs: what it was started with is STATIC_BROKER_CONFIG, the rest defaults;
    Kafka's types; passwords sensitive and without a value; read-only unless a change applies."""
    own = broker_factory(OVERRIDES)  # its defaults change: a broker of its own
    admin = AdminClient({"bootstrap.servers": own.bootstrap})
    port = own.port
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = describe(admin, broker)
    check = configs["log.retention.check.interval.ms"]
    assert (check.value, check.source, check.is_read_only) == ("200", ConfigSource.STATIC_BROKER_CONFIG.value, True)
    password = configs["ssl.keystore.password"]
    assert (password.value, password.is_sensitive) == (None, True)
    retention = configs["log.retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == (
        "604800000", ConfigSource.DEFAULT_CONFIG.value, False)

    set_cluster_default(port, "log.retention.ms", "7200000")
    incremental(admin, ConfigResource(ConfigResource.Type.BROKER, "1"),
                ("log.retention.bytes", AlterConfigOpType.SET, "99999999"))
    configs = describe(admin, broker)
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].source) == (
        "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert (configs["log.retention.bytes"].value, configs["log.retention.bytes"].source) == (
        "99999999", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # A topic without its own retention follows the broker's, and names it as its synonym.
    create_topic(admin, "cfg-follows")
    topic = describe(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-follows"))["retention.ms"]
    assert (topic.value, topic.source) == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)


def test_kafka_python_admin(served: BrokerProcess) -> None:
    """kafka-python's KafkaAdminClient: alter_configs (IncrementalAlterConfigs), describe_configs
    with synonyms, list_config_resources."""
    client = KafkaAdminClient(bootstrap_servers=served.bootstrap, request_timeout_ms=15000)
    try:
        from kafka.admin import NewTopic as PyNewTopic

        client.create_topics([PyNewTopic("cfg-py", 1, 1)])
        client.alter_configs([PyConfigResource(ConfigResourceType.TOPIC, "cfg-py",
                                               configs={"retention.ms": "123456", "cleanup.policy": "compact"})])
        client.alter_configs([PyConfigResource(ConfigResourceType.GROUP, "cfg-py-group",
                                               configs={"consumer.heartbeat.interval.ms": "4000"})])
        described = client.describe_configs([PyConfigResource(ConfigResourceType.TOPIC, "cfg-py")],
                                            include_synonyms=True)
        text = repr(described)
        assert "123456" in text and "compact" in text
        listed = client.list_config_resources()
        text = repr(listed)
        assert "cfg-py" in text and "cfg-py-group" in text
    finally:
        client.close()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_the_whole_set(admin: AdminClient) -> None:
    """AlterConfigs (the older API): what the request does not name goes back to its default."""
    create_topic(admin, "cfg-replace", {"retention.ms": "3600000", "cleanup.policy": "compact"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "cfg-replace", set_config={"segment.ms": "100000"})
    admin.alter_configs([resource])[resource].result(15)
    configs = describe(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-replace"))
    assert {k for k, v in configs.items() if v.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value} == {"segment.ms"}


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.max.bytes": 10_000_000,
                         "batch.size": 100_000})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, _msg: errors.append(err))
        producer.poll(0)
    producer.flush(15)
    return errors


def _earliest(port: int, topic: str) -> int:
    with WireClient("127.0.0.1", port) as c:
        answer = c.call(ApiKey.ListOffsets, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.Topic(name=topic, partitions=[ListOffsetsRequest.Topic.Partition(
                partition_index=0, current_leader_epoch=-1, timestamp=-2)])]))
        return int(answer.topics[0].partitions[0].offset)


def test_changes_take_effect_and_survive_a_restart(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    """max.message.bytes lowered: a bigger batch gets MESSAGE_TOO_LARGE; retention.ms lowered:
    the closed segments go and the log start moves; after a restart both still hold."""
    data = tmp_path / "restart"
    served = broker_factory(OVERRIDES, data_dir=data)
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    create_topic(admin, "cfg-effect", {"segment.bytes": "1048576"})
    assert _produce(served.bootstrap, "cfg-effect", [b"x" * 4000]) == [None]
    incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-effect"),
                ("max.message.bytes", AlterConfigOpType.SET, "1000"))
    errors = _produce(served.bootstrap, "cfg-effect", [b"x" * 4000])
    assert [e.code() if e else None for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-effect"),
                ("max.message.bytes", AlterConfigOpType.DELETE, None))
    assert set(_produce(served.bootstrap, "cfg-effect", [b"y" * 20_000] * 80)) == {None}  # 1.6 MB: two segments
    assert _earliest(served.port, "cfg-effect") == 0
    incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-effect"),
                ("retention.ms", AlterConfigOpType.SET, "1"))
    wait_for(lambda: _earliest(served.port, "cfg-effect") > 0, 60, "the first segment removed by retention",
             step=0.1)

    served.stop()
    again = broker_factory(OVERRIDES, data_dir=data)
    admin = AdminClient({"bootstrap.servers": again.bootstrap})
    configs = describe(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-effect"))
    assert configs["retention.ms"].value == "1" and configs["max.message.bytes"].source == \
        ConfigSource.DEFAULT_CONFIG.value
    # Broker defaults set dynamically are in effect after a restart too.
    set_cluster_default(again.port, "message.max.bytes", "2000")
    again.stop()
    third = broker_factory(OVERRIDES, data_dir=data)
    errors = _produce(third.bootstrap, "cfg-effect", [b"z" * 4000])
    assert [e.code() if e else None for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]


def _heartbeat(c: WireClient, group: str, member_id: str = "", epoch: int = 0) -> Any:
    return c.call(ApiKey.ConsumerGroupHeartbeat, 0, ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=10_000,
        subscribed_topic_names=["cfg-group-topic"], topic_partitions=[]))


def test_group_session_timeout_fences_a_silent_member(admin: AdminClient, served: BrokerProcess) -> None:
    """consumer.session.timeout.ms and consumer.heartbeat.interval.ms of one group: its members
    are told the group's interval, and one that goes silent is fenced after the group's timeout
    (the broker's is 45 s)."""
    group = "cfg-fenced"
    with pytest.raises(KafkaException) as raised:  # outside the broker's bounds
        incremental(admin, ConfigResource(ConfigResource.Type.GROUP, group),
                    ("consumer.session.timeout.ms", AlterConfigOpType.SET, "500"))
    assert raised.value.args[0].str() == "consumer.session.timeout.ms must be in the range 1000 to 60000 inclusive."
    incremental(admin, ConfigResource(ConfigResource.Type.GROUP, group),
                ("consumer.session.timeout.ms", AlterConfigOpType.SET, "1500"),
                ("consumer.heartbeat.interval.ms", AlterConfigOpType.SET, "300"))
    shown = describe(admin, ConfigResource(ConfigResource.Type.GROUP, group))["consumer.session.timeout.ms"]
    assert (shown.value, shown.source) == ("1500", ConfigSource.GROUP_CONFIG.value)
    create_topic(admin, "cfg-group-topic")
    with WireClient("127.0.0.1", served.port) as c:
        joined = _heartbeat(c, group)
        assert (joined.error_code, joined.heartbeat_interval_ms) == (0, 300)
        other = _heartbeat(c, "cfg-not-configured")
        assert (other.error_code, other.heartbeat_interval_ms) == (0, 5000)

        def members() -> dict[str, list[str]]:
            described = c.call(ApiKey.ConsumerGroupDescribe, 0, ConsumerGroupDescribeRequest(
                group_ids=[group, "cfg-not-configured"], include_authorized_operations=False))
            return {g.group_id: [m.member_id for m in g.members] for g in described.groups}

        # The configured group's 1.5 s session runs out; the other group's default one does not.
        wait_for(lambda: members()[group] == [], 30, f"the member of {group} to expire", step=0.1, seen=members)
        assert members() == {group: [], "cfg-not-configured": [other.member_id]}
        late = _heartbeat(c, group, joined.member_id, joined.member_epoch)
        assert late.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_change_through_one_node_takes_effect_on_the_others(cluster: Cluster) -> None:
    """Two nodes on one shared data dir: a topic's max.message.bytes lowered through the node that
    does not lead its partition refuses a batch on the one that does; a group config set through
    one node is what the other describes."""
    for node in (1, 2):
        cluster.start_node(node)
    cluster.wait_spread({1, 2})
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    create_topic(admin, "cfg-shared")
    wait_for(lambda: cluster.leaders(topic="cfg-shared").get(0, -1) >= 0, 60, "a leader of cfg-shared", step=0.1)
    leader = cluster.leaders(topic="cfg-shared")[0]
    assert _produce(bootstrap, "cfg-shared", [b"x" * 4000]) == [None]
    other = cluster.nodes[3 - leader]
    through_other = AdminClient({"bootstrap.servers": other.bootstrap})
    incremental(through_other, ConfigResource(ConfigResource.Type.TOPIC, "cfg-shared"),
                ("max.message.bytes", AlterConfigOpType.SET, "1000"))
    # Each node follows the shared files twice a second: the leader refuses the batch once it has
    # the new limit (batches it takes before then are of no concern here).
    refusals: list[list[Any]] = []

    def refused() -> bool:
        errors = _produce(cluster.nodes[leader].bootstrap, "cfg-shared", [b"x" * 4000])
        refusals.append([e.code() if e else None for e in errors])
        return refusals[-1] == [KafkaError.MSG_SIZE_TOO_LARGE]

    wait_for(refused, 30, "the leader to refuse a batch over the lowered max.message.bytes", step=0.1,
             seen=lambda: refusals[-3:])

    incremental(through_other, ConfigResource(ConfigResource.Type.GROUP, "cfg-shared-group"),
                ("consumer.session.timeout.ms", AlterConfigOpType.SET, "50000"))
    leader_admin = AdminClient({"bootstrap.servers": cluster.nodes[leader].bootstrap})
    group_resource = ConfigResource(ConfigResource.Type.GROUP, "cfg-shared-group")
    wait_for(lambda: describe(leader_admin, group_resource)["consumer.session.timeout.ms"].value == "50000", 30,
             "the leader to follow the group config", step=0.1,
             seen=lambda: describe(leader_admin, group_resource)["consumer.session.timeout.ms"].value)


def _records(port: int, topic: str) -> int:
    """How many records partition 0 holds from its start to its end."""
    count, offset = 0, 0
    with WireClient("127.0.0.1", port) as c:
        while True:
            answer = c.call(ApiKey.Fetch, 12, FetchRequest(
                max_wait_ms=0, min_bytes=0, max_bytes=8 << 20, isolation_level=0,
                topics=[FetchRequest.Topic(topic=topic, partitions=[FetchRequest.Topic.Partition(
                    partition=0, fetch_offset=offset, partition_max_bytes=8 << 20)])]))
            part = answer.responses[0].partitions[0]
            batches = list(iter_batches(part.records or b"", allow_partial=True))
            if not batches:
                return count
            count += sum(b.records_count for b in batches)
            offset = batches[-1].last_offset + 1


def test_compaction_switched_on_compacts_the_closed_segments(admin: AdminClient, served: BrokerProcess) -> None:
    """cleanup.policy changed to compact on a topic with data: the cleaner compacts its closed
    segments on its next pass (10 keys written 64 times each)."""
    create_topic(admin, "cfg-compact", {"segment.bytes": "1048576"})
    producer = Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 5})
    for i in range(640):
        producer.produce("cfg-compact", b"v" * 2000, key=b"k%d" % (i % 10))
    assert producer.flush(15) == 0
    assert _records(served.port, "cfg-compact") == 640
    incremental(admin, ConfigResource(ConfigResource.Type.TOPIC, "cfg-compact"),
                ("cleanup.policy", AlterConfigOpType.SET, "compact"),
                ("min.cleanable.dirty.ratio", AlterConfigOpType.SET, "0.01"))
    wait_for(lambda: _records(served.port, "cfg-compact") < 640, 60, "the log compacted", step=0.2,
             seen=lambda: _records(served.port, "cfg-compact"))
