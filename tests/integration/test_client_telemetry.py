"""Client telemetry (KIP-714) over TCP: a confluent-kafka producer that a client-metrics
subscription matches pushes its metrics, and they appear on /metrics; one no subscription
matches pushes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka

from broker.telemetry.subscriptions import SET, SubscriptionStore
from kclient.wire_client import WireClient
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from testkit.kafka import run_tool
from tests.conftest import BrokerFactory
from tests.integration.helpers.metrics import scrape

UNKNOWN_SUBSCRIPTION_ID = 117


def test_a_subscribed_producer_pushes_its_metrics_to_prometheus(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data = tmp_path / "telemetry"
    data.mkdir()
    # What IncrementalAlterConfigs on a CLIENT_METRICS resource sets, before the broker starts.
    assert SubscriptionStore(data).alter_config("producers", [
        ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "500"),
        ("match", SET, "client_id=pushing-.*,client_software_name=.+")]) is None
    broker = broker_factory(data_dir=data, start=False).start()
    pushing = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "pushing-producer"})
    silent = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "silent-producer"})
    for p in (pushing, silent):
        p.produce("telemetry", b"hello")
        p.flush(10)
    deadline = time.monotonic() + 15
    series: dict[str, float] = {}
    while time.monotonic() < deadline:
        pushing.poll(0.2)
        silent.poll(0)
        scraped = scrape(broker.metrics_port)
        series = {name: v for name, samples in scraped.samples.items() if name.startswith("kcoord_client_")
                  for labels, v in samples if labels.get("client_id") == "pushing-producer"}
        if "kcoord_client_org_apache_kafka_producer_node_request_latency_avg" in series:
            break
    assert "kcoord_client_org_apache_kafka_producer_node_request_latency_avg" in series, sorted(series)
    assert all(name.startswith("kcoord_client_org_apache_kafka_producer_") for name in series)
    assert not any(labels.get("client_id") == "silent-producer" for name, samples in scraped.samples.items()
                   if name.startswith("kcoord_client_") for labels, _ in samples)
    with WireClient("127.0.0.1", broker.port, client_id="pushing-wire") as c:
        # Without a software name (ApiVersions v3+) the subscription's match leaves the client out.
        assert c.call(71, 0, GetTelemetrySubscriptionsRequest()).requested_metrics == []
        c.call(18, 3, ApiVersionsRequest(client_software_name="wire-test", client_software_version="1.0"))
        got: GetTelemetrySubscriptionsResponse = c.call(71, 0, GetTelemetrySubscriptionsRequest())
        assert got.error_code == 0 and got.client_instance_id != bytes(16)
        assert got.requested_metrics == ["org.apache.kafka.producer."] and got.push_interval_ms == 500
        stale: PushTelemetryResponse = c.call(72, 0, PushTelemetryRequest(
            client_instance_id=got.client_instance_id, subscription_id=got.subscription_id + 1, metrics=b""))
        assert stale.error_code == UNKNOWN_SUBSCRIPTION_ID


def test_the_java_client_pushes_its_metrics_too(broker_factory: BrokerFactory, kafka_libs: Path,
                                                tmp_path: Path) -> None:
    data = tmp_path / "java-telemetry"
    data.mkdir()
    assert SubscriptionStore(data).alter_config("java", [
        ("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1500"),
        ("match", SET, "client_software_name=apache-kafka-java")]) is None
    broker = broker_factory(data_dir=data, start=False).start()
    done = run_tool(kafka_libs, "org.apache.kafka.tools.ProducerPerformance", "--topic", "java-telemetry",
                    "--num-records", "1200", "--record-size", "100", "--throughput", "300", "--command-property",
                    f"bootstrap.servers={broker.bootstrap}", "client.id=java-push")
    assert done.returncode == 0, done.stderr[-2000:]
    # The last push (terminating, at close) stays exported for three push intervals.
    samples = scrape(broker.metrics_port).samples.get("kcoord_client_org_apache_kafka_producer_topic_record_send_total", [])
    sent = [v for labels, v in samples if labels.get("client_id") == "java-push" and labels.get("topic") == "java-telemetry"]
    assert sent and sent[0] > 0, samples
