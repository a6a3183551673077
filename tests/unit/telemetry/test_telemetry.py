"""Client telemetry without a broker: OTLP MetricsData decoding, client-metrics subscriptions
(checks, durability, matching) and the subscription a client instance is given."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.telemetry.otlp import OtlpError, metric_points
from broker.telemetry.service import TelemetryService
from broker.telemetry.subscriptions import APPEND, DELETE, SET, SubscriptionStore


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def fixed64(number: int, raw: bytes) -> bytes:
    return varint(number << 3 | 1) + raw


def key_value(key: str, value: str) -> bytes:
    return ld(1, key.encode()) + ld(2, ld(1, value.encode()))


def metrics_data() -> bytes:
    gauge_point = ld(7, key_value("node.id", "1")) + fixed64(4, struct.pack("<d", 2.5))
    sum_point = fixed64(6, struct.pack("<q", 42))
    gauge = ld(1, ld(2, b"")) + ld(1, b"org.apache.kafka.producer.node.request.latency.avg") + ld(5, ld(1, gauge_point))
    total = ld(1, b"org.apache.kafka.producer.record.queue.time.total") + ld(7, ld(1, sum_point) + varint(3 << 3) + b"\x01")
    scope = ld(2, gauge) + ld(2, total)
    resource = ld(1, key_value("client_rack", "r1"))
    return ld(1, ld(1, resource) + ld(2, scope))


def test_gauges_and_sums_are_read_with_their_attributes() -> None:
    points = metric_points(metrics_data())
    assert [(p.name, p.kind, p.attributes, p.value) for p in points] == [
        ("org.apache.kafka.producer.node.request.latency.avg", "gauge", (("client_rack", "r1"), ("node.id", "1")), 2.5),
        ("org.apache.kafka.producer.record.queue.time.total", "sum", (("client_rack", "r1"),), 42.0),
    ]
    assert points[1].monotonic


def test_truncated_input_is_refused() -> None:
    with pytest.raises(OtlpError):
        metric_points(metrics_data()[:-3])


def test_subscriptions_are_checked_durable_and_matched(tmp_path: Path) -> None:
    store = SubscriptionStore(tmp_path)
    assert store.alter_config("s", [("interval.ms", SET, "50")]).code == 42  # type: ignore[union-attr]
    assert store.alter_config("s", [("colour", SET, "red")]).code == 42  # type: ignore[union-attr]
    assert store.alter_config("s", [("match", SET, "nobody=x")]).code == 42  # type: ignore[union-attr]
    assert store.alter_config("s", [("metrics", SET, "org.apache.kafka.producer.")], validate_only=True) is None
    assert store.subscriptions == {}
    assert store.alter_config("s", [("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "1000"),
                                    ("match", SET, "client_id=app-.*")]) is None
    assert store.alter_config("s", [("metrics", APPEND, "org.apache.kafka.consumer.")]) is None
    again = SubscriptionStore(tmp_path)
    assert again.describe_config("s") == [("metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer."),
                                          ("interval.ms", "1000"), ("match", "client_id=app-.*")]
    assert [s.name for s in again.matching({"client_id": "app-1"})] == ["s"]
    assert again.matching({"client_id": "other"}) == []
    assert again.alter_config("s", [("metrics", DELETE, None), ("interval.ms", DELETE, None),
                                    ("match", DELETE, None)]) is None
    assert SubscriptionStore(tmp_path).subscriptions == {}


def test_an_instance_gets_the_union_of_its_subscriptions_and_a_new_id_when_they_change(tmp_path: Path) -> None:
    store = SubscriptionStore(tmp_path)
    store.alter_config("a", [("metrics", SET, "org.apache.kafka.producer."), ("interval.ms", SET, "5000")])
    store.alter_config("b", [("metrics", SET, "org.apache.kafka.consumer."), ("interval.ms", SET, "2000")])
    service = TelemetryService(store, 1024, lambda: 0)
    inst = service.instance(bytes(16), {"client_id": "x"})
    assert inst.instance_id != bytes(16)
    assert inst.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.")
    assert inst.interval_ms == 2000
    first = inst.subscription_id
    store.alter_config("c", [("metrics", SET, "*")])
    inst = service.instance(inst.instance_id, {"client_id": "x"})
    assert inst.metrics == ("",) and inst.subscription_id != first
