"""The config service without a network: layers of values and their sources, Kafka's checks and
errors, AlterConfigs replacing a whole set, the store surviving a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.configs.model import ConfigOp, ConfigSource, ConfigType, ResourceType
from broker.configs.service import Change, ConfigError, ConfigService
from broker.configs.store import DynamicConfigStore
from broker.topics.catalog import Topic, TopicCatalog
from protocol.errors import ErrorCode


class Applied:
    def __init__(self) -> None:
        self.topics: list[str] = []
        self.defaults = 0
        self.groups = 0

    def topic(self, topic: Topic) -> None:
        self.topics.append(topic.name)

    def default(self) -> None:
        self.defaults += 1

    def group(self) -> None:
        self.groups += 1


def make(tmp_path: Path, given: dict[str, str] | None = None) -> tuple[ConfigService, Applied]:
    catalog = TopicCatalog(tmp_path, 1)
    if "t" not in catalog.topics:
        catalog.create("t", 1, {"retention.ms": "1000"})
    applied = Applied()
    static = {"node.id": "1", "log.retention.ms": "604800000", **(given or {})}
    service = ConfigService(1, catalog, DynamicConfigStore(tmp_path), static, (given or {}).keys(),
                            {"consumer.session.timeout.ms": (45000, 60000),
                             "consumer.heartbeat.interval.ms": (5000, 15000)},
                            on_topic=applied.topic, on_defaults=applied.default, on_groups=applied.group)
    return service, applied


def shown(service: ConfigService, kind: int, name: str, key: str) -> tuple[str | None, ConfigSource, list[str]]:
    (found,) = service.describe(kind, name, [key])
    return found.value, found.source, [f"{n}={v}@{s.name}" for n, v, s in found.synonyms]


def test_topic_value_layers(tmp_path: Path) -> None:
    service, _ = make(tmp_path, {"log.segment.bytes": "2097152"})
    assert shown(service, ResourceType.TOPIC, "t", "retention.ms") == (
        "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ["retention.ms=1000@DYNAMIC_TOPIC_CONFIG", "log.retention.ms=604800000@DEFAULT_CONFIG"])
    assert shown(service, ResourceType.TOPIC, "t", "segment.bytes") == (
        "2097152", ConfigSource.STATIC_BROKER_CONFIG,
        ["log.segment.bytes=2097152@STATIC_BROKER_CONFIG", "log.segment.bytes=1073741824@DEFAULT_CONFIG"])
    service.alter(ResourceType.BROKER, "", [Change("log.segment.bytes", ConfigOp.SET, "3145728")],
                  incremental=True, validate_only=False)
    service.alter(ResourceType.BROKER, "1", [Change("log.segment.bytes", ConfigOp.SET, "4194304")],
                  incremental=True, validate_only=False)
    value, source, synonyms = shown(service, ResourceType.TOPIC, "t", "segment.bytes")
    assert (value, source) == ("4194304", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [s.split("@")[1] for s in synonyms] == ["DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG",
                                                   "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"]
    assert service.log_defaults().segment_bytes == 4194304
    (segment_ms,) = service.describe(ResourceType.TOPIC, "t", ["segment.ms"])
    assert (segment_ms.type, segment_ms.synonyms, segment_ms.read_only) == (ConfigType.LONG, (), False)


def test_alter_configs_replaces_incremental_merges(tmp_path: Path) -> None:
    service, applied = make(tmp_path)
    service.alter(ResourceType.TOPIC, "t", [Change("cleanup.policy", ConfigOp.SET, "compact")], incremental=True,
                  validate_only=False)
    assert service.catalog.topics["t"].configs == {"retention.ms": "1000", "cleanup.policy": "compact"}
    service.alter(ResourceType.TOPIC, "t", [Change("segment.ms", 0, "5000")], incremental=False, validate_only=False)
    assert service.catalog.topics["t"].configs == {"segment.ms": "5000"}
    assert applied.topics == ["t", "t"]
    service.alter(ResourceType.TOPIC, "t", [Change("segment.ms", 0, "6000")], incremental=True, validate_only=True)
    assert service.catalog.topics["t"].configs == {"segment.ms": "5000"} and applied.topics == ["t", "t"]
    # Persisted: a new catalog on the same directory reads it.
    assert TopicCatalog(tmp_path, 1).topics["t"].configs == {"segment.ms": "5000"}


def test_append_and_subtract_start_from_the_effective_value(tmp_path: Path) -> None:
    service, _ = make(tmp_path)
    service.alter(ResourceType.TOPIC, "t", [Change("cleanup.policy", ConfigOp.APPEND, "compact")], incremental=True,
                  validate_only=False)
    assert service.catalog.topics["t"].configs["cleanup.policy"] == "delete,compact"
    service.alter(ResourceType.TOPIC, "t", [Change("cleanup.policy", ConfigOp.SUBTRACT, "delete")], incremental=True,
                  validate_only=False)
    assert service.catalog.topics["t"].configs["cleanup.policy"] == "compact"


@pytest.mark.parametrize(("kind", "name", "changes", "code", "message"), [
    (ResourceType.TOPIC, "t", [Change("x.y", 0, "1")], ErrorCode.INVALID_CONFIG, "Unknown topic config name: x.y"),
    (ResourceType.TOPIC, "nope", [Change("retention.ms", 0, "1")], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
     "The topic 'nope' does not exist."),
    (ResourceType.TOPIC, "t", [Change("retention.ms", 0, "1"), Change("retention.ms", 1, None)],
     ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
    (ResourceType.TOPIC, "t", [Change("retention.ms", 0, None)], ErrorCode.INVALID_REQUEST,
     "Null value not supported for : retention.ms"),
    (ResourceType.TOPIC, "t", [Change("retention.ms", 7, "1")], ErrorCode.UNKNOWN_SERVER_ERROR, None),
    (ResourceType.TOPIC, "t", [Change("min.cleanable.dirty.ratio", 0, "2")], ErrorCode.INVALID_CONFIG,
     "Invalid value 2 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    (ResourceType.BROKER, "1", [Change("log.dirs", 0, "/x")], ErrorCode.INVALID_REQUEST,
     "Cannot update these configs dynamically: [log.dirs]"),
    (ResourceType.BROKER, "7", [Change("log.retention.ms", 0, "1")], ErrorCode.INVALID_REQUEST,
     "Unexpected broker id, expected 1, but received 7"),
    (ResourceType.BROKER, "abc", [Change("log.retention.ms", 0, "1")], ErrorCode.INVALID_REQUEST,
     "Node id must be an integer, but it is: abc"),
    (ResourceType.BROKER, "", [Change("log.segment.bytes", 0, "abc")], ErrorCode.INVALID_REQUEST,
     "Invalid value abc for configuration log.segment.bytes: Not a number of type INT"),
    (ResourceType.GROUP, "g", [Change("consumer.session.timeout.ms", 0, "5")], ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    (ResourceType.GROUP, "g", [Change("foo", 0, "5")], ErrorCode.INVALID_CONFIG, "Unknown group config name: foo"),
    (ResourceType.GROUP, "g", [Change("streams.num.warmup.replicas", 0, "21")], ErrorCode.INVALID_CONFIG,
     "streams.num.warmup.replicas must be less than or equal to 20"),
    (ResourceType.GROUP, "g", [Change("streams.task.offset.interval.ms", 0, "1000")], ErrorCode.INVALID_CONFIG,
     "streams.task.offset.interval.ms must be greater than or equal to 15000"),
    (ResourceType.GROUP, "g", [Change("streams.rack.aware.assignment.tags", 0, "zone, zone")],
     ErrorCode.INVALID_CONFIG, "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
    (ResourceType.GROUP, "g", [Change("share.session.timeout.ms", 0, "45000"),
                               Change("share.heartbeat.interval.ms", 0, "5000"),
                               Change("share.record.lock.duration.ms", 0, "1000")], ErrorCode.INVALID_CONFIG,
     "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
    (ResourceType.GROUP, "g", [Change("share.record.lock.duration.ms", 0, "100")], ErrorCode.INVALID_CONFIG,
     "Invalid value 100 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    (ResourceType.GROUP, "g", [Change("share.partition.max.record.locks", 0, "5000")], ErrorCode.INVALID_CONFIG,
     "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
    (ResourceType.GROUP, "g", [Change("share.auto.offset.reset", 0, "by_duration:-PT1H")], ErrorCode.INVALID_CONFIG,
     "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: Invalid value `by_duration:-PT1H` "
     "for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
     "'by_duration:<PnDTnHnMn.nS>'."),
    (9, "x", [Change("a", 0, "1")], ErrorCode.INVALID_REQUEST, "Unknown resource type 9"),
])
def test_errors_as_kafka(tmp_path: Path, kind: int, name: str, changes: list[Change], code: int,
                         message: str | None) -> None:
    service, applied = make(tmp_path)
    with pytest.raises(ConfigError) as raised:
        service.alter(kind, name, changes, incremental=True, validate_only=False)
    assert (raised.value.error_code, raised.value.message) == (code, message)
    assert (applied.topics, applied.defaults, applied.groups) == ([], 0, 0)


def test_broker_and_group_configs_survive_a_restart(tmp_path: Path) -> None:
    service, applied = make(tmp_path)
    service.alter(ResourceType.GROUP, "g", [Change("consumer.session.timeout.ms", 0, "50000")], incremental=True,
                  validate_only=False)
    service.alter(ResourceType.BROKER, "1", [Change("custom.thing", 0, "kept")], incremental=True,
                  validate_only=False)
    assert (applied.groups, applied.defaults) == (1, 1)
    again, _ = make(tmp_path)
    assert again.group_timings() == {"g": (50000, None)}
    assert shown(again, ResourceType.GROUP, "g", "consumer.session.timeout.ms")[:2] == (
        "50000", ConfigSource.GROUP_CONFIG)
    assert again.store.get("brokers", "1") == {"custom.thing": "kept"}
    assert again.list_resources([], [1]) == [("g", ResourceType.GROUP), ("1", ResourceType.BROKER_LOGGER),
                                             ("1", ResourceType.BROKER),
                                             ("__consumer_offsets", ResourceType.TOPIC), ("t", ResourceType.TOPIC)]


def test_broker_describe(tmp_path: Path) -> None:
    service, _ = make(tmp_path, {"ssl.keystore.password": "secret"})
    (password,) = service.describe(ResourceType.BROKER, "1", ["ssl.keystore.password"])
    assert (password.value, password.sensitive, password.type, password.source) == (
        None, True, ConfigType.PASSWORD, ConfigSource.STATIC_BROKER_CONFIG)
    assert all(v is None for _n, v, _s in password.synonyms)
    (node,) = service.describe(ResourceType.BROKER, "1", ["node.id"])
    assert (node.read_only, node.type) == (True, ConfigType.INT)
    # The cluster-wide defaults a Kafka 4 cluster is formatted with: min.insync.replicas=1.
    (bootstrapped,) = service.describe(ResourceType.BROKER, "", None)
    assert (bootstrapped.name, bootstrapped.value, bootstrapped.source) == (
        "min.insync.replicas", "1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    with pytest.raises(ConfigError):
        service.describe(ResourceType.BROKER, "2", None)


def test_the_broker_logger_is_the_log_level(tmp_path: Path) -> None:
    service, _ = make(tmp_path, {"log.level": "WARNING"})
    levels: list[str] = []
    service.on_log_level = levels.append
    (root,) = service.describe(ResourceType.BROKER_LOGGER, "1", None)
    assert (root.name, root.value, root.source) == ("root", "WARN", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)
    service.alter(ResourceType.BROKER_LOGGER, "1", [Change("root", ConfigOp.SET, "TRACE")], incremental=True,
                  validate_only=False)
    assert levels == ["DEBUG"] and service.describe(ResourceType.BROKER_LOGGER, "1", None)[0].value == "TRACE"
    for changes, code, message in [
        ([Change("root", ConfigOp.SET, "LOUD")], ErrorCode.INVALID_CONFIG,
         "Cannot set the log level of root to LOUD as it is not a supported log level. Valid log levels are "
         "DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
        ([Change("kafka", ConfigOp.SET, "INFO")], ErrorCode.INVALID_CONFIG, "Logger kafka does not exist!"),
        ([Change("root", ConfigOp.DELETE, None)], ErrorCode.INVALID_REQUEST,
         "Removing the log level of the root logger is not allowed"),
        ([Change("root", ConfigOp.APPEND, "INFO")], ErrorCode.INVALID_REQUEST,
         "APPEND operation is not allowed for the BROKER_LOGGER resource"),
    ]:
        with pytest.raises(ConfigError) as raised:
            service.alter(ResourceType.BROKER_LOGGER, "1", changes, incremental=True, validate_only=False)
        assert (raised.value.error_code, raised.value.message) == (code, message)
    with pytest.raises(ConfigError) as raised:
        service.alter(ResourceType.BROKER_LOGGER, "1", [Change("root", 0, "INFO")], incremental=False,
                      validate_only=False)
    assert raised.value.message == "Unknown resource type 8"
    assert levels == ["DEBUG"]


def test_internal_streams_group_configs_are_described_once_set(tmp_path: Path) -> None:
    service, _ = make(tmp_path)
    names = [d.name for d in service.describe(ResourceType.GROUP, "g", None)]
    assert "streams.task.offset.interval.ms" not in names and "streams.num.standby.replicas" in names
    service.alter(ResourceType.GROUP, "g", [Change("streams.task.offset.interval.ms", 0, "30000")], incremental=True,
                  validate_only=False)
    [described] = service.describe(ResourceType.GROUP, "g", ["streams.task.offset.interval.ms"])
    assert (described.value, described.source) == ("30000", ConfigSource.GROUP_CONFIG)
    assert [(n, v, s) for n, v, s in described.synonyms] == [
        ("streams.task.offset.interval.ms", "30000", ConfigSource.GROUP_CONFIG),
        ("group.streams.task.offset.interval.ms", "60000", ConfigSource.DEFAULT_CONFIG)]
    assert service.describe(ResourceType.GROUP, "other", ["streams.acceptable.recovery.lag"]) == []
