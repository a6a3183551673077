"""`kcoord serve --nodes 2` as a user runs it, with no etcd.endpoints: the launcher starts a private
etcd and two nodes on one data directory; real clients see two brokers with the partitions and
groups spread over them; a node killed with SIGKILL fails over like any node of a cluster and is
started again by the launcher, as is the private etcd, on the endpoint the nodes know; SIGTERM to
the launcher leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from kclient.wire_client import WireClient
from kcoord.launcher.private_etcd import DEBIAN_ETCD
from protocol.messages import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest
from testkit.nodes import NodesProcess, running
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.cluster import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(not Path(DEBIAN_ETCD).exists(), reason="needs etcd (Debian package etcd-server)")]

TOPIC = "spread"
LEASE_MS = 3000


def _metadata(port: int, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """(broker id -> port, partition -> leader) as the node on ``port`` answers Metadata."""
    with WireClient("127.0.0.1", port, timeout=10) as c:
        r = c.call(ApiKey.Metadata, 9, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                                      allow_auto_topic_creation=False))
    return {b.node_id: b.port for b in r.brokers}, {p.partition_index: p.leader_id for t in r.topics
                                                     for p in t.partitions if p.error_code == 0}


def _serving(nodes: NodesProcess, topic: str, partitions: int) -> bool:
    """Every node names both brokers at their ports, the same leaders of every partition of
    ``topic``, spread over both nodes, and has loaded what it coordinates."""
    try:
        views = [_metadata(port, topic) for port in nodes.ports]
        for port in nodes.ports:
            with WireClient("127.0.0.1", port, timeout=10) as c:
                if c.call(ApiKey.ListGroups, 0, ListGroupsRequest()).error_code != 0:
                    return False
    except OSError:
        return False
    brokers = {1: nodes.port, 2: nodes.port + 1}
    return all(b == brokers and len(leaders) == partitions and set(leaders.values()) == {1, 2}
               and leaders == views[0][1] for b, leaders in views)


def _coordinator(port: int, group: str) -> int:
    with WireClient("127.0.0.1", port, timeout=10) as c:
        r = c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=group, key_type=0))
    return int(r.node_id) if r.error_code == 0 else -1


def _group_on(port: int, node: int, prefix: str) -> str:
    return next(g for g in (f"{prefix}-{i}" for i in range(10_000)) if _coordinator(port, g) == node)


def _produce(bootstrap: str, values: list[bytes]) -> dict[bytes, tuple[int, int]]:
    """Writes ``values`` alternately to partitions 0 and 1; value -> (partition, offset) of each
    acknowledged one."""
    acked: dict[bytes, tuple[int, int]] = {}

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked[msg.value()] = (msg.partition(), msg.offset())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 300_000})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i % 2, on_delivery=delivered)
    assert producer.flush(360) == 0
    return acked


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 10_000})


def _consume(bootstrap: str, group: str, want: set[bytes], commit: bool) -> list[tuple[int, int, bytes]]:
    """What ``group``'s member reads until it has seen every value of ``want`` (partition, offset,
    value, in order), committing its position at the end when ``commit``."""
    consumer = _consumer(bootstrap, group)
    consumer.subscribe([TOPIC])
    seen: list[tuple[int, int, bytes]] = []
    try:
        deadline = time.monotonic() + 300
        while not want <= {v for _p, _o, v in seen}:
            assert time.monotonic() < deadline, f"{group} read {len(seen)} records, not all {len(want)}"
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.offset(), msg.value()))
        if commit:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets of both partitions, asked until its coordinator answers."""
    consumer = _consumer(bootstrap, group)
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                parts = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)
                return {tp.partition: tp.offset for tp in parts}
            except KafkaException:  # the coordinator is moving: ask again
                assert time.monotonic() < deadline, f"no committed offsets of {group}"
    finally:
        consumer.close()


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[NodesProcess]:
    launcher = NodesProcess(tmp_path / "data", 2, {"broker.session.timeout.ms": str(LEASE_MS)}).start()
    try:
        yield launcher
    finally:
        launcher.kill_all()


def test_two_nodes_from_one_command_spread_fail_over_and_stop(nodes: NodesProcess) -> None:
    wait_for(lambda: _serving(nodes, "__consumer_offsets", 50), 300, "both nodes serving their share",
             step=0.2, seen=nodes.log)
    assert {(role, node) for role, node, _pid in nodes.started()} == {("etcd", 0), ("node", 1), ("node", 2)}
    bootstrap = nodes.bootstrap
    create_topic(bootstrap, TOPIC, 2)
    wait_for(lambda: _serving(nodes, TOPIC, 2), 300, "the topic's partitions led one by each node", step=0.2)

    # One group coordinated by each node, both reading both partitions (led one by each node).
    groups = [_group_on(nodes.port, 1, "g"), _group_on(nodes.port, 2, "g")]
    before = _produce(bootstrap, [f"before-{i}".encode() for i in range(200)])
    assert len(before) == 200
    for group in groups:
        _consume(bootstrap, group, set(before), commit=True)
    ends = {p: max(o for pp, o in before.values() if pp == p) + 1 for p in (0, 1)}
    assert all(_committed(bootstrap, g) == ends for g in groups)

    # SIGKILL the leader of partition 0; the other node claims what it held once its lease expires.
    _brokers, leaders = _metadata(nodes.port, TOPIC)
    victim = leaders[0]
    survivor = 3 - victim
    victim_pid = nodes.pid_of(victim)
    os.kill(victim_pid, signal.SIGKILL)
    died, claimed = f"pid={victim_pid} status=-9", f"cluster.partition_claimed node={survivor} topic={TOPIC} partition=0 "
    # The launcher starts a dead node again only after its lease: the survivor claims first.
    wait_for(lambda: claimed in nodes.log().partition(died)[2], 300,
             f"node {survivor} claiming {TOPIC}-0 after node {victim} was killed", step=0.2)

    after = _produce(bootstrap, [f"after-{i}".encode() for i in range(100)])
    assert len(after) == 100
    for group in groups:
        assert _committed(bootstrap, group) == ends  # acknowledged commits survived the failover
        resumed = _consume(bootstrap, group, set(after), commit=True)
        # The group resumes where it committed: nothing acknowledged before is read again.
        assert not {v for _p, _o, v in resumed} & set(before)
    everything = _consume(bootstrap, "read-back", set(before) | set(after), commit=False)
    stored = {v: (p, o) for p, o, v in everything}
    assert all(stored[v] == at for v, at in {**before, **after}.items())

    # The launcher started the killed node again, and the two share the work once more.
    wait_for(lambda: nodes.pid_of(victim) != victim_pid, 300, f"node {victim} started again", step=0.2)
    wait_for(lambda: _serving(nodes, "__consumer_offsets", 50), 300, "both nodes serving again", step=0.2)

    pids = [pid for _role, _node, pid in nodes.started()]
    assert nodes.stop(timeout=300) == 0
    assert not [pid for pid in pids if running(pid)], nodes.log()[-3000:]
    log = nodes.log()
    assert "launcher.stopped status=0" in log
    assert log.index("launcher.node_stopped") < log.index("launcher.etcd_stopped")


def test_the_private_etcd_killed_is_started_again_where_the_nodes_look_for_it(nodes: NodesProcess) -> None:
    wait_for(lambda: _serving(nodes, "__consumer_offsets", 50), 300, "both nodes serving their share",
             step=0.2, seen=nodes.log)
    (etcd,) = [pid for role, _node, pid in nodes.started() if role == "etcd"]
    os.kill(etcd, signal.SIGKILL)
    wait_for(lambda: len([r for r, _n, _p in nodes.started() if r == "etcd"]) == 2, 300, "etcd started again",
             step=0.2, seen=nodes.log)
    endpoints = re.findall(r"launcher\.etcd_started endpoint=(\S+)", nodes.log())
    assert len(endpoints) == 2 and endpoints[0] == endpoints[1]
    wait_for(lambda: _serving(nodes, "__consumer_offsets", 50), 300, "both nodes serving again", step=0.2)
    pids = [pid for _role, _node, pid in nodes.started()]
    assert nodes.stop(timeout=300) == 0
    assert not [pid for pid in pids if running(pid)], nodes.log()[-3000:]
