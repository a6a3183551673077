"""ApiVersions of Apache Kafka and kcoord: every API kcoord serves Kafka serves too, and where
their version ranges differ is a known, listed difference (kcoord keeps older versions Kafka 4
dropped, and does not serve the newest versions of the transaction requests): a change on either
side fails here, so the versions the differential tests send stay ones both brokers serve. Then
ApiVersions v5 (KIP-1242): a client naming the cluster and node it means to reach."""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient.wire_client import WireClient
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.describe_cluster import DescribeClusterRequest
from testkit.etcd import EtcdProcess
from tests.differential.harness import Pair, Target
from tests.integration.helpers.cluster import Cluster

pytestmark = pytest.mark.differential

# api key: ((kcoord min, max), (Kafka min, max)) where they differ.
KNOWN = {
    1: ((0, 18), (4, 18)),  # Fetch: Kafka 4 dropped v0-v3
    2: ((0, 11), (1, 11)),  # ListOffsets
    8: ((0, 10), (2, 10)),  # OffsetCommit
    9: ((0, 10), (1, 10)),  # OffsetFetch
    19: ((0, 7), (2, 7)),  # CreateTopics
    20: ((0, 6), (1, 6)),  # DeleteTopics
    29: ((0, 3), (1, 3)),  # DescribeAcls
    30: ((0, 3), (1, 3)),  # CreateAcls
    31: ((0, 3), (1, 3)),  # DeleteAcls
    32: ((0, 4), (1, 4)),  # DescribeConfigs
    38: ((0, 3), (1, 3)),  # CreateDelegationToken
    39: ((0, 2), (1, 2)),  # RenewDelegationToken
    40: ((0, 2), (1, 2)),  # ExpireDelegationToken
    41: ((0, 3), (1, 3)),  # DescribeDelegationToken
}

# Served by kcoord, not advertised by Kafka: Kafka advertises the KIP-714 telemetry APIs only with a
# metrics reporter plugin that receives client metrics; kcoord receives them itself (/metrics).
KCOORD_ONLY = {71: (0, 0), 72: (0, 0)}

# Initialize/Read/Write/Delete/ReadSummary ShareGroupState: served by a cluster's nodes to each other.
SHARE_STATE_APIS = {83, 84, 85, 86, 87}


def served(t: Target) -> dict[int, tuple[int, int]]:
    return served_by(t.client())


def served_by(c: WireClient) -> dict[int, tuple[int, int]]:
    answer = c.call(18, 3, ApiVersionsRequest(client_software_name="differential", client_software_version="1"))
    assert answer.error_code == 0
    return {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}


def test_versions_served(pair: Pair) -> None:
    with pair.kafka.session():
        kafka = served(pair.kafka)
    with pair.kcoord.session():
        ours = served(pair.kcoord)
    assert {key: ours[key] for key in KCOORD_ONLY} == KCOORD_ONLY
    ours = {key: versions for key, versions in ours.items() if key not in KCOORD_ONLY}
    assert set(ours) <= set(kafka), f"kcoord serves APIs Kafka does not: {sorted(set(ours) - set(kafka))}"
    differ = {key: (ours[key], kafka[key]) for key in ours if ours[key] != kafka[key]}
    assert differ == KNOWN


def test_a_cluster_node_serves_write_txn_markers_at_kafkas_versions(pair: Pair, etcd: EtcdProcess,
                                                                     tmp_path: Path) -> None:
    """WriteTxnMarkers (27) goes from a transaction coordinator to partition leaders; a kcoord node
    of a cluster serves it to the other nodes (a single node writes its own markers and does not
    list it) at the versions Kafka 4.4 serves, v2 carrying the marker's transaction version
    (KIP-1228). Every other API of the node's list is the single node's, and the share-group state
    APIs, which a cluster's share partition leaders send its share coordinators."""
    with pair.kafka.session():
        kafka = served(pair.kafka)
    with pair.kcoord.session():
        single = served(pair.kcoord)
    cluster = Cluster(etcd, tmp_path)
    try:
        node = cluster.start_node(1)
        with WireClient("127.0.0.1", node.port, timeout=10) as c:
            ours = served_by(c)
    finally:
        cluster.stop_all()
    assert kafka[27] == (1, 2)
    assert ours[27] == kafka[27]
    # What a node lists beyond a single node is what only nodes send each other.
    assert set(ours) - set(single) == {27} | SHARE_STATE_APIS
    assert {key: v for key, v in ours.items() if key in single} == single


def test_api_versions_v5_checks_the_cluster_and_node_the_client_means(pair: Pair) -> None:
    """A v5 client may name the cluster and the node it means to reach (both or neither: one alone
    is INVALID_REQUEST); a broker that is not that node of that cluster answers
    REBOOTSTRAP_REQUIRED, with no APIs. Named rightly, or not at all, v5 answers as v4 does."""

    def scenario(t: Target) -> object:
        c = t.client()

        def ask(version: int, cluster_id: str | None = None, node_id: int = -1) -> ApiVersionsResponse:
            return c.call(18, version, ApiVersionsRequest(client_software_name="differential",
                                                          client_software_version="1", cluster_id=cluster_id,
                                                          node_id=node_id))

        described = c.call(60, 0, DescribeClusterRequest())
        me, cluster = described.brokers[0].broker_id, described.cluster_id
        v4 = ask(4)

        def same(answer: ApiVersionsResponse) -> bool:
            # Kafka's finalized features' epoch is its metadata log's offset, which moves on by
            # itself between two requests: the answers are the same whatever it is.
            answer.finalized_features_epoch = v4.finalized_features_epoch
            return answer == v4

        same_as_v4 = {name: same(ask(5, *who)) for name, who in
                      (("anonymous", (None, -1)), ("this node", (cluster, me)))}
        return {"same_as_v4": same_as_v4, "other_cluster": ask(5, "another-cluster", me),
                "other_node": ask(5, cluster, me + 1), "cluster_without_node": ask(5, cluster),
                "node_without_cluster": ask(5, None, me), "v4_ignores_them": same(ask(4, "another-cluster", me))}

    answers = pair.compare(scenario)
    assert answers["same_as_v4"] == {"anonymous": True, "this node": True}  # type: ignore[index]
    assert answers["other_node"]["error_code"] == 129  # type: ignore[index]
    assert answers["node_without_cluster"]["error_code"] == 42  # type: ignore[index]
