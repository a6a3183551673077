"""The lock-free request-path metrics expose exactly what prometheus_client's own would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from broker.observability.loop_metrics import LoopMetrics

BUCKETS = (0.0001, 0.00025, 0.001, 0.5, 1.0, 30.0)
OBSERVED = [0.00005, 0.0001, 0.0002, 0.00025, 0.3, 0.5, 0.9, 7.0, 31.0, 0.0]


def test_exposition_matches_prometheus_client() -> None:
    reference = CollectorRegistry()
    requests = Counter("t_requests", "Requests.", ["api", "version"], registry=reference)
    latency = Histogram("t_seconds", "Latency.", ["api"], buckets=BUCKETS, registry=reference)
    sent = Counter("t_sent_bytes", "Bytes.", registry=reference)

    ours = CollectorRegistry()
    loop = LoopMetrics()
    ours.register(loop)
    l_requests = loop.counter("t_requests", "Requests.", ["api", "version"])
    l_latency = loop.histogram("t_seconds", "Latency.", ["api"], buckets=BUCKETS)
    l_sent = loop.counter("t_sent_bytes", "Bytes.")

    for i, value in enumerate(OBSERVED):
        api = "OffsetCommit" if i % 3 else "Heartbeat"
        for counters in (requests, l_requests):
            counters.labels(api, str(i % 2)).inc()
        for hist in (latency, l_latency):
            hist.labels(api).observe(value)
        for counter in (sent, l_sent):
            counter.inc(100 + i)

    def lines(registry: CollectorRegistry) -> list[str]:
        text = generate_latest(registry).decode()
        return sorted(line for line in text.splitlines() if "_created" not in line)

    assert lines(ours) == lines(reference)


def test_a_bucket_counts_values_up_to_its_bound() -> None:
    loop = LoopMetrics()
    hist = loop.histogram("h", "H.", buckets=(1.0, 2.0))  # without labels: the one child itself
    for value in (1.0, 1.5, 2.0, 2.5):
        hist.observe(value)
    assert hist.counts == [1, 2, 1]
    assert hist.total == 7.0
