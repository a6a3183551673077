"""Client quotas over TCP: AlterClientQuotas and DescribeClientQuotas as an admin client uses them
(kept across a restart), and real clients held to their quotas: a confluent-kafka producer and a
kafka-python consumer whose measured throughput stays near the quota and which see throttle
times, and the throttle series on /metrics."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer

from kclient.wire_client import WireClient
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.record_batch import build_simple_batch
from testkit.kcoord import BrokerProcess
from tests.conftest import BrokerFactory
from tests.integration.helpers.cluster import wait_for
from tests.integration.helpers.metrics import scrape
from tests.integration.helpers.quotas import alter, describe

# Short sample windows, so that a rate settles within the test (Kafka's defaults are 11 x 1 s).
WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
QUOTA = 200_000.0


@pytest.fixture(scope="module")
def windowed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with short quota windows for the enforcement tests (each uses its own client id)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("quotas") / "data", WINDOWS).start_loaded()
    try:
        yield broker
    finally:
        broker.kill()






def test_quotas_are_altered_described_checked_and_kept_across_a_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(start=False).start()  # quotas need no group coordinator loaded
    assert alter(broker.port, [("user", "alice"), ("client-id", None)], [("producer_byte_rate", 1024.0, False),
                                                                          ("request_percentage", 12.5, False)]) \
        == [(0, None)]
    assert alter(broker.port, [("client-id", "app")], [("consumer_byte_rate", 2048.0, False)]) == [(0, None)]
    assert alter(broker.port, [("user", "bob")], [("producer_byte_rate", 1.0, False)], validate_only=True) \
        == [(0, None)]
    assert alter(broker.port, [("user", "bob")], [("nonsense", 1.0, False)]) == [(42, "Invalid configuration key nonsense")]
    assert describe(broker.port, [("user", 2, None)]) == [
        ([("client-id", None), ("user", "alice")], {"producer_byte_rate": 1024.0, "request_percentage": 12.5})]
    assert describe(broker.port, [("user", 2, None)], strict=True) == []
    assert describe(broker.port, [("user", 0, None)])[0] == 42
    broker.stop()
    broker.start()
    assert describe(broker.port, []) == [
        ([("client-id", "app")], {"consumer_byte_rate": 2048.0}),
        ([("client-id", None), ("user", "alice")], {"producer_byte_rate": 1024.0, "request_percentage": 12.5})]
    assert describe(broker.port, [("client-id", 1, None)]) == [
        ([("client-id", None), ("user", "alice")], {"producer_byte_rate": 1024.0, "request_percentage": 12.5})]
    assert alter(broker.port, [("client-id", "app")], [("consumer_byte_rate", 0.0, True)]) == [(0, None)]
    assert describe(broker.port, [("client-id", 0, "app")]) == []


def rate_between(marks: list[tuple[float, int]], start: float, end: float) -> float:
    def at(t: float) -> int:
        return [n for when, n in marks if when <= t][-1]

    return (at(end) - at(start)) / (end - start)


def test_a_producer_is_held_to_its_quota_and_sees_throttle_time(windowed: BrokerProcess) -> None:
    broker = windowed
    assert alter(broker.port, [("client-id", "slow-producer")], [("producer_byte_rate", QUOTA, False)]) == [(0, None)]
    stats: list[dict[str, Any]] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "client.id": "slow-producer", "linger.ms": 5, "batch.size": 16384,
        "queue.buffering.max.messages": 200, "statistics.interval.ms": 500, "stats_cb": lambda s: stats.append(json.loads(s))})
    delivered = [0]

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            delivered[0] += len(msg.value())

    marks: list[tuple[float, int]] = []
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < 5:
        try:
            producer.produce("quota-produce", b"x" * 1000, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
        marks.append((elapsed, delivered[0]))
    producer.purge()  # what is still queued would take its time at the quota
    producer.flush(5)
    measured = rate_between(marks, 2.0, 5.0)
    assert 0.6 * QUOTA <= measured <= 1.4 * QUOTA, measured
    throttles = [b["throttle"]["max"] for s in stats for b in s["brokers"].values() if b["nodeid"] >= 0]
    assert max(throttles) > 0
    metrics = scrape(broker.metrics_port)
    labels = {"quota_type": "Produce", "user": "", "client_id": "slow-producer"}
    assert metrics.count("kcoord_quota_throttle_time_ms_total", **labels) > 0
    assert metrics.value("kcoord_quota_bound", **labels) == QUOTA


def test_a_consumer_is_held_to_its_quota_and_sees_throttle_time(windowed: BrokerProcess) -> None:
    broker = windowed
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 16384})
    for _ in range(2000):
        producer.produce("quota-fetch", b"y" * 1000)
        producer.poll(0)
    producer.flush(15)
    assert alter(broker.port, [("user", None), ("client-id", "slow-consumer")],
                 [("consumer_byte_rate", QUOTA, False)]) == [(0, None)]
    consumer = KafkaConsumer("quota-fetch", bootstrap_servers=broker.bootstrap, client_id="slow-consumer",
                             auto_offset_reset="earliest", enable_auto_commit=False, max_partition_fetch_bytes=32768,
                             fetch_max_bytes=32768)
    try:
        received = 0
        marks: list[tuple[float, int]] = []
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < 5:
            for records in consumer.poll(timeout_ms=100).values():
                received += sum(len(r.value) for r in records)
            marks.append((elapsed, received))
        measured = rate_between(marks, 2.0, 5.0)
        assert 0.6 * QUOTA <= measured <= 1.4 * QUOTA, measured
        # kafka-python's connection metrics (consumer-metrics and per node) record each throttle time.
        throttles = [m["throttle-time-max"] for m in consumer.metrics().values() if "throttle-time-max" in m]
        assert throttles and max(throttles) > 0
    finally:
        consumer.close()
    metrics = scrape(broker.metrics_port)
    assert metrics.count("kcoord_quota_throttle_time_ms_total", quota_type="Fetch", user="ANONYMOUS",
                         client_id="slow-consumer") > 0


def test_connections_over_the_address_rate_are_closed_unserved(windowed: BrokerProcess) -> None:
    broker = windowed
    assert alter(broker.port, [("ip", "127.0.0.1")], [("connection_creation_rate", 5.0, False)]) == [(0, None)]
    try:
        opened = [WireClient("127.0.0.1", broker.port, timeout=3) for _ in range(20)]
        served = 0
        for c in opened:
            try:
                c.call(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
                served += 1
            except (OSError, EOFError, ConnectionError):
                pass
            finally:
                c.close()
        # The quota lets about one window's worth (5) through; the others are closed unserved.
        assert 3 <= served <= 9, served
        assert scrape(broker.metrics_port).count("kcoord_quota_connections_throttled_total", ip="127.0.0.1") >= 10
    finally:
        # The removal's own connection is refused while the address is over its rate (held up to
        # a window, then closed unserved; a refused connection is not counted): it is asked again
        # until a connection is served.
        answers: list[object] = []

        def removed() -> bool:
            try:
                answers.append(alter(broker.port, [("ip", "127.0.0.1")], [("connection_creation_rate", 0.0, True)]))
            except (OSError, EOFError, ConnectionError) as exc:
                answers.append(exc)
                return False
            return True

        wait_for(removed, 30, "a connection served to remove the address quota", step=0.2, seen=lambda: answers[-3:])
        assert answers[-1] == [(0, None)]


def test_a_client_older_than_kip_219_gets_its_response_after_the_throttle_time(windowed: BrokerProcess) -> None:
    broker = windowed
    # v5 is held to a throttle of about a second; v7, under a quota 50 times smaller, is told to
    # wait over a minute: an answer held for its throttle and one given at once are far apart.
    assert alter(broker.port, [("client-id", "old-producer")], [("producer_byte_rate", 10_000.0, False)]) \
        == [(0, None)]
    assert alter(broker.port, [("client-id", "new-producer")], [("producer_byte_rate", 200.0, False)]) \
        == [(0, None)]
    batch = build_simple_batch([(None, b"z" * 16_000, int(time.time() * 1000))])
    P = ProduceRequest.TopicProduceData
    timings = []
    for version, client_id in ((5, "old-producer"), (7, "new-producer")):
        with WireClient("127.0.0.1", broker.port, client_id=client_id) as c:
            c.call(3, 4, MetadataRequest(topics=[MetadataRequest.Topic(name="old-quota")],
                                         allow_auto_topic_creation=True))
            started = time.monotonic()
            answer: ProduceResponse = c.call(0, version, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                P(name="old-quota", partition_data=[P.PartitionProduceData(index=0, records=batch)])]))
            timings.append((version, answer.throttle_time_ms, time.monotonic() - started))
    (_, old_throttle, old_wait), (_, new_throttle, new_wait) = timings
    # v5: the broker holds the response for the throttle time; v7 (KIP-219): it answers at once,
    # long before the throttle time it announces has passed (the client waits on its own).
    assert old_throttle > 300 and old_wait >= old_throttle / 1000 * 0.9, timings
    assert new_throttle > 60_000 and new_wait < new_throttle / 1000 / 2, timings
