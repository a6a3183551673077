"""Client quotas in a cluster: an alteration made through one node is committed in etcd before it
is acknowledged, and every node describes it (and enforces it) within a fraction of a second; the
client-metrics subscriptions of client telemetry are shared the same way."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.cluster.etcd import EtcdClient
from broker.telemetry.etcd_store import EtcdSubscriptionStore
from broker.telemetry.subscriptions import DELETE, SET, SubscriptionStore
from testkit.etcd import EtcdProcess
from tests.integration.helpers.cluster import Cluster, wait_for
from tests.integration.helpers.quotas import alter, describe


def test_a_quota_altered_through_one_node_is_described_by_the_other(cluster: Cluster) -> None:
    first, second = cluster.start_node(1), cluster.start_node(2)
    assert alter(first.port, [("user", "carol")], [("producer_byte_rate", 4096.0, False)]) == [(0, None)]
    expected = [([("user", "carol")], {"producer_byte_rate": 4096.0})]
    wait_for(lambda: describe(second.port, [("user", 0, "carol")]) == expected, 60, "the quota on the second node",
             seen=lambda: describe(second.port, [("user", 0, "carol")]))
    assert alter(second.port, [("user", "carol")], [("producer_byte_rate", 0.0, True)]) == [(0, None)]
    wait_for(lambda: describe(first.port, [("user", 0, "carol")]) == [], 60, "the quota gone from the first node",
             seen=lambda: describe(first.port, [("user", 0, "carol")]))


@pytest.mark.trio
async def test_client_metrics_subscriptions_are_shared_through_etcd(etcd: EtcdProcess, tmp_path: Path) -> None:
    """What IncrementalAlterConfigs on a CLIENT_METRICS resource awaits, in a cluster: committed in
    etcd before it returns, read by another node's store."""
    prefix = f"/kcoord-test/{uuid.uuid4().hex}"
    first, second = SubscriptionStore(None), SubscriptionStore(None)
    first_etcd = EtcdSubscriptionStore(EtcdClient(etcd.endpoint), prefix, first)
    second_etcd = EtcdSubscriptionStore(EtcdClient(etcd.endpoint), prefix, second)
    assert await first.alter("producers", [("metrics", SET, "org.apache.kafka.producer."),
                                           ("interval.ms", SET, "1000")]) is None
    bad = await first.alter("producers", [("interval.ms", SET, "1")])
    assert bad is not None and bad.code == 42  # INVALID_REQUEST, as Kafka 4.4 answers
    await second_etcd.load()
    assert second.configs == first.configs == {
        "producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}}
    assert await second.alter("producers", [("metrics", DELETE, None), ("interval.ms", DELETE, None)]) is None
    await first_etcd.load()
    assert first.subscriptions == {} and first.generation == 2
