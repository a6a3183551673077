"""Failover as clients see it: a node that was stopped past its lease closes its client
connections when it learns it lost its partitions (they reconnect and ask the cluster again rather
than wait on answers it no longer can give), and the other nodes stop naming it as soon as etcd
says its lease is gone. How long clients with default settings take is measured by
bench/failover.py, not here: these tests wait on conditions with generous deadlines."""

from __future__ import annotations

import socket
import time

import pytest

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.metadata import MetadataRequest
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.cluster import Cluster, partition_leader, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _metadata(client: WireClient, topic: str) -> tuple[set[int], dict[int, int]]:
    """(broker ids, partition -> leader) of one Metadata answer on ``client``'s connection."""
    r = client.call(ApiKey.Metadata, 9, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                                       allow_auto_topic_creation=False))
    return {b.node_id for b in r.brokers}, {p.partition_index: p.leader_id for t in r.topics for p in t.partitions}


def _metadata_of(cluster: Cluster, node: int, topic: str) -> tuple[set[int], dict[int, int]]:
    with WireClient("127.0.0.1", cluster.nodes[node].port, timeout=10) as c:
        return _metadata(c, topic)


def _eof_within(sock: socket.socket, timeout: float) -> bool:
    """True once the peer closes ``sock`` (anything it still sends before is read and dropped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def test_a_node_resuming_after_its_lease_expired_closes_its_client_connections(cluster: Cluster) -> None:
    for node in (1, 2):
        cluster.start_node(node)
    cluster.wait_spread({1, 2})
    create_topic(cluster.nodes[1].bootstrap, "t", 1)
    wait_for(lambda: partition_leader(cluster, "t") in (1, 2), 30, "a leader of t-0")
    paused = partition_leader(cluster, "t")
    other = 2 if paused == 1 else 1
    # Clients connected to each node before the pause, each served once on that connection.
    stale = WireClient("127.0.0.1", cluster.nodes[paused].port, timeout=30)
    kept = WireClient("127.0.0.1", cluster.nodes[other].port, timeout=30)
    try:
        assert _metadata(stale, "t")[1] == {0: paused}
        assert paused in _metadata(kept, "t")[0]
        cluster.pause(paused)
        try:
            # Once etcd drops its lease, the other node names neither it as a broker nor it as leader.
            wait_for(lambda: paused not in _metadata_of(cluster, other, "t")[0], 60,
                     "the other node to stop listing the stopped one",
                     seen=lambda: _metadata_of(cluster, other, "t"))
            wait_for(lambda: _metadata_of(cluster, other, "t")[1] == {0: other}, 60,
                     "the other node to lead t-0", seen=lambda: _metadata_of(cluster, other, "t"))
            # On a connection opened before the pause, too.
            assert _metadata(kept, "t") == ({other}, {0: other})
        finally:
            cluster.resume(paused)
        # Resumed, the node learns its lease is gone, drops its partitions and closes the
        # connection its client opened before the pause (the client sent nothing since).
        assert _eof_within(stale.sock, 60), "the resumed node kept its client's connection open"
        assert "connection.closing_all" in cluster.nodes[paused].log()
        # The node that kept its lease kept its clients.
        assert other in _metadata(kept, "t")[0]
        # The resumed node rejoins, is listed again and takes its share back.
        cluster.wait_spread({1, 2})
        wait_for(lambda: paused in _metadata_of(cluster, other, "t")[0], 60, "the resumed node listed again")
        assert other in _metadata(kept, "t")[0]
    finally:
        stale.close()
        kept.close()
