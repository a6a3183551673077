"""A streams group's own configs set with Kafka's kafka-configs (ConfigCommand, Kafka 4.4's jars)
against kcoord: shown by --describe, refused out of range with Kafka's message, and in effect for
the group's members (the heartbeat interval they are told), not for another group's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kclient.wire_client import WireClient
from testkit.kafka import run_tool
from tests.differential.streams_ops import Member
from tests.integration.helpers.clients import create_topic

pytestmark = pytest.mark.timeout(120)

CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def test_kafka_configs_sets_a_streams_groups_own_heartbeat_interval(broker_factory: Any, kafka_libs: Path) -> None:
    broker = broker_factory({"group.streams.initial.rebalance.delay.ms": "0"})
    create_topic(broker.bootstrap, "lines", 2)
    base = ["--bootstrap-server", broker.bootstrap, "--entity-type", "groups", "--entity-name", "wc"]
    altered = run_tool(kafka_libs, CONFIGS, *base, "--alter", "--add-config",
                       "streams.heartbeat.interval.ms=7000,streams.num.standby.replicas=1", timeout=60)
    assert altered.returncode == 0, altered.stdout + altered.stderr
    refused = run_tool(kafka_libs, CONFIGS, *base, "--alter", "--add-config", "streams.num.standby.replicas=3",
                       timeout=60)
    assert "streams.num.standby.replicas must be less than or equal to 2" in refused.stdout + refused.stderr
    described = run_tool(kafka_libs, CONFIGS, *base, "--describe", timeout=60)
    assert "streams.heartbeat.interval.ms=7000" in described.stdout, described.stdout + described.stderr
    assert "streams.num.standby.replicas=1" in described.stdout

    with WireClient("127.0.0.1", broker.port) as c:
        own, other = Member(c, "wc", "lines", "a"), Member(c, "other", "lines", "a")
        assert own.heartbeat().heartbeat_interval_ms == 7000
        assert other.heartbeat().heartbeat_interval_ms == 5000  # the broker's group.streams.heartbeat.interval.ms
