"""Kafka's kafka-configs (ConfigCommand, from Kafka 4.4's jars) sets and shows client quotas on
kcoord, through AlterClientQuotas and DescribeClientQuotas, printing what it prints for Kafka."""

from __future__ import annotations

from pathlib import Path

from testkit.kafka import run_tool
from tests.conftest import BrokerFactory

CONFIGS = "org.apache.kafka.tools.ConfigCommand"


def test_kafka_configs_alters_and_describes_quotas(broker_factory: BrokerFactory, kafka_libs: Path) -> None:
    broker = broker_factory(start=False).start()
    entity = ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-default"]
    altered = run_tool(kafka_libs, CONFIGS, "--bootstrap-server", broker.bootstrap, "--alter", "--add-config",
                       "producer_byte_rate=1024,consumer_byte_rate=2048", *entity)
    assert (altered.returncode, altered.stdout.strip()) == (0, "Completed updating config for user alice."), \
        altered.stderr[-2000:]
    described = run_tool(kafka_libs, CONFIGS, "--bootstrap-server", broker.bootstrap, "--describe", *entity)
    assert described.stdout.strip() == ("Quota configs for user-principal 'alice', the default client-id are "
                                        "consumer_byte_rate=2048.0, producer_byte_rate=1024.0"), described.stderr[-2000:]
