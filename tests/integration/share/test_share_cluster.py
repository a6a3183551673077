"""Share groups in a cluster: two `kcoord serve` nodes on one shared data dir and a real etcd.
Each node keeps the share partitions of the topic partitions it leads and reads and writes their
state at the node coordinating the key's ``__share_group_state`` partition; a confluent-kafka
ShareConsumer fetches from both. Records are consumed across both nodes, none is accepted twice,
and after ``kill -9`` of one node every acknowledged record stays acknowledged while the
unacknowledged ones are delivered again."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from tests.integration.helpers.clients import create_topic, set_group_configs
from tests.integration.helpers.cluster import Cluster, wait_for

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402

pytestmark = [pytest.mark.timeout(120)]

TOPIC = "shared-q"
GROUP = "sg-cluster"
PARTITIONS = 4
CLUSTER_OVERRIDES = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500",
                     "group.share.record.lock.duration.ms": "2000",
                     "group.share.min.record.lock.duration.ms": "1000"}


def consumer(bootstrap: str) -> Any:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "share.acknowledgement.mode": "explicit"})
    c.subscribe([TOPIC])
    return c


def produce(bootstrap: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i, v in enumerate(values):
        p.produce(TOPIC, value=v.encode(), partition=i % PARTITIONS)
    assert p.flush(15) == 0


def poll_accepting(c: Any, want: set[str], seconds: float, accept: Any = lambda v: True) -> tuple[list[str], list[str]]:
    """Polls until every value of ``want`` was delivered (or time is up): (accepted, left unacknowledged)."""
    accepted: list[str] = []
    held: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not want <= set(accepted) | set(held):
        got = [m for m in c.poll(0.5) if m.error() is None]
        for m in got:
            value = m.value().decode()
            if accept(value):
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                accepted.append(value)
            else:
                held.append(value)
        if got:
            c.commit_sync()
    return accepted, held


def test_share_group_across_two_nodes_survives_kill_9(cluster: Cluster) -> None:
    for node in (1, 2):
        cluster.start_node(node)
    cluster.wait_spread({1, 2})
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    create_topic(bootstrap, TOPIC, PARTITIONS)
    wait_for(lambda: set(cluster.leaders(topic=TOPIC).values()) == {1, 2}, 30, "leaders on both nodes")
    _clients_may_not_write_share_state(cluster)
    set_group_configs(bootstrap, GROUP, {"share.auto.offset.reset": "earliest"})

    first = [f"a{i}" for i in range(40)]
    produce(bootstrap, first)
    c = consumer(bootstrap)
    try:
        accepted, _ = poll_accepting(c, set(first), 40)
    finally:
        c.close()
    # Every record, from the partitions of both nodes, accepted once.
    assert sorted(accepted) == sorted(first)
    # The group's coordinator describes every share partition, wherever its state lives, with its
    # lag, wherever its partition is led: none yet, then what was produced since.
    assert wait_for(lambda: described(cluster) == {p: (10, 0) for p in range(PARTITIONS)}, 15, "the start offsets")

    second = [f"b{i}" for i in range(40)]
    produce(bootstrap, second)
    assert wait_for(lambda: described(cluster) == {p: (10, 10) for p in range(PARTITIONS)}, 15, "the lag of each")
    d = consumer(bootstrap)
    # Even records accepted (durable before commit_sync returns); polling stops at the first poll
    # that brings an odd one, which stays acquired, unacknowledged, as do those never delivered.
    acked: list[str] = []
    held: list[str] = []
    deadline = time.monotonic() + 40
    while not held and time.monotonic() < deadline:
        for m in [m for m in d.poll(0.5) if m.error() is None]:
            value = m.value().decode()
            if int(value[1:]) % 2 == 0:
                d.acknowledge(m, AcknowledgeType.ACCEPT)
                acked.append(value)
            else:
                held.append(value)
        d.commit_sync()
    assert held
    victim = 2
    cluster.nodes[victim].kill()
    d.close()
    survivor = cluster.nodes[1]
    wait_for(lambda: set(cluster.leaders(survivor, TOPIC).values()) == {1}, 30, "the survivor leading every partition")
    e = consumer(survivor.bootstrap)
    try:
        again, _ = poll_accepting(e, set(second) - set(acked), 60)
    finally:
        e.close()
    # Nothing acknowledged comes back; every record left unacknowledged does.
    assert not set(again) & set(acked) and not set(again) & set(first)
    assert set(again) == set(second) - set(acked) and set(held) <= set(again)

    # Offsets reset to 0 by the group's coordinator: the whole topic is delivered again, also from
    # the share partitions the survivor holds in memory.
    wait_for(lambda: reset_offsets(cluster, 0) == 0, 15, "the offsets reset")
    assert start_offsets(cluster) == {p: 0 for p in range(PARTITIONS)}
    f = consumer(survivor.bootstrap)
    try:
        replayed, _ = poll_accepting(f, set(first) | set(second), 60)
    finally:
        f.close()
    assert set(replayed) == set(first) | set(second)


def _clients_may_not_write_share_state(cluster: Cluster) -> None:
    """WriteShareGroupState is for the cluster's nodes: a client is refused on every partition."""
    D = WriteShareGroupStateRequest.WriteStateData
    request = WriteShareGroupStateRequest(group_id=GROUP, topics=[D(topic_id=bytes(range(16)), partitions=[
        D.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[])])])
    for b in cluster.alive():
        with WireClient("127.0.0.1", b.port, timeout=5) as c:
            r = c.call(ApiKey.WriteShareGroupState, 1, request)
        assert r.results[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # A share state key's coordinator is a node of the cluster, the same one whichever node is asked.
    found = set()
    for b in cluster.alive():
        with WireClient("127.0.0.1", b.port, timeout=5) as c:
            r = c.call(ApiKey.FindCoordinator, 6, FindCoordinatorRequest(
                key_type=2, coordinator_keys=[f"{GROUP}:AAECAwQFBgcICQoLDA0ODw:0"]))
        assert r.coordinators[0].error_code == 0
        found.add(r.coordinators[0].node_id)
    assert len(found) == 1 and found <= {1, 2}


def _at_coordinator(cluster: Cluster, api: ApiKey, version: int, body: Any) -> Any:
    node = cluster.coordinator(GROUP)
    with WireClient("127.0.0.1", cluster.nodes[node].port, timeout=10) as c:
        return c.call(api, version, body)


def start_offsets(cluster: Cluster) -> dict[int, int]:
    """Each partition's start offset as DescribeShareGroupOffsets tells it."""
    return {p: start for p, (start, _lag) in described(cluster).items()}


def described(cluster: Cluster) -> dict[int, tuple[int, int]]:
    """Each partition's (start offset, lag) as DescribeShareGroupOffsets (v1: with lag) tells it."""
    r = _at_coordinator(cluster, ApiKey.DescribeShareGroupOffsets, 1, DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequest.Group(group_id=GROUP, topics=None)]))
    return {p.partition_index: (p.start_offset, p.lag) for t in r.groups[0].topics for p in t.partitions}


def reset_offsets(cluster: Cluster, offset: int) -> int:
    T = AlterShareGroupOffsetsRequest.Topic
    r = _at_coordinator(cluster, ApiKey.AlterShareGroupOffsets, 0, AlterShareGroupOffsetsRequest(
        group_id=GROUP, topics=[T(topic_name=TOPIC, partitions=[
            T.Partition(partition_index=p, start_offset=offset) for p in range(PARTITIONS)])]))
    return int(r.error_code)
