"""A real Prometheus, configured like deploy/prometheus.yml with the deploy alert rules, scrapes a
running kcoord: the series a user queries carry the values real clients caused, and the alert
rules evaluate cleanly without firing on a healthy broker."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from testkit.kcoord import ROOT, BrokerProcess
from testkit.ports import free_port
from tests.integration.helpers.clients import ThreadedConsumer, create_topic, wait_for

pytestmark = pytest.mark.timeout(180)

PROMETHEUS = "/usr/bin/prometheus"


@dataclass
class Prometheus:
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> dict[str, float]:
        """Instant query; each series' value keyed by its labels (without name, job, instance)."""
        data = self.api("query", query=expr)
        out = {}
        for series in data["result"]:
            labels = {k: v for k, v in series["metric"].items() if k not in ("__name__", "job", "instance")}
            out[",".join(f"{k}={v}" for k, v in sorted(labels.items()))] = float(series["value"][1])
        return out

    def wait_value(self, expr: str, expected: float, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last: dict[str, float] = {}
        while time.monotonic() < deadline:
            last = self.query(expr)
            if list(last.values()) == [expected]:
                return
            time.sleep(0.25)
        raise AssertionError(f"{expr}: expected one series = {expected}, Prometheus has {last}\n{self.log()}")

    def wait(self, check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.log()}")
            time.sleep(0.25)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def _config(broker: BrokerProcess, own_port: int, tmp_path: Path) -> Path:
    """deploy/prometheus.yml as compose runs it, with targets on loopback and a 1 s cadence."""
    yaml = pytest.importorskip("ruamel.yaml")
    config = yaml.YAML(typ="safe").load((ROOT / "deploy" / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s", scrape_timeout="1s")
    targets = {"kcoord": f"127.0.0.1:{broker.metrics_port}", "prometheus": f"127.0.0.1:{own_port}"}
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [targets[job["job_name"]]]}]
    for rules in config.get("rule_files", []):
        shutil.copy(ROOT / "deploy" / rules, tmp_path / rules)
    path = tmp_path / "prometheus.yml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


@pytest.fixture
def prometheus(broker: BrokerProcess, tmp_path: Path) -> Iterator[Prometheus]:
    if not Path(PROMETHEUS).exists():
        pytest.skip(f"{PROMETHEUS} is not installed (Debian package prometheus)")
    port = free_port()
    config = _config(broker, port, tmp_path)
    log_path = tmp_path / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    prom = Prometheus(port, proc, log_path)

    def ready() -> bool:
        assert proc.poll() is None, f"prometheus exited with {proc.returncode}:\n{prom.log()}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, ConnectionError):
            return False

    try:
        prom.wait(ready, "Prometheus to be ready")
        yield prom
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_prometheus_sees_the_commits_and_groups_real_clients_made(broker: BrokerProcess,
                                                                  prometheus: Prometheus) -> None:
    prom = prometheus

    def target_up() -> bool:
        targets = prom.api("targets")["activeTargets"]
        kcoord = [t for t in targets if t["labels"]["job"] == "kcoord"]
        return len(kcoord) == 1 and kcoord[0]["health"] == "up" and kcoord[0]["lastError"] == ""

    prom.wait(target_up, "the kcoord target to be scraped")
    prom.wait_value('up{job="kcoord"}', 1)
    prom.wait_value("kcoord_offset_commits_total", 0)
    prom.wait_value("kcoord_shards_loading", 0)

    group, topic = "scraped-group", "scraped"
    create_topic(broker.bootstrap, topic, 3)
    consumer = ThreadedConsumer(broker.bootstrap, group, [topic])
    try:
        wait_for(lambda: consumer.held() == {(topic, p) for p in range(3)}, 30, "the consumer's assignment")
        consumer.commit([TopicPartition(topic, p, 10 * (p + 1)) for p in range(3)])
        consumer.commit([TopicPartition(topic, 0, 11)])

        prom.wait_value("kcoord_offset_commits_total", 4)
        prom.wait_value("kcoord_offsets", 3)
        prom.wait_value('kcoord_groups{state="Stable"}', 1)
        prom.wait_value("kcoord_group_members", 1)
        prom.wait_value('kcoord_rebalances_total{reason="member-joined"}', 1)
        prom.wait_value('sum(kcoord_requests_total{api="OffsetCommit"})', 2)
        prom.wait_value('kcoord_request_duration_seconds_count{api="OffsetCommit"}', 2)
        # The histogram answers the question an operator asks of it.
        p99 = prom.query('histogram_quantile(0.99, sum by (le) (kcoord_request_duration_seconds_bucket'
                         '{api="OffsetCommit"}))')
        assert len(p99) == 1 and 0 < next(iter(p99.values())) <= 5
    finally:
        consumer.close()

    prom.wait_value('kcoord_groups{state="Empty"}', 1)
    prom.wait_value('kcoord_groups{state="Stable"}', 0)
    prom.wait_value("kcoord_group_members", 0)
    prom.wait_value('kcoord_rebalances_total{reason="member-left"}', 1)


def test_deploy_alert_rules_evaluate_against_the_broker_without_firing(broker: BrokerProcess,
                                                                       prometheus: Prometheus) -> None:
    prom = prometheus
    prom.wait_value('up{job="kcoord"}', 1)

    def rules() -> list[dict[str, Any]]:
        return [r for g in prom.api("rules")["groups"] for r in g["rules"]]

    def all_evaluated() -> bool:
        found = rules()
        return bool(found) and all(r["lastEvaluation"] > "0001-01-01T00:00:00Z" and r["health"] != "unknown"
                                   for r in found)

    prom.wait(all_evaluated, "every alert rule to be evaluated")
    bad = [(r["name"], r.get("lastError")) for r in rules() if r["health"] != "ok"]
    assert bad == [], bad
    # KcoordBrokerMissing may be pending before the first scrape lands; once kcoord is scraped
    # a healthy broker trips nothing.
    prom.wait(lambda: prom.api("alerts")["alerts"] == [], "no alert to be pending or firing", timeout=15)


def test_commit_failure_alert_expression_sees_failing_commits(broker: BrokerProcess, prometheus: Prometheus) -> None:
    """KcoordOffsetCommitErrors's expression, evaluated by Prometheus over real failing commits
    (to a topic that does not exist), is above its threshold; its `for:` is too long to wait out."""
    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.offset_commit import OffsetCommitRequest

    yaml = pytest.importorskip("ruamel.yaml")
    alerts = yaml.YAML(typ="safe").load((ROOT / "deploy" / "alerts.yml").read_text())
    (rule,) = [r for g in alerts["groups"] for r in g["rules"] if r["alert"] == "KcoordOffsetCommitErrors"]
    prom = prometheus
    prom.wait_value('up{job="kcoord"}', 1)
    assert prom.query(rule["expr"]) == {}

    request = OffsetCommitRequest(group_id="failing-group", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.Topic(name="never-created", partitions=[
            OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=1, committed_metadata="")])])
    deadline = time.monotonic() + 60
    with WireClient("127.0.0.1", broker.port) as c:
        while not prom.query(rule["expr"]):
            assert time.monotonic() < deadline, f"the alert expression never matched\n{prom.log()}"
            assert c.call(ApiKey.OffsetCommit, 8, request).topics[0].partitions[0].error_code != 0
            time.sleep(0.25)
    (ratio,) = prom.query(rule["expr"]).values()
    assert 0.05 < ratio <= 1.0
    assert prom.query('kcoord_request_errors_total{api="OffsetCommit"}').keys() == \
        {"api=OffsetCommit,error=UNKNOWN_TOPIC_OR_PARTITION"}


def test_prometheus_sees_exact_lag_under_the_exporters_names(broker: BrokerProcess, prometheus: Prometheus) -> None:
    """The lag series answer the queries kafka_exporter and Kafka Lag Exporter dashboards run."""
    from confluent_kafka import Consumer, Producer

    prom = prometheus
    prom.wait_value('up{job="kcoord"}', 1)
    create_topic(broker.bootstrap, "backlog", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    written_ms = int(time.time() * 1000) - 60_000
    for i in range(12):
        producer.produce("backlog", b"x", partition=i % 2, timestamp=written_ms)
    assert producer.flush(10) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "slow-readers", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("backlog", 0, 1), TopicPartition("backlog", 1, 6)], asynchronous=False)
    c.close()

    prom.wait_value('sum by (consumergroup) (kafka_consumergroup_lag{consumergroup="slow-readers"})', 5)
    prom.wait_value('kafka_consumergroup_current_offset{consumergroup="slow-readers",partition="0"}', 1)
    prom.wait_value('sum(kafka_topic_partition_current_offset{topic="backlog"})', 12)
    lag = prom.query('max by (group) (kafka_consumergroup_group_lag_seconds{group="slow-readers"})')
    age = time.time() - written_ms / 1000
    assert len(lag) == 1 and age - 5 <= next(iter(lag.values())) <= age, lag


def test_every_dashboard_panel_shows_series_under_load(broker: BrokerProcess, prometheus: Prometheus) -> None:
    """deploy/grafana-dashboard.json, every panel's every query, as Grafana sends it (its variables
    filled in), against a real Prometheus scraping kcoord while real clients make each thing a
    panel shows happen: requests and errors, a classic group's rebalance, committed lag, a share
    group with records in flight and one delivered again, a committed and an aborted transaction.
    Each query must return at least one series: a panel that stays empty shows nothing."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    from kclient.wire_client import WireClient
    from protocol.messages import ApiKey
    from protocol.messages.offset_commit import OffsetCommitRequest

    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    queries = [(panel["title"], t["expr"]) for panel in dashboard["panels"] for t in panel.get("targets", [])]
    prom = prometheus
    prom.wait_value('up{job="kcoord"}', 1)

    topic, share_topic = "dashboard", "dashboard-share"
    create_topic(broker.bootstrap, topic, 3)
    create_topic(broker.bootstrap, share_topic, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    earliest = ConfigResource(ResourceType.GROUP, "dashboard-share", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([earliest])[earliest].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    written_ms = int(time.time() * 1000) - 30_000
    for i in range(30):
        producer.produce(topic, b"x", partition=i % 3, timestamp=written_ms)
        producer.produce(share_topic, b"s%d" % i)
    assert producer.flush(10) == 0
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "dashboard-txn"})
    txn.init_transactions(30)
    for finish in (txn.commit_transaction, txn.abort_transaction):
        txn.begin_transaction()
        txn.produce(topic, b"t", partition=0)
        finish(30)
    with WireClient("127.0.0.1", broker.port) as c:  # an error response
        c.call(ApiKey.OffsetCommit, 8, OffsetCommitRequest(
            group_id="dashboard-errors", generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.Topic(name="never-created", partitions=[
                    OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=1)])]))
    group = ThreadedConsumer(broker.bootstrap, "dashboard-group", [topic])
    share = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "dashboard-share",
                           "share.acknowledgement.mode": "explicit"})
    share.subscribe([share_topic])
    try:
        wait_for(lambda: group.held() == {(topic, p) for p in range(3)}, 30, "the group's assignment")
        group.commit([TopicPartition(topic, p, 2) for p in range(3)])  # lag: the rest of each partition
        released: list[Any] = []

        def delivered_again() -> bool:
            """One record given back (the others accepted) until it comes again; then it is held,
            unacknowledged: in flight, and the share group's lag."""
            again = False
            for m in share.poll(0.5):
                if m.error() is not None:
                    continue
                if not released:
                    share.acknowledge(m, AcknowledgeType.RELEASE)
                    released.append(m.value())
                elif m.value() == released[0]:
                    again = True
                else:
                    share.acknowledge(m, AcknowledgeType.ACCEPT)
            return again

        wait_for(delivered_again, 60, "a released share record to be delivered again")
        rate_window = "30s"
        missing: list[tuple[str, str]] = []

        def every_panel_has_series() -> bool:
            missing.clear()
            for title, expr in queries:
                filled = (expr.replace("$instance", ".*").replace("$__rate_interval", rate_window)
                          .replace("$__range", "5m"))
                if not prom.query(filled):
                    missing.append((title, filled))
            return not missing

        wait_for(every_panel_has_series, 60, "every panel's queries to return series", seen=lambda: missing)
    finally:
        group.close()
        share.close()
