"""What each node of `kcoord serve --nodes N` is told: ids, listeners, advertised listeners and
HTTP endpoints derived from the one configuration."""

from __future__ import annotations

import pytest

from broker.configs.node_config import PROPERTIES, BrokerConfig, ConfigError
from kcoord.launcher.layout import plan_nodes

HAS_CONSOLE = any(p.name == "console.listener" for p in PROPERTIES)


def config(*overrides: str) -> BrokerConfig:
    return BrokerConfig.load(None, list(overrides), environ={})


def test_first_node_keeps_the_configured_ports_and_the_others_follow() -> None:
    plans = plan_nodes(config("metrics.listener=http://:9464", "node.id=1"), 3)
    assert [p.node_id for p in plans] == [1, 2, 3]
    assert [p.listeners for p in plans] == [f"PLAINTEXT://127.0.0.1:{9092 + i}" for i in range(3)]
    assert [p.advertised_listeners for p in plans] == ["", "", ""]  # each follows its own listeners


def test_metrics_per_node_skip_the_console_port_which_only_the_first_node_serves() -> None:
    if not HAS_CONSOLE:
        pytest.skip("no console.listener property")
    plans = plan_nodes(config("metrics.listener=http://:9464", "console.listener=http://:9465"), 3)
    assert [p.metrics_listener for p in plans] == ["http://:9464", "http://:9466", "http://:9467"]
    assert [p.console_listener for p in plans] == ["http://:9465", "", ""]
    assert "console.listener=" in plans[1].overrides()
    # An https console stays one on the first node.
    https = plan_nodes(config("metrics.listener=http://:9464", "console.listener=https://:9465"), 2)
    assert [p.console_listener for p in https] == ["https://:9465", ""]
    with pytest.raises(ConfigError, match="expected http://host:port, got"):
        plan_nodes(config("metrics.listener=https://:9464"), 2)


def test_node_ids_start_at_the_configured_one() -> None:
    assert [p.node_id for p in plan_nodes(config("node.id=7"), 2)] == [7, 8]


def test_advertised_listeners_move_with_their_listener() -> None:
    plans = plan_nodes(config(
        "listeners=PLAINTEXT://0.0.0.0:9092,SASL_PLAINTEXT://0.0.0.0:9094",
        "advertised.listeners=PLAINTEXT://kafka.example:19092,SASL_PLAINTEXT://kafka.example:19094",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN", "metrics.listener="), 3)
    # PLAINTEXT's third node would take 9094, SASL_PLAINTEXT's configured port: it takes 9095.
    assert [p.listeners for p in plans] == [
        "PLAINTEXT://0.0.0.0:9092,SASL_PLAINTEXT://0.0.0.0:9094",
        "PLAINTEXT://0.0.0.0:9093,SASL_PLAINTEXT://0.0.0.0:9096",
        "PLAINTEXT://0.0.0.0:9095,SASL_PLAINTEXT://0.0.0.0:9097"]
    assert [p.advertised_listeners for p in plans] == [
        "PLAINTEXT://kafka.example:19092,SASL_PLAINTEXT://kafka.example:19094",
        "PLAINTEXT://kafka.example:19093,SASL_PLAINTEXT://kafka.example:19096",
        "PLAINTEXT://kafka.example:19095,SASL_PLAINTEXT://kafka.example:19097"]
    assert [p.metrics_listener for p in plans] == ["", "", ""]


def test_no_port_is_given_twice() -> None:
    plans = plan_nodes(config("listeners=PLAINTEXT://127.0.0.1:9463", "metrics.listener=http://127.0.0.1:9464"), 4)
    ports = [int(p.listeners.rsplit(":", 1)[1]) for p in plans] + \
        [int(p.metrics_listener.rsplit(":", 1)[1]) for p in plans]
    assert len(set(ports)) == len(ports)
    assert ports[0] == 9463 and ports[4] == 9464


def test_port_zero_stays_zero_and_ipv6_hosts_keep_their_brackets() -> None:
    plans = plan_nodes(config("listeners=PLAINTEXT://[::1]:0", "metrics.listener=http://[::1]:9470"), 2)
    assert [p.listeners for p in plans] == ["PLAINTEXT://[::1]:0", "PLAINTEXT://[::1]:0"]
    assert plans[1].metrics_listener == "http://[::1]:9471"


def test_ports_beyond_the_last_are_refused() -> None:
    with pytest.raises(ConfigError, match="no port left"):
        plan_nodes(config("listeners=PLAINTEXT://127.0.0.1:65535", "metrics.listener="), 2)


def test_a_node_is_told_every_property_it_owns() -> None:
    overrides = plan_nodes(config(), 2)[1].overrides()
    names = [o.split("=", 1)[0] for o in overrides]
    assert names[:4] == ["node.id", "listeners", "advertised.listeners", "metrics.listener"]
    assert "node.id=2" in overrides


def test_process_nodes_is_a_property_of_at_least_one() -> None:
    assert config().get_int("process.nodes") == 1
    assert BrokerConfig.load(None, [], environ={"KCOORD_PROCESS_NODES": "3"}).get_int("process.nodes") == 3
    with pytest.raises(ConfigError):
        config("process.nodes=0")
