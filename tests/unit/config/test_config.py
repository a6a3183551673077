from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import PROPERTIES, BrokerConfig, ConfigError, render_example_toml, render_markdown_table

ROOT = Path(__file__).resolve().parents[3]


def test_defaults_are_kafkas() -> None:
    c = BrokerConfig.load(environ={})
    assert c["offsets.topic.num.partitions"] == 50
    assert c["group.initial.rebalance.delay.ms"] == 3000
    assert c["group.min.session.timeout.ms"] == 6000
    assert c["socket.request.max.bytes"] == 104857600
    assert (c.listener.host, c.listener.port) == ("127.0.0.1", 9092)


def test_precedence_override_beats_env_beats_file(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# comment\nnode.id=3\ngroup.max.size=10\noffsets.retention.minutes: 60\n")
    env = {"KCOORD_GROUP_MAX_SIZE": "20", "KCOORD_NODE_ID": "4", "UNRELATED": "x"}
    c = BrokerConfig.load(props, ["node.id=5"], environ=env)
    assert c["node.id"] == 5
    assert c["group.max.size"] == 20
    assert c["offsets.retention.minutes"] == 60


def test_toml_file_with_tables_and_dotted_keys(tmp_path: Path) -> None:
    f = tmp_path / "k.toml"
    f.write_text('"node.id" = 7\n[group]\n"initial.rebalance.delay.ms" = 0\n')
    c = BrokerConfig.load(f, environ={})
    assert c["node.id"] == 7 and c["group.initial.rebalance.delay.ms"] == 0


@pytest.mark.parametrize(
    ("overrides", "env", "needle"),
    [
        (["no.such.property=1"], {}, "no.such.property"),
        (["group.max.size=lots"], {}, "group.max.size"),
        ([], {"KCOORD_NOPE": "1"}, "KCOORD_NOPE"),
        (["log.flush.policy=sometimes"], {}, "log.flush.policy"),
        (["node.id"], {}, "name=value"),
        (["listeners=SSL://h:1"], {}, "ssl.keystore.location"),
        (["listeners=INTERNAL://h:1"], {}, "listener.security.protocol.map"),
        (["sasl.enabled.mechanisms=GSSAPI"], {}, "sasl.enabled.mechanisms"),
        (["authorizer.class.name=x.Y"], {}, "authorizer.class.name"),
        (["auto.create.topics.enable=maybe"], {}, "auto.create.topics.enable"),
        (["log.dirs="], {}, "log.dirs"),
        ([], {"KCOORD_LOG_DIRS": "  "}, "log.dirs"),
        (["log.dirs=,/var/lib/kcoord"], {}, "log.dirs"),
    ],
)
def test_bad_properties_are_startup_errors_naming_them(overrides: list[str], env: dict[str, str],
                                                        needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        BrokerConfig.load(None, overrides, environ=env)


def test_example_toml_is_current_and_loads(tmp_path: Path) -> None:
    example = ROOT / "deploy" / "kcoord.example.toml"
    assert example.read_text().strip() == render_example_toml().strip(), "regenerate: kcoord config"
    c = BrokerConfig.load(example, environ={})
    assert all(c[p.name] == p.default for p in PROPERTIES)


def test_readme_documents_every_property() -> None:
    readme = (ROOT / "README.md").read_text()
    for row in render_markdown_table().splitlines()[2:]:
        assert row in readme, f"README config table is stale: {row}"


def test_metrics_listen_where_the_broker_listens_by_default() -> None:
    from broker.observability.metrics_http import parse_metrics_listener

    default = BrokerConfig.load(None, [], environ={})
    assert parse_metrics_listener(default["metrics.listener"], default.listener.host) == ("127.0.0.1", 9464)
    everywhere = BrokerConfig.load(None, ["listeners=PLAINTEXT://0.0.0.0:9092"], environ={})
    assert parse_metrics_listener(everywhere["metrics.listener"], everywhere.listener.host) == ("0.0.0.0", 9464)
    explicit = BrokerConfig.load(None, ["metrics.listener=http://10.1.2.3:9999"], environ={})
    assert parse_metrics_listener(explicit["metrics.listener"], explicit.listener.host) == ("10.1.2.3", 9999)
