"""The container image, compose cluster and Prometheus files are valid for the tools that read them,
and the alert rules only ask for metrics the broker exposes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broker.configs.node_config import BrokerConfig

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

pytestmark = pytest.mark.timeout(120)

# Every series the broker exposes that alert rules may use, with its labels. Histograms are
# listed by family name; their _bucket/_sum/_count series are derived below.
BROKER_METRICS: dict[str, set[str]] = {
    "kcoord_offset_commits_total": set(),
    "kcoord_groups": {"state"},
    "kcoord_rebalances_total": {"reason"},
    "kcoord_shards_loading": set(),
    "kcoord_requests_total": {"api", "version"},
    "kcoord_request_errors_total": {"api", "error"},
    "kcoord_cluster_lease_failures_total": set(),
    "kcoord_connections": set(),
    "kcoord_connections_opened_total": set(),
    "kcoord_connections_max": set(),
    "kcoord_received_bytes_total": set(),
    "kcoord_sent_bytes_total": set(),
    "kcoord_group_members": set(),
    "kcoord_consumer_group_members": set(),
    "kcoord_share_group_members": set(),
    "kcoord_group_events_total": set(),
    "kafka_consumergroup_lag": {"consumergroup", "topic", "partition"},
    "kafka_consumergroup_group_lag_seconds": {"group", "topic", "partition"},
    "kcoord_share_records_in_flight": {"group", "state"},
    "kcoord_share_group_lag": {"group", "topic", "partition"},
    "kcoord_share_redeliveries": {"group"},
    "kcoord_transactions_committed_total": set(),
    "kcoord_transactions_aborted_total": set(),
}
BROKER_HISTOGRAMS: dict[str, set[str]] = {
    "kcoord_log_flush_seconds": set(),
    "kcoord_request_duration_seconds": {"api"},
    "kcoord_rebalance_duration_seconds": set(),
}
# Added by Prometheus to every scraped series, plus its own scrape-health series.
TARGET_LABELS = {"job", "instance"}
PROMETHEUS_SERIES: dict[str, set[str]] = {"up": set()}


def known_series() -> dict[str, set[str]]:
    series = {name: labels | TARGET_LABELS for name, labels in {**BROKER_METRICS, **PROMETHEUS_SERIES}.items()}
    for name, labels in BROKER_HISTOGRAMS.items():
        series[f"{name}_bucket"] = labels | TARGET_LABELS | {"le"}
        series[f"{name}_sum"] = labels | TARGET_LABELS
        series[f"{name}_count"] = labels | TARGET_LABELS
    return series


def tool(name: str) -> str:
    """The tool from this interpreter's environment first (pip-installed linters), then PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=90, check=False)


def load_yaml(path: Path) -> Any:
    yaml = pytest.importorskip("ruamel.yaml")
    return yaml.YAML(typ="safe").load(path.read_text())


# ---- PromQL: which series does an expression select? ------------------------------------------

_TOKEN = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
      | (?P<matchers>\{(?:[^}"']|"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')*\})
      | (?P<range>\[[^\]]*\])
      | (?P<number>\d[\w.]*)
      | (?P<ident>[A-Za-z_:][\w:]*)
      | (?P<paren>\()
      | (?P<other>\S)""",
    re.VERBOSE,
)
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan",
             # aggregation operators, which may be followed by `by (...)` instead of their argument
             "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
             "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
_MATCHER_LABEL = re.compile(r"""([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")


def selectors(expr: str) -> tuple[list[tuple[str, set[str]]], set[str]]:
    """(metric name, labels matched on) for every vector selector, and every grouping label."""
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(expr)]
    found: list[tuple[str, set[str]]] = []
    grouping: set[str] = set()
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else (None, "")
        if kind == "ident" and text.lower() in _GROUPING:
            if following[0] == "paren":
                close = next(j for j in range(i + 2, len(tokens)) if tokens[j][1] == ")")
                grouping |= {t for k, t in tokens[i + 2:close] if k == "ident"}
                i = close
        elif kind == "ident" and (following[0] == "paren" or text.lower() in _KEYWORDS):
            pass  # a function call or an operator
        elif kind == "ident":
            labels: set[str] = set()
            if following[0] == "matchers":
                labels = set(_MATCHER_LABEL.findall(following[1]))
                i += 1
            found.append((text, labels))
        elif kind == "matchers":
            raise AssertionError(f"selector without a metric name in {expr!r}: name series explicitly")
        i += 1
    return found, grouping


def test_selector_parser_reads_promql() -> None:
    found, grouping = selectors(
        'sum by (instance, le) (rate(x_bucket{job="a", le=~"0.1|+Inf"}[5m] offset 1h)) / '
        'ignoring(le) group_left count(up) > bool 0.5 and on(instance) absent(y{z!="}"})'
    )
    assert found == [("x_bucket", {"job", "le"}), ("up", set()), ("y", {"z"})]
    assert grouping == {"instance", "le"}


# ---- Dockerfile -----------------------------------------------------------------------------


def test_dockerfile_is_hadolint_clean() -> None:
    result = run(tool("hadolint"), "--failure-threshold", "warning", "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_builds_broker_and_analysis_images_from_one_base() -> None:
    dockerfile_parse = pytest.importorskip("dockerfile_parse")
    parser = dockerfile_parse.DockerfileParser(path=str(ROOT / "Dockerfile"))
    stages: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for instruction in parser.structure:
        if instruction["instruction"] == "FROM":
            current = []
            stages[instruction["value"].split()[-1]] = current
        current.append(instruction)

    # A plain build gives the broker; the analysis image is a separate target.
    assert list(stages)[-1] == "runtime"
    assert {"builder", "analysis", "runtime"} <= set(stages)
    assert 'ARG BASE=python:3.11-slim' in parser.content
    assert all(s[0]["value"].split()[0] in {"${BASE}", *stages} for s in stages.values())

    def values(stage: str, name: str) -> list[str]:
        return [i["value"] for i in stages[stage] if i["instruction"] == name]

    runtime_text = "\n".join(i["content"] for i in stages["runtime"])
    runtime_base = values("runtime", "FROM")[0].split()[0]
    runtime_text += "\n".join(i["content"] for i in stages.get(runtime_base, []))
    assert not re.search(r"pyspark|analysis|jre|java", runtime_text, re.IGNORECASE), "the broker image has no Spark"
    assert values("runtime", "USER") == ["10001"]
    assert values("runtime", "EXPOSE") == ["9092 9464"]
    assert values("runtime", "VOLUME") == ["/var/lib/kcoord"]
    assert values("runtime", "ENTRYPOINT") == ['["kcoord"]']
    assert values("runtime", "CMD") == ['["serve"]']
    (health,) = values("runtime", "HEALTHCHECK")
    assert 'CMD ["kcoord", "health", "--bootstrap", "127.0.0.1:9092"]' in health
    for default in ("KCOORD_LISTENERS=PLAINTEXT://0.0.0.0:9092",
                    "KCOORD_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092",
                    "KCOORD_LOG_DIRS=/var/lib/kcoord",
                    # Published ports need every interface; outside the image metrics stay on loopback.
                    "KCOORD_METRICS_LISTENER=http://0.0.0.0:9464"):
        assert re.search(rf"^ENV\b[^\n]*(\\\n[^\n]*)*\b{re.escape(default)}\b", runtime_text, re.MULTILINE), default

    analysis_text = "\n".join(i["content"] for i in stages["analysis"])
    assert "default-jre-headless" in analysis_text
    assert values("analysis", "USER") == ["10001"]
    assert values("analysis", "CMD") == ['["analyze", "--data-dir", "/var/lib/kcoord", "--out", "/reports"]']


def test_dockerignore_keeps_the_context_to_the_sources() -> None:
    lines = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()]
    rules = [ln for ln in lines if ln and not ln.startswith("#")]
    assert rules[0] == "*"
    for needed in ("pyproject.toml", "protocol/", "storage/", "broker/", "analytics/", "doctor/", "kclient/"):
        assert f"!{needed}" in rules


# ---- docker-compose.yml ---------------------------------------------------------------------


def test_compose_file_is_valid_for_docker_compose() -> None:
    result = run(tool("docker-compose"), "-f", "docker-compose.yml", "config", "-q")
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_file_matches_the_compose_spec() -> None:
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", "docker-compose.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_cluster_wires_broker_prometheus_grafana_and_analysis() -> None:
    compose = load_yaml(ROOT / "docker-compose.yml")
    services = compose["services"]

    # Three nodes on one shared data volume, joined through etcd, each advertising its own port.
    assert services["etcd"]["image"].startswith("quay.io/coreos/etcd:v3.4")
    nodes = [services[f"kcoord-{n}"] for n in (1, 2, 3)]
    for n, kcoord in enumerate(nodes, 1):
        env = kcoord["environment"]
        assert kcoord["build"]["target"] == "runtime"
        assert env["KCOORD_NODE_ID"] == str(n)
        assert env["KCOORD_ETCD_ENDPOINTS"] == "http://etcd:2379"
        port = 9091 + n
        assert env["KCOORD_ADVERTISED_LISTENERS"] == f"PLAINTEXT://localhost:{port},SASL_SSL://localhost:{port + 10000}"
        assert {f"{port}:{port}", f"{port + 10000}:{port + 10000}", f"{9463 + n}:9464"} <= set(kcoord["ports"])
        # The SASL_SSL listener: a keystore made by tls-init and a bootstrap SCRAM user; the
        # broker's own configuration check accepts the node's settings.
        assert env["KCOORD_SSL_KEYSTORE_LOCATION"].startswith("/etc/kcoord/tls/")
        assert "kcoord-tls:/etc/kcoord/tls:ro" in kcoord["volumes"]
        settings = {k: str(v) for k, v in env.items() if k.startswith("KCOORD_")}
        config = BrokerConfig.load(None, environ=settings)
        assert [(spec.name, spec.protocol) for spec in config.listeners] == [("PLAINTEXT", "PLAINTEXT"),
                                                                              ("SASL_SSL", "SASL_SSL")]
        assert kcoord["depends_on"]["tls-init"]["condition"] == "service_completed_successfully"
        assert "kcoord-data:/var/lib/kcoord" in kcoord["volumes"]
        assert kcoord["healthcheck"]["test"] == ["CMD", "kcoord", "health", "--bootstrap", f"127.0.0.1:{port}"]
    assert len({kcoord["environment"]["KCOORD_CLUSTER_ID"] for kcoord in nodes}) == 1

    prometheus = services["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:")
    mounts = {m.split(":")[0]: m.split(":")[1] for m in prometheus["volumes"]}
    config_in_container = mounts["./deploy/prometheus.yml"]
    # rule_files are relative to the config file, so the rules must sit next to it.
    rules = load_yaml(DEPLOY / "prometheus.yml")["rule_files"]
    for rule_file in rules:
        assert mounts[f"./deploy/{rule_file}"] == str(Path(config_in_container).parent / rule_file)

    # Grafana: Prometheus as its default data source and the dashboard loaded at start.
    grafana = services["grafana"]
    assert grafana["image"].startswith("grafana/grafana-oss:")
    mounts = {m.split(":")[0]: m.split(":")[1] for m in grafana["volumes"]}
    assert mounts["./deploy/grafana/datasources"] == "/etc/grafana/provisioning/datasources"
    assert mounts["./deploy/grafana/dashboards"] == "/etc/grafana/provisioning/dashboards"
    (source,) = load_yaml(DEPLOY / "grafana" / "datasources" / "prometheus.yml")["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    assert source["url"] == f"http://prometheus:{prometheus['ports'][0].split(':')[1]}"
    (provider,) = load_yaml(DEPLOY / "grafana" / "dashboards" / "kcoord.yml")["providers"]
    dashboard_in_container = mounts["./deploy/grafana-dashboard.json"]
    assert Path(dashboard_in_container).parent == Path(provider["options"]["path"])
    assert grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == dashboard_in_container

    analysis = services["analysis"]
    assert analysis["profiles"] == ["analysis"]
    assert analysis["build"]["target"] == "analysis"
    assert "kcoord-data:/var/lib/kcoord:ro" in analysis["volumes"]
    assert any(v.startswith("kcoord-reports:") for v in analysis["volumes"])
    assert {"kcoord-data", "kcoord-reports", "kcoord-tls"} <= set(compose["volumes"])


# ---- Prometheus -----------------------------------------------------------------------------


def test_prometheus_config_is_valid_and_scrapes_the_broker() -> None:
    result = run(tool("promtool"), "check", "config", "deploy/prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    config = load_yaml(DEPLOY / "prometheus.yml")
    targets = [t for job in config["scrape_configs"] if job["job_name"] == "kcoord"
               for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == ["kcoord-1:9464", "kcoord-2:9464", "kcoord-3:9464"]


def test_alert_rules_are_valid() -> None:
    result = run(tool("promtool"), "check", "rules", "deploy/alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_alerts_fire_on_the_situations_they_describe() -> None:
    result = run(tool("promtool"), "test", "rules", "deploy/alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def alert_rules() -> list[dict[str, Any]]:
    groups = load_yaml(DEPLOY / "alerts.yml")["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_alert_rules_cover_the_operational_failures() -> None:
    names = {rule["alert"] for rule in alert_rules()}
    assert {"KcoordBrokerDown", "KcoordShardNotLoaded", "KcoordRebalanceStorm", "KcoordGroupStuckRebalancing",
            "KcoordLogFlushSlow", "KcoordOffsetCommitErrors"} <= names
    for rule in alert_rules():
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]


def test_alert_rules_only_use_metrics_the_broker_exposes() -> None:
    known = known_series()
    all_labels = set().union(*known.values())
    for rule in alert_rules():
        found, grouping = selectors(rule["expr"])
        assert found, f"{rule['alert']}: no series selected"
        for name, labels in found:
            assert name in known, f"{rule['alert']}: unknown metric {name}"
            assert labels <= known[name], f"{rule['alert']}: {name} has no labels {labels - known[name]}"
        assert grouping <= all_labels, f"{rule['alert']}: grouping by unknown labels {grouping - all_labels}"


def test_dashboard_only_uses_metrics_the_broker_exposes() -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    known = known_series()
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(exprs) >= 8
    for expr in exprs:
        found, _ = selectors(expr)
        assert found, expr
        for name, labels in found:
            assert name in known, f"unknown metric {name} in {expr!r}"
            assert labels <= known[name], f"{name} has no labels {labels - known[name]}"
    titles = [panel["title"] for panel in dashboard["panels"]]
    assert len(titles) == len(set(titles))
