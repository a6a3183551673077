"""A kcoord cluster: three or four nodes on one shared data dir, ownership leased in a real etcd,
real clients following Metadata, FindCoordinator and NOT_COORDINATOR, nodes killed, paused and
stopped under load."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from broker.cluster.assignment import desired_owners
from broker.coordinators.group.core.base.partitioning import partition_for
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.record_batch import iter_batches
from storage.checkpoints import read_leader_epochs
from testkit.etcd import EtcdProcess
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.cluster import (
    OFFSETS,
    Cluster,
    Committer,
    MemberCommitter,
    commit_request,
    fetch_offset,
    wait_for,
)
from tests.integration.helpers.dataplane_clients import confluent_group, confluent_produce, kafka_python_group

TXN_STATE = "__transaction_state"
SHARE_STATE = "__share_group_state"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def committed(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    node = cluster.coordinator(group)
    with WireClient("127.0.0.1", cluster.nodes[node].port) as c:
        r = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id=group, topics=None))
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def test_three_nodes_spread_the_groups_and_real_clients_work_across_them(cluster: Cluster) -> None:
    for node in (1, 2, 3):
        cluster.start_node(node)
    leaders = cluster.wait_spread({1, 2, 3})
    shares = Counter(leaders.values())
    txn_shares = Counter(desired_owners([(TXN_STATE, p) for p in range(50)], [1, 2, 3]).values())
    share_state_shares = Counter(desired_owners([(SHARE_STATE, p) for p in range(50)], [1, 2, 3]).values())
    assert max(shares.values()) - min(shares.values()) <= 1, shares
    # Each node tells its share: `kcoord health` and its own metrics.
    for node, b in cluster.nodes.items():
        health = subprocess.run([sys.executable, "-m", "kcoord", "health", "--bootstrap", b.bootstrap],
                                capture_output=True, text=True, timeout=30, check=False)
        assert health.returncode == 0, health.stdout
        assert health.stdout.strip() == (f"healthy: node {node}, 3 live node(s), owns {shares[node]} of 50 "
                                         "__consumer_offsets partitions")
        with urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        assert "kcoord_cluster_nodes 3.0" in metrics
        # Its share of __consumer_offsets, __transaction_state and __share_group_state.
        owned = shares[node] + txn_shares[node] + share_state_shares[node]
        assert f"kcoord_cluster_partitions_owned {float(owned)}" in metrics
        assert "kcoord_cluster_lease_renewals_total" in metrics
        assert "kcoord_cluster_takeover_load_seconds_count" in metrics
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    create_topic(bootstrap, "orders", 6)
    confluent_produce(bootstrap, "orders", 0, 300)
    expected = {f"m{i}" for i in range(300)}
    for node in (1, 2, 3):
        # One group of each client library coordinated by each node.
        for prefix, run in (("confluent", confluent_group), ("kafka-python", kafka_python_group)):
            group = cluster.groups_on(node, 1, prefix)[0]
            seen = run(bootstrap, "orders", group, 300)
            assert {value for _p, _o, value in seen} == expected
            offsets = committed(cluster, group)
            assert sum(offsets.values()) == 300, (group, offsets)
    # The topic's partitions are led by every node, evenly.
    assert Counter(cluster.leaders(topic="orders").values()) == {1: 2, 2: 2, 3: 2}
    # A transactional id is coordinated by the owner of its __transaction_state partition; every
    # node names the same one.
    txn_owner = desired_owners([(TXN_STATE, partition_for("txn", 50))], [1, 2, 3])[(TXN_STATE, partition_for("txn", 50))]
    for b in cluster.alive():
        with WireClient("127.0.0.1", b.port) as c:
            answer = c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key="txn", key_type=1))
        assert (answer.error_code, answer.node_id, answer.port) == (0, txn_owner, cluster.nodes[txn_owner].port)


def test_kill_9_during_a_commit_storm_loses_no_acknowledged_commit(cluster: Cluster) -> None:
    for node in (1, 2, 3):
        cluster.start_node(node)
    cluster.wait_spread({1, 2, 3})
    create_topic(cluster.nodes[1].bootstrap, "storm", 1)
    moved = cluster.groups_on(2, 4, "storm")
    staying = cluster.groups_on(1, 2, "storm") + cluster.groups_on(3, 2, "storm")
    committers: dict[str, Committer | MemberCommitter] = {g: Committer(cluster, g) for g in moved + staying}
    # Group members too (confluent-kafka), whose coordinator is the node about to die.
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    members = cluster.groups_on(2, 2, "members")
    committers.update({g: MemberCommitter(bootstrap, g, "storm") for g in members})
    moved += members
    for c in committers.values():
        c.start()
    # The storm is under way when the node dies: every committer has had several commits acknowledged.
    wait_for(lambda: all(c.acked >= 5 for c in committers.values()), 40, "every committer to commit",
             step=0.1, seen=lambda: {g: c.acked for g, c in committers.items()})
    killed_at = time.monotonic()
    cluster.nodes[2].kill()
    wait_for(lambda: all(committers[g].first_success_after(killed_at) is not None for g in moved), 90,
             "the moved groups to resume", seen=lambda: {g: committers[g].acked for g in moved})
    def resumed_after(groups: list[str]) -> float:
        return max(t for g in groups if (t := committers[g].first_success_after(killed_at)) is not None) - killed_at

    failover = resumed_after([g for g in moved if g not in members])
    members_failover = resumed_after(members)
    # The storm goes on after the failover: every committer has several commits acknowledged since the kill.
    wait_for(lambda: all(len([t for t in c.successes if t > killed_at]) >= 5 for c in committers.values()), 40,
             "every committer to commit after the failover", step=0.1,
             seen=lambda: {g: len([t for t in c.successes if t > killed_at]) for g, c in committers.items()})
    for c in committers.values():
        c.stop_flag.set()
    for c in committers.values():
        c.join(30)
    for group, c in committers.items():
        fetched = fetch_offset(cluster, group, "storm")
        assert c.acked <= fetched <= c.attempted, (group, c.acked, fetched, c.attempted)
    # How long it takes is measured by bench.failover; here it only has to happen.
    print(f"failover after kill -9: simple committers {failover:.2f}s, group members {members_failover:.2f}s "
          f"(lease {cluster.session_timeout_ms} ms)")


def _batches(partition_dir: Path) -> list[tuple[int, int]]:
    """(base offset, partition leader epoch) of every batch in every segment file, as on disk."""
    out = []
    for log in sorted(partition_dir.glob("*.log")):
        out += [(b.base_offset, b.partition_leader_epoch) for b in iter_batches(log.read_bytes(), verify_crc=False)]
    return out


def test_a_paused_node_is_fenced_and_rejoins_without_its_old_ownership(cluster: Cluster) -> None:
    for node in (1, 2, 3):
        cluster.start_node(node)
    cluster.wait_spread({1, 2, 3})
    create_topic(cluster.nodes[1].bootstrap, "t", 1)
    group = cluster.groups_on(3, 1, "paused")[0]
    partition_dir = cluster.data_dir / f"{OFFSETS}-{partition_for(group, 50)}"
    paused = cluster.nodes[3]
    assert paused.proc is not None
    stale = WireClient("127.0.0.1", paused.port, timeout=60)
    for offset in range(1, 6):
        assert stale.call(ApiKey.OffsetCommit, 2, commit_request(group, "t", offset)).topics[0] \
            .partitions[0].error_code == 0
    os.kill(paused.proc.pid, signal.SIGSTOP)
    try:
        # Sent while the node is paused: it reads it only once it wakes up.
        correlation = stale.send(ApiKey.OffsetCommit, 2, commit_request(group, "t", 1000))
        wait_for(lambda: cluster.coordinator(group) not in (3, -1), 60,
                 "another node to take over the paused node's partitions")
        new_owner = cluster.nodes[cluster.coordinator(group)]
        with WireClient("127.0.0.1", new_owner.port) as c:
            for offset in range(6, 11):
                assert c.call(ApiKey.OffsetCommit, 2, commit_request(group, "t", offset)).topics[0] \
                    .partitions[0].error_code == 0
    finally:
        os.kill(paused.proc.pid, signal.SIGCONT)
    try:
        answer = stale.recv(ApiKey.OffsetCommit, 2, correlation)
        assert answer.topics[0].partitions[0].error_code != 0, "a fenced node acknowledged a commit"
    except (ConnectionError, OSError):
        pass  # closing the connection acknowledges nothing either
    stale.close()
    assert fetch_offset(cluster, group, "t") == 10
    # The paused node comes back as a new member and gets a share again, under new epochs.
    cluster.wait_spread({1, 2, 3})
    assert "cluster.lease_lost" in paused.log() or "cluster.partition_lost" in paused.log()
    assert fetch_offset(cluster, group, "t") == 10
    # On disk: no batch of an epoch lies beyond the start of the next epoch.
    epochs = read_leader_epochs(partition_dir)
    assert len(epochs) >= 2, epochs
    starts = dict(epochs)
    ordered = sorted(starts.items())
    for base, epoch in _batches(partition_dir):
        later = [start for e, start in ordered if e > epoch]
        assert not later or base < min(later), (base, epoch, ordered)


def test_a_fourth_node_takes_its_share_and_sigterm_hands_over_at_once(etcd: EtcdProcess, tmp_path: Path) -> None:
    # A lease far longer than the wait below: a hand-over that waited for its expiry would fail.
    cluster = Cluster(etcd, tmp_path, session_timeout_ms=180000)
    try:
        for node in (1, 2, 3):
            cluster.start_node(node)
        cluster.wait_spread({1, 2, 3})
        create_topic(cluster.nodes[1].bootstrap, "storm", 1)
        groups = [g for node in (1, 2, 3) for g in cluster.groups_on(node, 2, "steady")]
        committers = {g: Committer(cluster, g) for g in groups}
        for c in committers.values():
            c.start()
        cluster.start_node(4)
        leaders = cluster.wait_spread({1, 2, 3, 4})
        assert Counter(leaders.values())[4] >= 12
        joined = time.monotonic()
        stopping = time.monotonic()
        assert cluster.nodes[1].stop() == 0
        # It handed its partitions back and revoked its lease before it exited, rather than leaving
        # them to the lease's expiry.
        log = cluster.nodes[1].log()
        assert "cluster.left" in log and "cluster.revoke_failed" not in log, log[-3000:]
        cluster.wait_spread({2, 3, 4}, timeout=90)
        handed_over = time.monotonic() - stopping
        wait_for(lambda: all(c.first_success_after(time.monotonic() - 0.5) for c in committers.values()), 60,
                 "every committer to commit after the hand-over",
                 seen=lambda: {g: c.acked for g, c in committers.items()})
        assert all(c.first_success_after(joined) for c in committers.values())
        for c in committers.values():
            c.stop_flag.set()
        for c in committers.values():
            c.join(30)
        for group, c in committers.items():
            assert c.acked <= fetch_offset(cluster, group, "storm") <= c.attempted
        print(f"SIGTERM hand-over: {handed_over:.2f}s")
    finally:
        cluster.stop_all()
