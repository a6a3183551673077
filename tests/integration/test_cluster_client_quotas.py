"""Client quotas in a cluster: an alteration made through one node is committed in etcd before it
is acknowledged, and every node describes it (and enforces it) within a fraction of a second."""

from __future__ import annotations

import time

from tests.integration.helpers.cluster import Cluster
from tests.integration.test_client_quotas import alter, describe


def test_a_quota_altered_through_one_node_is_described_by_the_other(cluster: Cluster) -> None:
    first, second = cluster.start_node(1), cluster.start_node(2)
    assert alter(first.port, [("user", "carol")], [("producer_byte_rate", 4096.0, False)]) == [(0, None)]
    expected = [([("user", "carol")], {"producer_byte_rate": 4096.0})]
    deadline = time.monotonic() + 5
    while describe(second.port, [("user", 0, "carol")]) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert describe(second.port, [("user", 0, "carol")]) == expected
    assert alter(second.port, [("user", "carol")], [("producer_byte_rate", 0.0, True)]) == [(0, None)]
    deadline = time.monotonic() + 5
    while describe(first.port, [("user", 0, "carol")]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert describe(first.port, [("user", 0, "carol")]) == []
