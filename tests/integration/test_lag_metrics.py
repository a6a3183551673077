"""Exact lag on /metrics under kafka_exporter's and Kafka Lag Exporter's names: records lag is the
durable log end minus the committed offset, lag in seconds is now minus the timestamp of the first
record not consumed, groups without members are reported, and the series are capped."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.integration.helpers.clients import ThreadedConsumer, create_topic, wait_for
from tests.integration.helpers.metrics import Scrape, scrape

pytestmark = pytest.mark.timeout(120)


def produce_at(bootstrap: str, topic: str, partition: int, timestamps: list[int]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, ts in enumerate(timestamps):
        p.produce(topic, f"{partition}-{i}".encode(), partition=partition, timestamp=ts)
        p.flush(10)  # one batch per record: the record looked up is inside a batch, not at its start
    assert p.flush(10) == 0


def commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=offsets, asynchronous=False)
    c.close()


def series(s: Scrape, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    return [(got, v) for got, v in s.samples.get(name, []) if all(got.get(k) == w for k, w in labels.items())]


def test_lag_in_records_and_seconds_for_a_group_without_members(broker: Any) -> None:
    create_topic(broker.bootstrap, "payments", 2)
    now = int(time.time() * 1000)
    stamps = [now - 90_000 + i * 1000 for i in range(10)]
    produce_at(broker.bootstrap, "payments", 0, stamps)
    produce_at(broker.bootstrap, "payments", 1, [now - 5000] * 4)
    commit(broker.bootstrap, "settlement", [TopicPartition("payments", 0, 3), TopicPartition("payments", 1, 4)])

    before = time.time() * 1000
    s = scrape(broker.metrics_port)
    after = time.time() * 1000
    key = {"consumergroup": "settlement", "topic": "payments"}
    assert s.value("kafka_consumergroup_current_offset", **key, partition="0") == 3
    assert s.value("kafka_consumergroup_current_offset", **key, partition="1") == 4
    assert s.value("kafka_consumergroup_lag", **key, partition="0") == 10 - 3
    assert s.value("kafka_consumergroup_lag", **key, partition="1") == 0
    assert s.value("kafka_topic_partition_current_offset", topic="payments", partition="0") == 10
    assert s.value("kafka_topic_partition_current_offset", topic="payments", partition="1") == 4

    [(labels, lag0)] = series(s, "kafka_consumergroup_group_lag_seconds", group="settlement", partition="0")
    # The first record not consumed is offset 3: its own timestamp, within the time the scrape took.
    assert (before - stamps[3]) / 1000 - 0.001 <= lag0 <= (after - stamps[3]) / 1000 + 0.001
    assert labels["cluster_name"] and labels["member_host"] == labels["consumer_id"] == labels["client_id"] == ""
    [(_, lag1)] = series(s, "kafka_consumergroup_group_lag_seconds", group="settlement", partition="1")
    assert lag1 == 0  # everything consumed

    # Committing further moves both lags to the new first unconsumed record.
    commit(broker.bootstrap, "settlement", [TopicPartition("payments", 0, 8)])
    before = time.time() * 1000
    s = scrape(broker.metrics_port)
    after = time.time() * 1000
    assert s.value("kafka_consumergroup_lag", **key, partition="0") == 2
    [(_, lag0)] = series(s, "kafka_consumergroup_group_lag_seconds", group="settlement", partition="0")
    assert (before - stamps[8]) / 1000 - 0.001 <= lag0 <= (after - stamps[8]) / 1000 + 0.001


def test_member_labels_of_a_live_group(broker: Any) -> None:
    create_topic(broker.bootstrap, "clicks", 1)
    produce_at(broker.bootstrap, "clicks", 0, [int(time.time() * 1000)] * 3)
    member = ThreadedConsumer(broker.bootstrap, "web", ["clicks"], **{"client.id": "web-1"})
    try:
        wait_for(lambda: len(member.messages) == 3, 30, "records consumed")
        member.commit([TopicPartition("clicks", 0, 1)])
        [(labels, _)] = series(scrape(broker.metrics_port), "kafka_consumergroup_group_lag_seconds", group="web")
        assert labels["client_id"] == "web-1" and labels["member_host"] == "/127.0.0.1"
        assert labels["consumer_id"].startswith("web-1-")
    finally:
        member.close()


def test_allow_list_and_cap_bound_the_series(broker_factory: Any) -> None:
    broker = broker_factory({"metrics.lag.groups": "keep-.*", "metrics.lag.max.partitions": "3"})
    create_topic(broker.bootstrap, "t", 2)
    for group in ("keep-a", "keep-b", "other"):
        commit(broker.bootstrap, group, [TopicPartition("t", 0, 0), TopicPartition("t", 1, 0)])
    s = scrape(broker.metrics_port)
    exported = {got["consumergroup"] for got, _ in s.samples["kafka_consumergroup_lag"]}
    assert exported == {"keep-a"}  # keep-b would pass the cap of 3; other is not on the list
    assert s.value("kcoord_lag_partitions_omitted") == 2
    assert {got["group"] for got, _ in s.samples["kafka_consumergroup_group_lag_seconds"]} == {"keep-a"}

    off = broker_factory({"metrics.lag.max.partitions": "0"})
    create_topic(off.bootstrap, "t", 1)
    commit(off.bootstrap, "g", [TopicPartition("t", 0, 0)])
    assert "kafka_consumergroup_lag" not in scrape(off.metrics_port).samples
