"""Configs against Apache Kafka and kcoord: DescribeConfigs of a topic after IncrementalAlterConfigs
and AlterConfigs (values, sources, types, synonyms, flags), the errors of bad alters (codes and
messages), group configs, and ListConfigResources."""

from __future__ import annotations

from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.messages.alter_configs import AlterConfigsRequest
from protocol.messages.describe_configs import DescribeConfigsRequest
from protocol.messages.list_config_resources import ListConfigResourcesRequest
from tests.differential.config_ops import (
    APPEND,
    BROKER,
    DELETE,
    GROUP,
    SET,
    SUBTRACT,
    TOPIC,
    incremental,
    settle,
)
from tests.differential.harness import Pair, Target, unique
from tests.differential.ops import create_topic

pytestmark = pytest.mark.differential

# The topic configs whose defaults come from broker properties both brokers leave alone (the
# reference Kafka's storage format sets min.insync.replicas; Kafka names no synonym for a few
# whose broker property has no default, such as log.roll.ms: kcoord names log.retention.ms).
COMPARED = ("cleanup.policy", "compression.type", "delete.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
            "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "retention.bytes",
            "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms", "index.interval.bytes",
            "preallocate", "file.delete.delay.ms", "unclean.leader.election.enable", "flush.messages", "flush.ms",
            "max.message.bytes", "local.retention.ms", "remote.storage.enable")




def replace(c: WireClient, kind: int, name: str, configs: dict[str, str]) -> list[dict[str, Any]]:
    Resource = AlterConfigsRequest.Resource
    answer = c.call(33, 2, AlterConfigsRequest(resources=[Resource(
        resource_type=kind, resource_name=name, configs=[Resource.AlterableConfig(name=k, value=v)
                                                         for k, v in configs.items()])], validate_only=False))
    return [{"code": r.error_code, "message": r.error_message} for r in answer.responses]




def describe(c: WireClient, kind: int, name: str, keys: list[str] | None = None) -> object:
    answer = c.call(32, 4, DescribeConfigsRequest(resources=[DescribeConfigsRequest.Resource(
        resource_type=kind, resource_name=name, configuration_keys=keys)], include_synonyms=True,
        include_documentation=False))
    result = answer.results[0]
    return {"code": result.error_code, "configs": sorted(
        (e.name, e.value, e.read_only, e.config_source, e.is_sensitive, e.config_type,
         [(s.name, s.value, s.source) for s in e.synonyms]) for e in result.configs)}


def test_topic_configs_after_alters(pair: Pair) -> None:
    topic = unique("diff-configs")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic)
        steps: dict[str, object] = {"created": describe(c, TOPIC, topic, list(COMPARED))}
        steps["set"] = incremental(c, TOPIC, topic, ("cleanup.policy", SET, "compact"), ("segment.bytes", SET, "2000000"),
                                   ("min.cleanable.dirty.ratio", SET, "0.25"), ("max.message.bytes", SET, "5000"))
        steps["append"] = incremental(c, TOPIC, topic, ("cleanup.policy", APPEND, "delete"))
        steps["validate_only"] = incremental(c, TOPIC, topic, ("segment.ms", SET, "1000"), validate_only=True)
        settle(t)
        steps["after"] = describe(c, TOPIC, topic, list(COMPARED))
        steps["subtract_delete"] = incremental(c, TOPIC, topic, ("cleanup.policy", SUBTRACT, "compact"),
                                               ("max.message.bytes", DELETE, None))
        settle(t)
        steps["after_subtract"] = describe(c, TOPIC, topic, list(COMPARED))
        steps["replace"] = replace(c, TOPIC, topic, {"segment.ms": "100000"})
        settle(t)
        steps["after_replace"] = describe(c, TOPIC, topic, list(COMPARED))
        steps["names"] = sorted(str(e[0]) for e in describe(c, TOPIC, topic)["configs"])  # type: ignore[index]
        # An empty list of keys asks for every config, as null does.
        steps["empty_keys"] = sorted(str(e[0]) for e in describe(c, TOPIC, topic, [])["configs"])  # type: ignore[index]
        return steps

    answers = pair.compare(scenario)
    assert answers["set"] == [{"code": 0, "message": None, "type": TOPIC}]  # type: ignore[index]


@pytest.mark.parametrize("ops", [
    [("no.such.config", SET, "1")],
    [("retention.ms", SET, "soon")],
    [("cleanup.policy", SET, "forever")],
    [("segment.bytes", SET, "10")],
    [("retention.ms", APPEND, "5")],
    [("retention.ms", SET, None)],
    [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)],
    [("min.cleanable.dirty.ratio", SET, "1.5")],
    [("message.timestamp.type", SET, "Now")],
    [("max.message.bytes", SET, "-1")],
])
def test_bad_topic_alters(pair: Pair, ops: list[tuple[str, int, str | None]]) -> None:
    topic = unique("diff-configs-bad")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, topic)
        return {"answer": incremental(c, TOPIC, topic, *ops), "unknown": incremental(c, TOPIC, unique("none"), *ops)}

    answers = pair.compare(scenario)
    assert answers["answer"][0]["code"] != 0  # type: ignore[index]


@pytest.mark.parametrize(("kind", "name", "ops"), [
    (BROKER, "1", [("node.id", SET, "5")]),
    (BROKER, "7", [("log.retention.ms", SET, "5")]),
    (BROKER, "abc", [("log.retention.ms", SET, "5")]),
    (BROKER, "", [("log.segment.bytes", SET, "abc")]),
    (BROKER, "", [("max.connections.per.ip.overrides", SET, "127.0.0.1")]),
    (BROKER, "", [("max.connections.per.ip.overrides", SET, "127.0.0.1:x")]),
    (BROKER, "", [("max.connections.per.ip", SET, "-1")]),
    (BROKER, "", [("max.connections", SET, "abc")]),
    (GROUP, "diff-group", [("consumer.session.timeout.ms", SET, "5")]),
    (GROUP, "diff-group", [("consumer.heartbeat.interval.ms", SET, "60000")]),
    (GROUP, "diff-group", [("no.such.config", SET, "5")]),
    (9, "x", [("a", SET, "1")]),
])
def test_bad_broker_and_group_alters(pair: Pair, kind: int, name: str, ops: list[tuple[str, int, str | None]]) -> None:
    pair.compare(lambda t: incremental(t.client(), kind, name, *ops))


def test_group_configs_and_list_config_resources(pair: Pair) -> None:
    group = unique("diff-config-group")

    def scenario(t: Target) -> object:
        c = t.client()
        steps: dict[str, object] = {
            "set": incremental(c, GROUP, group, ("consumer.session.timeout.ms", SET, "50000"),
                               ("consumer.heartbeat.interval.ms", SET, "6000"))}
        settle(t)
        steps |= {
            "described": describe(c, GROUP, group, ["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"]),
            "never_set": describe(c, GROUP, unique("diff-config-none"), ["consumer.session.timeout.ms"]),
        }
        settle(t)
        listed = c.call(74, 1, ListConfigResourcesRequest(resource_types=[GROUP]))
        steps["listed"] = (listed.error_code, [(r.resource_name, r.resource_type) for r in listed.config_resources
                                               if r.resource_name == group])
        v0 = c.call(74, 0, ListConfigResourcesRequest())
        # v0 lists client-metrics subscriptions: those other scenarios left on the shared Kafka are not compared.
        steps["v0"] = (v0.error_code, [r.resource_name for r in v0.config_resources
                                       if r.resource_name.startswith("diff-config")])
        brokers = c.call(74, 1, ListConfigResourcesRequest(resource_types=[BROKER]))
        steps["brokers"] = (brokers.error_code, [r.resource_type for r in brokers.config_resources])
        steps["replace"] = replace(c, GROUP, group, {"consumer.heartbeat.interval.ms": "7000"})
        settle(t)
        steps["after_replace"] = describe(c, GROUP, group, ["consumer.session.timeout.ms",
                                                            "consumer.heartbeat.interval.ms"])
        return steps

    answers = pair.compare(scenario)
    assert answers["listed"] == [0, [[group, GROUP]]]  # type: ignore[index]


def test_broker_logger(pair: Pair) -> None:
    """The broker's root logger: its level changed and described, and the changes refused."""
    def scenario(t: Target) -> object:
        c = t.client()
        before = describe(c, 8, "1", ["root"])["configs"][0][1]  # type: ignore[index]
        steps: dict[str, object] = {"set": incremental(c, 8, "1", ("root", SET, "DEBUG"))}
        settle(t)
        steps["described"] = describe(c, 8, "1", ["root"])
        for key, ops in (("bad", ("root", SET, "LOUD")), ("lower_case", ("root", SET, "debug")),
                         ("unknown_logger", ("no.such.logger", SET, "INFO")), ("append", ("root", APPEND, "INFO")),
                         ("delete_root", ("root", DELETE, None))):
            steps[key] = incremental(c, 8, "1", ops)
        steps["cluster_default"] = incremental(c, 8, "", ("root", SET, "INFO"))
        steps["other_node"] = incremental(c, 8, "7", ("root", SET, "INFO"))
        steps["whole_set"] = replace(c, 8, "1", {"root": "INFO"})
        steps["restored"] = incremental(c, 8, "1", ("root", SET, str(before)))
        listed = c.call(74, 1, ListConfigResourcesRequest(resource_types=[8]))
        steps["listed"] = (listed.error_code, [r.resource_type for r in listed.config_resources])
        return steps

    answers = pair.compare(scenario)
    assert answers["described"]["configs"][0][1] == "DEBUG"  # type: ignore[index]


CLIENT_METRICS = 16


def test_client_metrics_subscription(pair: Pair) -> None:
    """A client-metrics subscription (KIP-714) set, described, listed and refused bad values as Kafka does."""
    name = unique("diff-config-metrics")

    def scenario(t: Target) -> object:
        c = t.client()
        steps: dict[str, object] = {
            "set": incremental(c, CLIENT_METRICS, name, ("metrics", SET, "org.apache.kafka.producer."),
                               ("interval.ms", SET, "1000")),
            "bad_interval": incremental(c, CLIENT_METRICS, name, ("interval.ms", SET, "5")),
            "unknown": incremental(c, CLIENT_METRICS, name, ("no.such.config", SET, "1")),
        }
        settle(t)
        steps["described"] = describe(c, CLIENT_METRICS, name)
        listed = c.call(74, 1, ListConfigResourcesRequest(resource_types=[CLIENT_METRICS]))
        steps["listed"] = (listed.error_code, [(r.resource_name, r.resource_type) for r in listed.config_resources
                                               if r.resource_name == name])
        return steps

    answers = pair.compare(scenario)
    assert answers["listed"] == [0, [[name, CLIENT_METRICS]]]  # type: ignore[index]


STREAMS_GROUP_CONFIGS = ["streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
                         "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms",
                         "streams.rack.aware.assignment.tags", "streams.assignor.name",
                         "streams.assignor.offload.enable", "streams.task.offset.interval.ms",
                         "streams.num.warmup.replicas", "streams.acceptable.recovery.lag"]


@pytest.mark.parametrize("ops", [
    [("streams.num.standby.replicas", SET, "3")],
    [("streams.num.standby.replicas", SET, "-1")],
    [("streams.session.timeout.ms", SET, "10000")],
    [("streams.heartbeat.interval.ms", SET, "20000")],
    [("streams.session.timeout.ms", SET, "50000"), ("streams.heartbeat.interval.ms", SET, "50000")],
    [("streams.initial.rebalance.delay.ms", SET, "-1")],
    [("streams.task.offset.interval.ms", SET, "0")],
    [("streams.task.offset.interval.ms", SET, "1000")],
    [("streams.num.warmup.replicas", SET, "-1")],
    [("streams.num.warmup.replicas", SET, "21")],
    [("streams.acceptable.recovery.lag", SET, "-1")],
    [("streams.assignor.offload.enable", SET, "maybe")],
    [("streams.rack.aware.assignment.tags", SET, "zone,zone")],
])
def test_bad_streams_group_configs(pair: Pair, ops: list[tuple[str, int, str | None]]) -> None:
    pair.compare(lambda t: incremental(t.client(), GROUP, unique("diff-streams-config"), *ops))


def test_streams_group_configs(pair: Pair) -> None:
    """A streams group's own configs, set and described with their broker synonyms."""
    group = unique("diff-streams-config")

    def scenario(t: Target) -> object:
        c = t.client()
        steps: dict[str, object] = {
            "set": incremental(c, GROUP, group, ("streams.session.timeout.ms", SET, "50000"),
                               ("streams.heartbeat.interval.ms", SET, "6000"),
                               ("streams.num.standby.replicas", SET, "1"))}
        settle(t)
        steps["described"] = describe(c, GROUP, group, STREAMS_GROUP_CONFIGS)
        steps["never_set"] = describe(c, GROUP, unique("diff-streams-none"), STREAMS_GROUP_CONFIGS)
        return steps

    pair.compare(scenario)


@pytest.mark.parametrize("kind", ["consumer", "share"])
def test_assignor_offload_configs_are_internal(pair: Pair, kind: str) -> None:
    """Kafka 4.4's ``consumer.`` and ``share.assignor.offload.enable`` (internal, not acted on yet):
    a bad value refused, a good one accepted and described only once a group sets it."""
    name, group = f"{kind}.assignor.offload.enable", unique(f"diff-{kind}-offload")

    def scenario(t: Target) -> object:
        c = t.client()
        steps: dict[str, object] = {
            "bad": incremental(c, GROUP, group, (name, SET, "maybe")),
            "described_before": describe(c, GROUP, group, None),
            "asked_by_name": describe(c, GROUP, group, [name]),
            "set": incremental(c, GROUP, group, (name, SET, "false"))}
        settle(t)
        steps["described"] = describe(c, GROUP, group, None)
        return steps

    answers = pair.compare(scenario)
    assert [r["code"] for r in answers["set"]] == [0]  # type: ignore[index, union-attr]
    assert [r["code"] for r in answers["bad"]] != [0]  # type: ignore[index, union-attr]


def test_streams_group_internal_configs_are_described_when_set_and_told_to_members(pair: Pair) -> None:
    """Kafka 4.4's internal streams group configs (task offset interval, acceptable recovery lag,
    warm-up replicas, assignor offloading): accepted, described only once a group sets them, and the
    first two told to the group's members in StreamsGroupHeartbeat."""
    from tests.differential.streams_ops import Member as StreamsMember

    group, source = unique("diff-streams-internal"), unique("diff-streams-internal-src")

    def scenario(t: Target) -> object:
        c = t.client()
        create_topic(c, source, 2)
        member = StreamsMember(c, group, source, "a")
        before = member.heartbeat()
        steps: dict[str, object] = {
            "before": (before.error_code, before.task_offset_interval_ms, before.acceptable_recovery_lag),
            "described_before": describe(c, GROUP, group, None),
            "set": incremental(c, GROUP, group, ("streams.task.offset.interval.ms", SET, "30000"),
                               ("streams.acceptable.recovery.lag", SET, "5000"),
                               ("streams.num.warmup.replicas", SET, "1"),
                               ("streams.assignor.offload.enable", SET, "false"))}
        settle(t)
        steps["described"] = describe(c, GROUP, group, None)
        steps["asked_by_name"] = describe(c, GROUP, unique("diff-streams-none"), STREAMS_GROUP_CONFIGS)
        after = member.heartbeat()
        steps["after"] = (after.error_code, after.task_offset_interval_ms, after.acceptable_recovery_lag)
        return steps

    answers = pair.compare(scenario)
    assert answers["after"] == [0, 30000, 5000]  # type: ignore[index]


def test_connection_limit_configs(pair: Pair) -> None:
    """max.connections, max.connections.per.ip and its overrides: dynamic at the cluster-wide default,
    described with their source, type and synonyms, and deleted again."""
    names = ["max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"]

    def scenario(t: Target) -> object:
        c = t.client()
        steps: dict[str, object] = {"before": describe(c, BROKER, "1", names)}
        try:
            steps["set"] = incremental(c, BROKER, "", ("max.connections", SET, "5000"),
                                       ("max.connections.per.ip", SET, "4000"),
                                       ("max.connections.per.ip.overrides", SET, "127.0.0.2:7"))
            settle(t)
            steps["after"] = describe(c, BROKER, "1", names)
            steps["default"] = describe(c, BROKER, "", names)
        finally:
            steps["deleted"] = incremental(c, BROKER, "", *((name, DELETE, None) for name in names))
        settle(t)
        steps["again"] = describe(c, BROKER, "1", names)
        return steps

    answers = pair.compare(scenario)
    assert answers["set"] == [{"code": 0, "message": None, "type": BROKER}]  # type: ignore[index]
