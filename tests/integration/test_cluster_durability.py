"""A cluster never loses an acknowledged write: two or three `kcoord serve` nodes on one shared data
dir and a real etcd, a confluent-kafka producer (``acks=all``) and committers writing without pause,
while nodes are paused past their lease (SIGSTOP, then SIGCONT), killed with SIGKILL, or etcd goes
away. Afterwards every acknowledged record is read back from the start of the partition with its
value, and every acknowledged commit with OffsetFetch."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit.etcd import EtcdProcess
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.cluster import (
    AckedProducer,
    Cluster,
    Committer,
    MemberCommitter,
    fetch_offset,
    leader_seen_by,
    lost_records,
    partition_leader,
    read_partition,
    wait_for,
)
from tests.integration.netns import Namespace, Relay, netns_available

pytestmark = [pytest.mark.timeout(180)]

TOPIC = "acked"
# Frequent segment rolls: a roll is where a late writer used to do the most harm.
SEGMENT_BYTES = "65536"


@pytest.fixture
def cluster(etcd: EtcdProcess, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(etcd, tmp_path, **{"log.segment.bytes": SEGMENT_BYTES})
    yield c
    c.stop_all()


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[EtcdProcess]:
    """An etcd of the test's own, which the test stops and starts again."""
    from testkit.etcd import ETCD_BINARY

    if not Path(ETCD_BINARY).exists():
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    (tmp_path / "etcd").mkdir()
    server = EtcdProcess(tmp_path / "etcd" / "data").start()
    yield server
    server.stop()


def _start(cluster: Cluster, nodes: tuple[int, ...] = (1, 2)) -> tuple[AckedProducer, str]:
    bootstrap, _leader = cluster.start_with_topic(TOPIC, nodes)
    producer = AckedProducer(bootstrap, TOPIC)
    producer.start()
    started = time.monotonic()
    wait_for(lambda: producer.acks_after(started) >= 200, 30, "the first acknowledgements")
    return producer, bootstrap


def _committers(cluster: Cluster, node: int, count: int, prefix: str) -> list[Committer]:
    committers = [Committer(cluster, g, TOPIC, timeout=3.0) for g in cluster.groups_on(node, count, prefix)]
    for c in committers:
        c.start()
    wait_for(lambda: all(c.acked > 0 for c in committers), 30, "the first commits")
    return committers


def _verify(cluster: Cluster, producer: AckedProducer, committers: list[Committer], bootstrap: str,
            members: list[MemberCommitter] | None = None) -> None:
    """Stops the writers, then reads back every acknowledged record and commit."""
    producer.stop_flag.set()
    for c in [*committers, *(members or [])]:
        c.stop_flag.set()
    producer.join(90)
    for c in [*committers, *(members or [])]:
        c.join(30)
    assert producer.acked, "nothing was acknowledged"
    stored, high = read_partition(bootstrap, TOPIC)
    lost = lost_records(producer.acked, stored)
    assert not lost, (f"{len(lost)} of {len(producer.acked)} acknowledged records not read back "
                      f"(high watermark {high}): first {lost[:5]}")
    assert high > max(producer.acked)
    for c in [*committers, *(members or [])]:
        fetched = fetch_offset(cluster, c.group, c.topic)
        assert c.acked <= fetched <= c.attempted, (c.group, c.acked, fetched, c.attempted)
    for m in members or []:
        assert m.acked > 0, f"{m.group}: no commit of the group member was acknowledged"


def _wait_serving(cluster: Cluster, producer: AckedProducer, committers: list[Committer], since: float,
                  timeout: float = 40) -> float:
    """Waits until records and every committer's commits are acknowledged again after ``since``
    (replies sent before it, read within half a second, do not count); returns the time of the
    first record written and acknowledged since."""
    wait_for(lambda: producer.first_new_ack_after(since) is not None and producer.acks_after(since + 0.5) >= 100,
             timeout, "acknowledged records")
    wait_for(lambda: all(c.first_success_after(since + 0.5) is not None for c in committers), timeout,
             "acknowledged commits")
    first = producer.first_new_ack_after(since)
    assert first is not None
    return first


def test_pausing_the_leader_past_its_lease_loses_no_record_and_no_commit(cluster: Cluster) -> None:
    """SIGSTOP of the node that leads the topic partition and coordinates the committers' groups,
    at a random moment with writes in flight, until the other node has taken over and written
    more; then SIGCONT. Ownership flips back to the returning node each round (it is the
    partitions' preferred owner), so each round it re-claims what the other node wrote. (Before
    fencing, one round in six lost acknowledged records in the runs that measured it.)"""
    producer, bootstrap = _start(cluster)
    leader = partition_leader(cluster, TOPIC)
    committers = _committers(cluster, leader, 3, "paused")
    # And a confluent-kafka group member committing, whose coordinator is the node paused.
    create_topic(bootstrap, "member-commits", 1)
    members = [MemberCommitter(bootstrap, g, "member-commits") for g in cluster.groups_on(leader, 1, "member")]
    for m in members:
        m.start()
    rng = random.Random(25)
    failovers = []
    for _round in range(4):
        current = partition_leader(cluster, TOPIC)
        assert current == leader, "ownership did not flip back to the preferred node"
        time.sleep(rng.uniform(0.2, 1.0))  # the scenario: a random moment of the load
        cluster.pause(leader)
        stopped = time.monotonic()
        try:
            wait_for(lambda: partition_leader(cluster, TOPIC) not in (-1, leader), 30, "a takeover")
            failovers.append(_wait_serving(cluster, producer, committers, stopped) - stopped)
            time.sleep(rng.uniform(0.5, 2.0))  # the new owner writes and rolls segments meanwhile
        finally:
            cluster.resume(leader)
        resumed = time.monotonic()
        wait_for(lambda: partition_leader(cluster, TOPIC) == leader, 40, "the preferred node back as leader")
        _wait_serving(cluster, producer, committers, resumed)
    _verify(cluster, producer, committers, bootstrap, members)
    print(f"failover after SIGSTOP: {[round(f, 2) for f in failovers]} s, {len(producer.acked)} records acked")


# A producer as an operator configures one for throughput: large batches, librdkafka's default
# request timeout (its requests to a stopped node wait 30 s), metadata refreshed twice a second.
LARGE_BATCHES = {"enable.idempotence": False, "linger.ms": 20, "batch.size": 600000, "message.timeout.ms": 60000,
                 "topic.metadata.refresh.interval.ms": 500}
# A reader that takes several of those batches per fetch.
LARGE_FETCHES = {"fetch.max.bytes": 16 << 20, "max.partition.fetch.bytes": 8 << 20}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_acknowledged_record_reads_back_from_offset_0_after_each_flip_of_ownership(cluster: Cluster) -> None:
    """Ownership flips from the partition's leader to the other node and back, three times: the
    leader is stopped at a random moment (SIGSTOP) while 600 KB batches are written, kept stopped
    until the other node acknowledges records of its own (or 30 s), then resumed, and it claims
    the partition back. After each flip a fresh consumer reads the partition from offset 0 and
    every record acknowledged so far must come back with its value: each claim serves what
    storage holds at the claim plus what that tenure appended, nothing remembered from an earlier
    tenure of the same node."""
    bootstrap, leader = cluster.start_with_topic(TOPIC)
    producer = AckedProducer(bootstrap, TOPIC, in_flight=40000, value_size=300, rate=4000, config=LARGE_BATCHES)
    producer.start()
    started = time.monotonic()
    wait_for(lambda: producer.acks_after(started) >= 2000, 60, "the first acknowledgements")
    committers = _committers(cluster, leader, 3, "flipped")
    rng = random.Random(34)
    for round_no in range(3):
        wait_for(lambda: partition_leader(cluster, TOPIC) == leader, 60, "the preferred node leading")
        time.sleep(rng.uniform(0.2, 1.5))  # a random moment: batches in flight, a roll perhaps
        cluster.pause(leader)
        stopped = time.monotonic()
        try:
            wait_for(lambda at=stopped: producer.first_new_ack_after(at) is not None or time.monotonic() - at > 30,
                     45, "the other node acknowledging records, or 30 s")
        finally:
            cluster.resume(leader)
        wait_for(lambda: partition_leader(cluster, TOPIC) == leader, 60, "the preferred node back as leader")
        with producer.lock:
            acked = dict(producer.acked)
        stored, high = read_partition(bootstrap, TOPIC, timeout=180, config=LARGE_FETCHES)
        lost = lost_records(acked, stored)
        assert not lost, (f"flip {round_no + 1}: {len(lost)} of {len(acked)} acknowledged records not read back "
                          f"(high watermark {high}): first {lost[:3]}")
    _verify(cluster, producer, committers, bootstrap)


@pytest.mark.slow
def test_kill_9_of_the_leader_during_a_produce_and_commit_storm_loses_nothing(cluster: Cluster) -> None:
    producer, bootstrap = _start(cluster)
    leader = partition_leader(cluster, TOPIC)
    committers = _committers(cluster, leader, 3, "killed")
    for _round in range(2):
        time.sleep(random.uniform(0.2, 1.0))  # the scenario: a random moment of the storm
        cluster.nodes[leader].kill()
        killed = time.monotonic()
        wait_for(lambda: partition_leader(cluster, TOPIC) not in (-1, leader), 30, "a takeover")
        _wait_serving(cluster, producer, committers, killed)
        cluster.start_node(leader)
        restarted = time.monotonic()
        wait_for(lambda: partition_leader(cluster, TOPIC) == leader, 40, "the restarted node back as leader")
        _wait_serving(cluster, producer, committers, restarted)
    _verify(cluster, producer, committers, bootstrap)


@pytest.mark.slow
def test_etcd_stopped_longer_than_the_lease_then_restarted_loses_nothing(own_etcd: EtcdProcess,
                                                                         tmp_path: Path) -> None:
    cluster = Cluster(own_etcd, tmp_path, **{"log.segment.bytes": SEGMENT_BYTES})
    try:
        producer, bootstrap = _start(cluster)
        committers = _committers(cluster, partition_leader(cluster, TOPIC), 2, "etcd-away")
        own_etcd.stop()
        stopped = time.monotonic()
        time.sleep(cluster.session_timeout_ms / 1000 + 2)  # the scenario: etcd away past every lease
        # Without etcd no node may believe its lease still holds: nothing is acknowledged. That
        # nothing is has no condition to wait on: a node that would acknowledge is given a second.
        quiet_from = time.monotonic()
        time.sleep(1)
        assert producer.acks_after(quiet_from) == 0
        assert all(c.first_success_after(quiet_from) is None for c in committers)
        own_etcd.start()
        _wait_serving(cluster, producer, committers, stopped, timeout=60)
        _verify(cluster, producer, committers, bootstrap)
    finally:
        cluster.stop_all()


@pytest.mark.slow
def test_etcd_restarted_under_load_loses_nothing(own_etcd: EtcdProcess, tmp_path: Path) -> None:
    cluster = Cluster(own_etcd, tmp_path, **{"log.segment.bytes": SEGMENT_BYTES})
    try:
        producer, bootstrap = _start(cluster)
        committers = _committers(cluster, partition_leader(cluster, TOPIC), 2, "etcd-restart")
        for _round in range(2):
            own_etcd.stop()
            restarted = time.monotonic()
            own_etcd.start()
            _wait_serving(cluster, producer, committers, restarted, timeout=60)
        _verify(cluster, producer, committers, bootstrap)
    finally:
        cluster.stop_all()


# ---- network partitions: each node in a network namespace of its own ------------------------------


@pytest.fixture
def partitioned(etcd: EtcdProcess, tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, dict[str, Relay]]]]:
    """Two nodes, each in a network namespace with only its loopback; the test relays their
    client port from its own namespace and etcd's port into theirs: ``relays[node]["clients"]``
    and ``relays[node]["etcd"]`` cut and heal each path."""
    if not netns_available():
        pytest.skip("network namespaces need root (ip netns)")
    from testkit.ports import free_port

    cluster = Cluster(etcd, tmp_path, **{"log.segment.bytes": SEGMENT_BYTES})
    namespaces: list[Namespace] = []
    relays: dict[int, dict[str, Relay]] = {}
    try:
        for node in (1, 2):
            ns = Namespace()
            namespaces.append(ns)
            port = free_port()
            cluster.ports[node] = port
            cluster.command_prefix[node] = ns.wrap([])
            relays[node] = {"clients": Relay(port, None, ns.name), "etcd": Relay(etcd.client_port, ns.name, None)}
            for relay in relays[node].values():
                relay.start()
        yield cluster, relays
    finally:
        cluster.stop_all()
        for by_path in relays.values():
            for relay in by_path.values():
                relay.close()
        for ns in namespaces:
            ns.delete()


@pytest.mark.slow
def test_a_leader_cut_off_from_etcd_but_not_its_clients_acknowledges_nothing_more(
        partitioned: tuple[Cluster, dict[int, dict[str, Relay]]]) -> None:
    cluster, relays = partitioned
    producer, bootstrap = _start(cluster)
    leader = partition_leader(cluster, TOPIC)
    other = next(n for n in cluster.nodes if n != leader)
    committers = _committers(cluster, leader, 2, "no-etcd")
    relays[leader]["etcd"].set_cut(True)
    cut = time.monotonic()
    try:
        # The cut-off node still answers its clients, but stops writing and acknowledging within
        # its lease; the other node takes over once etcd expires the lease.
        wait_for(lambda: leader_seen_by(cluster, other, TOPIC) == other, 30, "a takeover")
        _wait_serving(cluster, producer, committers, cut)
        time.sleep(2)  # the scenario: the cut lasts while the other node serves
    finally:
        relays[leader]["etcd"].set_cut(False)
    healed = time.monotonic()
    wait_for(lambda: partition_leader(cluster, TOPIC) == leader, 40, "the healed node leading again")
    _wait_serving(cluster, producer, committers, healed)
    _verify(cluster, producer, committers, bootstrap)
    log = cluster.nodes[leader].log()
    assert "cluster.partition_lost" in log and "lease" in log


@pytest.mark.slow
def test_a_leader_cut_off_from_its_clients_but_not_etcd_keeps_its_partitions_and_loses_nothing(
        partitioned: tuple[Cluster, dict[int, dict[str, Relay]]]) -> None:
    cluster, relays = partitioned
    producer, bootstrap = _start(cluster)
    leader = partition_leader(cluster, TOPIC)
    other = next(n for n in cluster.nodes if n != leader)
    committers = _committers(cluster, leader, 2, "no-clients")
    relays[leader]["clients"].set_cut(True)
    cut = time.monotonic()
    try:
        # The scenario: the cut lasts two session timeouts, past any lease that would lapse.
        time.sleep(2 * cluster.session_timeout_ms / 1000)
        # Its lease holds: the partition stays its own, and nothing moves while clients cannot
        # reach it (only what it acknowledged before the cut, read within the margin, arrives).
        assert leader_seen_by(cluster, other, TOPIC) == leader
        assert producer.acks_after(cut + 1.0) == 0
    finally:
        relays[leader]["clients"].set_cut(False)
    healed = time.monotonic()
    _wait_serving(cluster, producer, committers, healed)
    assert partition_leader(cluster, TOPIC) == leader
    _verify(cluster, producer, committers, bootstrap)
    assert "cluster.partition_lost" not in cluster.nodes[leader].log()
