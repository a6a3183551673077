"""Transactions against a kcoord cluster (etcd and several nodes on one shared data dir), with
confluent-kafka's transactional producer and read_committed consumers: the coordinator of a
transactional id on one node, the output partitions on every node (markers and KIP-890 checks
cross nodes), a zombie producer fenced, and the coordinator's node killed in the middle of a
read-process-write application."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kclient.wire_client import WireClient
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.describe_producers import DescribeProducersRequest
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.produce import ProduceRequest
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from protocol.record import Record
from protocol.record_batch import build_batch
from testkit.etcd import EtcdProcess
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.cluster import Cluster, wait_for
from tests.integration.helpers.read_process_write import COMMAND_DEADLINE_S, RemoteReadProcessWrite, Spec
from tests.integration.helpers.transactions import produce_plain, read_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def cluster(etcd: EtcdProcess, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(etcd, tmp_path, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    yield c
    c.stop_all()


def txn_coordinator(cluster: Cluster, txn_id: str) -> int:
    """The node FindCoordinator names for ``txn_id`` (-1 while nobody owns its partition)."""
    with WireClient("127.0.0.1", cluster.alive()[0].port, timeout=5) as c:
        r = c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=txn_id, key_type=1))
    return int(r.node_id) if r.error_code == 0 else -1


def txn_id_on(cluster: Cluster, node: int, prefix: str) -> str:
    for i in range(1000):
        txn_id = f"{prefix}-{i}"
        if txn_coordinator(cluster, txn_id) == node:
            return txn_id
    raise AssertionError(f"no transactional id coordinated by node {node}")


def start(cluster: Cluster, nodes: set[int]) -> str:
    for node in sorted(nodes):
        cluster.start_node(node)
    cluster.wait_spread(nodes)
    return ",".join(b.bootstrap for b in cluster.alive())


def producer(bootstrap: str, txn_id: str, **conf: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(30)
    return p


def test_a_transaction_spans_partitions_on_every_node_and_read_committed_sees_only_commits(
        cluster: Cluster) -> None:
    bootstrap = start(cluster, {1, 2})
    create_topic(bootstrap, "spread-out", 6)
    leaders = cluster.wait_topic_spread("spread-out", {1, 2})
    txn_id = txn_id_on(cluster, 1, "spread")
    p = producer(bootstrap, txn_id)
    p.begin_transaction()
    for part in range(6):
        p.produce("spread-out", value=b"c%d" % part, partition=part)
    p.commit_transaction(30)
    p.begin_transaction()
    for part in range(6):
        p.produce("spread-out", value=b"a%d" % part, partition=part)
    assert p.flush(30) == 0  # in the logs of both nodes, then aborted
    p.abort_transaction(30)
    p.begin_transaction()
    for part in range(6):
        p.produce("spread-out", value=b"d%d" % part, partition=part)
    p.commit_transaction(30)
    p.flush(10)
    assert sorted(read_all(bootstrap, "spread-out")) == sorted([b"c%d" % i for i in range(6)] +
                                                               [b"d%d" % i for i in range(6)])
    # The partitions of node 2 got their markers from node 1's coordinator: a read_committed
    # consumer reads past the aborted records (last stable offset moved) on every partition.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{uuid.uuid4()}",
                  "isolation.level": "read_committed"})
    try:
        for part, node in leaders.items():
            _low, high = c.get_watermark_offsets(TopicPartition("spread-out", part), timeout=10)
            assert high == 6, (part, node, high)  # 3 records and 3 markers on each partition
    finally:
        c.close()
    # Node 2 wrote the markers of its partitions at node 1's request, after node 1 had told it
    # that those partitions were in the transaction (KIP-890).
    assert requests_served(cluster, 2, "WriteTxnMarkers", 2) >= 3
    assert requests_served(cluster, 1, "AddPartitionsToTxn", 4) >= 3


def requests_served(cluster: Cluster, node: int, api: str, version: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.nodes[node].metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.search(rf'^kcoord_requests_total{{api="{api}",version="{version}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_write_txn_markers_is_refused_to_anyone_but_a_node(cluster: Cluster) -> None:
    start(cluster, {1, 2})
    create_topic(cluster.nodes[1].bootstrap, "guarded", 2)
    leaders = cluster.wait_topic_spread("guarded", {1, 2})
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    for part, node in leaders.items():
        with WireClient("127.0.0.1", cluster.nodes[node].port, client_id="kcoord-node-1/00") as c:
            r = c.call(ApiKey.WriteTxnMarkers, 1, WriteTxnMarkersRequest(markers=[Marker(
                producer_id=7, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
                topics=[Marker.WritableTxnMarkerTopic(name="guarded", partition_indexes=[part])])]))
        assert r.markers[0].topics[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_a_new_producer_with_the_same_transactional_id_fences_the_old_one(cluster: Cluster) -> None:
    bootstrap = start(cluster, {1, 2})
    create_topic(bootstrap, "fence-out", 4)
    cluster.wait_topic_spread("fence-out", {1, 2})
    txn_id = txn_id_on(cluster, 2, "fence")
    old = producer(bootstrap, txn_id)
    old.begin_transaction()
    for part in range(4):
        old.produce("fence-out", value=b"zombie", partition=part)
    assert old.flush(15) == 0
    new = producer(bootstrap, txn_id)  # fences the old one and aborts its open transaction
    with pytest.raises(KafkaException) as info:
        old.produce("fence-out", value=b"zombie-2", partition=0)
        old.commit_transaction(15)
    old.purge()
    error: KafkaError = info.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    new.begin_transaction()
    for part in range(4):
        new.produce("fence-out", value=b"live", partition=part)
    new.commit_transaction(15)
    assert read_all(bootstrap, "fence-out") == [b"live"] * 4


@pytest.mark.timeout(900)  # past the application's own deadlines, which fail it with its stacks
def test_the_coordinators_node_killed_mid_transaction_loses_nothing_and_duplicates_nothing(
        cluster: Cluster, tmp_path: Path) -> None:
    bootstrap = start(cluster, {1, 2, 3})
    create_topic(bootstrap, "rpw-in", 4)
    create_topic(bootstrap, "rpw-out", 4)
    cluster.wait_topic_spread("rpw-out", {1, 2, 3})
    produce_plain(bootstrap, "rpw-in", 300)
    victim = 2
    txn_id = txn_id_on(cluster, victim, "rpw")
    # The consumer group's coordinator is a survivor: librdkafka 2.16's send_offsets_to_transaction
    # can wait for good, past its timeout, once the node it holds as the group's coordinator is gone
    # (confluentinc/librdkafka#5456 and #5511: the coordinator request's timeout is never checked,
    # and it waits for that node to come back), whatever the brokers answer.
    group = cluster.groups_on(1, 1, "rpw")[0]
    # The application in a process of its own: a librdkafka call wedged past its timeout fails the
    # test with the application's stacks instead of hanging it.
    spec = Spec(bootstrap=bootstrap, txn_id=txn_id, group=group, src="rpw-in", dst="rpw-out", partitions=4)
    app = RemoteReadProcessWrite(spec, tmp_path / "read-process-write.log")
    try:
        for _ in range(3):
            app.call("step")
        # An aborted transaction: its records are in the logs of every node, marked aborted; the
        # application rewinds and moves the same input again (a duplicate if the abort leaked).
        app.call("abort_one", want=10)
        for _ in range(2):
            app.call("step")
        # A transaction in the middle: records written on every node and offsets sent, then the
        # coordinator's node dies before the commit.
        app.call("open", want=20)
        cluster.nodes[victim].kill()
        killed_at = time.monotonic()
        app.call("commit", timeout=45)
        ended_s = time.monotonic() - killed_at
        # The commit can end (aborted) before a survivor has taken the transactional id over.
        wait_for(lambda: txn_coordinator(cluster, txn_id) in (1, 3), 60, "a survivor coordinating the id",
                 seen=lambda: txn_coordinator(cluster, txn_id))
        assert app.call("drain", deadline_s=COMMAND_DEADLINE_S + 120, seconds=120, want=20), app.counts
        failover_s = time.monotonic() - killed_at
    finally:
        app.close()
    values = read_all(",".join(b.bootstrap for b in cluster.alive()), "rpw-out")
    counts = Counter(values)
    duplicates = {v: n for v, n in counts.items() if n > 1}
    assert not duplicates, (len(duplicates), list(duplicates)[:5])
    assert set(values) == {b"v%d" % i for i in range(300)}, (len(values), app.counts)
    # The offsets committed with the transactions: the whole input, each record once.
    survivors = ",".join(b.bootstrap for b in cluster.alive())
    tps = [TopicPartition(spec["src"], p) for p in range(spec["partitions"])]
    c = Consumer({"bootstrap.servers": survivors, "group.id": spec["group"], "isolation.level": "read_committed"})
    try:
        committed = {tp.partition: tp.offset for tp in c.committed(tps, 30)}
        ends = {tp.partition: c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    finally:
        c.close()
    assert committed == ends, (committed, ends)
    print(f"the interrupted transaction ended {ended_s:.1f} s after the kill; "
          f"failover and catch-up {failover_s:.1f} s: {app.counts}")


def test_an_open_transaction_of_a_dead_coordinator_is_aborted_by_the_new_one_at_its_timeout(
        cluster: Cluster) -> None:
    bootstrap = start(cluster, {1, 2, 3})
    create_topic(bootstrap, "orphan-out", 3)
    cluster.wait_topic_spread("orphan-out", {1, 2, 3})
    victim = 3
    txn_id = txn_id_on(cluster, victim, "orphan")
    orphan = producer(bootstrap, txn_id, **{"transaction.timeout.ms": 5000})
    orphan.begin_transaction()
    for part in range(3):
        orphan.produce("orphan-out", value=b"open", partition=part)
    assert orphan.flush(15) == 0
    # The coordinator's node dies and the producer never comes back to end its transaction.
    cluster.nodes[victim].kill()
    survivors = ",".join(b.bootstrap for b in cluster.alive())
    later = producer(survivors, f"{txn_id}-later")
    later.begin_transaction()
    for part in range(3):
        later.produce("orphan-out", value=b"later", partition=part)
    later.commit_transaction(30)
    # What committed behind the open transaction becomes readable only once the new coordinator
    # has aborted it (its timeout) and written the markers on every partition (read_all waits
    # for them).
    assert sorted(read_all(survivors, "orphan-out")) == [b"later"] * 3
    # The transactional id starts afresh on the survivors.
    again = producer(survivors, txn_id)
    again.begin_transaction()
    again.produce("orphan-out", value=b"again", partition=0)
    again.commit_transaction(30)
    assert sorted(read_all(survivors, "orphan-out")) == [b"again"] + [b"later"] * 3
    del orphan


def test_a_commit_prepared_by_a_dead_coordinator_is_completed_by_the_new_one(cluster: Cluster) -> None:
    bootstrap = start(cluster, {1, 2, 3})
    create_topic(bootstrap, "prep-out", 3)
    cluster.wait_topic_spread("prep-out", {1, 2, 3})
    coordinator, stalled = 2, 3
    txn_id = txn_id_on(cluster, coordinator, "prep")
    p = producer(bootstrap, txn_id, **{"transaction.timeout.ms": 30000})
    p.begin_transaction()
    for part in range(3):
        p.produce("prep-out", value=b"prepared", partition=part)
    assert p.flush(15) == 0
    # Node 3 stops answering: the coordinator's marker to it waits, the commit stays prepared...
    proc = cluster.nodes[stalled].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    outcome: list[BaseException | None] = []
    committer = threading.Thread(target=lambda: outcome.append(_call(p.commit_transaction, 60)), daemon=True)
    committer.start()
    wait_for(lambda: txn_state(cluster, coordinator, txn_id) == "PrepareCommit", 60, "the commit prepared",
             seen=lambda: txn_state(cluster, coordinator, txn_id))
    # ...when the coordinator's node dies; node 3 comes back once the cluster has named the
    # transactional id a new coordinator.
    cluster.nodes[coordinator].kill()
    wait_for(lambda: txn_coordinator(cluster, txn_id) not in (-1, coordinator), 30,
             "a new coordinator of the prepared transaction", step=0.2, seen=lambda: txn_coordinator(cluster, txn_id))
    os.kill(proc.pid, signal.SIGCONT)
    committer.join(60)
    assert outcome == [None], outcome
    survivors = ",".join(b.bootstrap for b in cluster.alive())
    assert read_all(survivors, "prep-out") == [b"prepared"] * 3
    logs = "".join(b.log_path.read_text() for b in cluster.nodes.values())
    assert re.search(r"transactions\.took_over .*unfinished=1", logs), "no node found the prepared commit"


def txn_state(cluster: Cluster, node: int, txn_id: str) -> str:
    """The state of ``txn_id``'s transaction as ``node`` (its coordinator) describes it."""
    with WireClient("127.0.0.1", cluster.nodes[node].port, timeout=5) as c:
        r = c.call(ApiKey.DescribeTransactions, 0, DescribeTransactionsRequest(transactional_ids=[txn_id]))
    return str(r.transaction_states[0].transaction_state)


def _call(fn: Any, *args: Any) -> BaseException | None:
    try:
        fn(*args)
    except BaseException as exc:  # handed to the test thread
        return exc
    return None


def test_init_transactions_on_the_survivors_fences_the_old_producer_and_aborts_what_it_left(
        cluster: Cluster) -> None:
    bootstrap = start(cluster, {1, 2, 3})
    create_topic(bootstrap, "succ-out", 3)
    cluster.wait_topic_spread("succ-out", {1, 2, 3})
    victim = 1
    txn_id = txn_id_on(cluster, victim, "succ")
    old = producer(bootstrap, txn_id, **{"transaction.timeout.ms": 60000})  # no timeout in this test
    old.begin_transaction()
    for part in range(3):
        old.produce("succ-out", value=b"old", partition=part)
    assert old.flush(15) == 0
    cluster.nodes[victim].kill()
    survivors = ",".join(b.bootstrap for b in cluster.alive())
    # The successor: its init_transactions reaches the new coordinator, which fences the old
    # producer and aborts its open transaction before answering.
    new = producer(survivors, txn_id, **{"transaction.timeout.ms": 60000})
    new.begin_transaction()
    for part in range(3):
        new.produce("succ-out", value=b"new", partition=part)
    new.commit_transaction(30)
    with pytest.raises(KafkaException):
        old.commit_transaction(30)
    old.purge()
    assert sorted(read_all(survivors, "succ-out")) == [b"new"] * 3


def test_transactions_version_2_add_partitions_and_offsets_on_the_coordinating_node(cluster: Cluster) -> None:
    """A client of transactions version 2 sends no AddPartitionsToTxn or AddOffsetsToTxn: the node
    taking its batch (Produce v12) or its offsets (TxnOffsetCommit v5) adds the partition to the
    transaction on the node that coordinates it (AddPartitionsToTxn v5 between the nodes), and
    EndTxn v5 ends it one epoch up, with the markers written on every node."""
    bootstrap = start(cluster, {1, 2})
    topic, group = "tv2-out", f"tv2-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 4)
    leaders = cluster.wait_topic_spread(topic, {1, 2})
    txn_id = txn_id_on(cluster, 1, "tv2")
    wire = {n: WireClient("127.0.0.1", cluster.nodes[n].port, timeout=10) for n in (1, 2)}
    try:
        ids = wire[1].call(ApiKey.InitProducerId, 4, InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        assert ids.error_code == 0
        pid, epoch = ids.producer_id, ids.producer_epoch
        now = int(time.time() * 1000)
        for partition, node in sorted(leaders.items()):
            records = build_batch([Record(0, 0, None, b"p%d" % partition, [])], base_timestamp=now, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=0, transactional=True)
            answer = wire[node].call(ApiKey.Produce, 12, ProduceRequest(
                transactional_id=txn_id, acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
                    name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=partition, records=records)])]))
            assert answer.responses[0].partition_responses[0].error_code == 0, (partition, node, answer)
        group_node = wire[1].call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=group, key_type=0)).node_id
        committed = wire[group_node].call(ApiKey.TxnOffsetCommit, 5, TxnOffsetCommitRequest(
            transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id_or_member_epoch=-1,
            member_id="", topics=[TxnOffsetCommitRequest.Topic(name=topic, partitions=[
                TxnOffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=1)])]))
        assert committed.topics[0].partitions[0].error_code == 0, committed
        described = wire[1].call(ApiKey.DescribeTransactions, 0, DescribeTransactionsRequest(transactional_ids=[txn_id]))
        state = described.transaction_states[0]
        assert state.transaction_state == "Ongoing"
        assert {(t.topic, p) for t in state.topics for p in t.partitions} >= {(topic, p) for p in leaders}
        ended = wire[1].call(ApiKey.EndTxn, 5, EndTxnRequest(transactional_id=txn_id, producer_id=pid,
                                                              producer_epoch=epoch, committed=True))
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid, epoch + 1)
    finally:
        for w in wire.values():
            w.close()
    assert sorted(read_all(bootstrap, topic)) == sorted(b"p%d" % p for p in leaders)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        assert [tp.offset for tp in c.committed([TopicPartition(topic, 0)], 30)] == [1]
    finally:
        c.close()


def producers_on(wire: WireClient, topic: str, partitions: list[int]) -> dict[tuple[int, int], tuple[int, int]]:
    """DescribeProducers of ``partitions``: (partition, producer id) -> (epoch, open transaction's
    first offset or -1)."""
    r = wire.call(ApiKey.DescribeProducers, 0, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=partitions)]))
    return {(p.partition_index, s.producer_id): (s.producer_epoch, s.current_txn_start_offset)
            for t in r.topics for p in t.partitions for s in p.active_producers}


def test_markers_between_nodes_carry_each_transactions_version_and_pass_its_epoch_rule(cluster: Cluster) -> None:
    """The coordinator on node 1, partitions led by both nodes: node 2 writes its partitions'
    markers on WriteTxnMarkers v2 requests carrying the transaction's version and checks each by
    that version's rule (KIP-890 part 2: a version 2 marker must be newer than the producer's
    epoch; a version 0 marker, at the transaction's own epoch, may not be older). A client of each
    protocol commits, aborts and commits again; every marker is taken (a refused one would leave
    its partition's last stable offset behind and the read-back waiting)."""
    bootstrap = start(cluster, {1, 2})
    topic = "tvx-out"
    create_topic(bootstrap, topic, 4)
    leaders = cluster.wait_topic_spread(topic, {1, 2})
    remote = sorted(p for p, node in leaders.items() if node == 2)
    # Transactions version 2, as a Java 4.x producer speaks it: Produce v12, EndTxn v5.
    txn2 = txn_id_on(cluster, 1, "tvx2")
    wire = {n: WireClient("127.0.0.1", cluster.nodes[n].port, timeout=10) for n in (1, 2)}
    try:
        ids = wire[1].call(ApiKey.InitProducerId, 4, InitProducerIdRequest(
            transactional_id=txn2, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
        assert ids.error_code == 0
        pid2, epoch = ids.producer_id, ids.producer_epoch
        for value, commit in ((b"v2-c1", True), (b"v2-a", False), (b"v2-c2", True)):
            now = int(time.time() * 1000)
            for partition, node in sorted(leaders.items()):
                records = build_batch([Record(0, 0, None, value, [])], base_timestamp=now, producer_id=pid2,
                                      producer_epoch=epoch, base_sequence=0, transactional=True)
                answer = wire[node].call(ApiKey.Produce, 12, ProduceRequest(
                    transactional_id=txn2, acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
                        name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                            index=partition, records=records)])]))
                assert answer.responses[0].partition_responses[0].error_code == 0, (value, partition, answer)
            ended = wire[1].call(ApiKey.EndTxn, 5, EndTxnRequest(transactional_id=txn2, producer_id=pid2,
                                                                  producer_epoch=epoch, committed=commit))
            assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (0, pid2, epoch + 1), (value, ended)
            epoch = ended.producer_epoch
        # Node 2's partitions took each bumped marker epoch: the producer is at the last one there,
        # with nothing open.
        assert producers_on(wire[2], topic, remote) == {(p, pid2): (epoch, -1) for p in remote}
    finally:
        for w in wire.values():
            w.close()
    # The first protocol (librdkafka): markers at the transaction's own epoch.
    txn0 = txn_id_on(cluster, 1, "tvx0")
    p = producer(bootstrap, txn0)
    for value, commit in ((b"v0-c1", True), (b"v0-a", False), (b"v0-c2", True)):
        p.begin_transaction()
        for partition in leaders:
            p.produce(topic, value=value, partition=partition)
        assert p.flush(30) == 0
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    want = [v for v in (b"v2-c1", b"v2-c2", b"v0-c1", b"v0-c2") for _ in leaders]
    assert sorted(read_all(bootstrap, topic)) == sorted(want)
    with WireClient("127.0.0.1", cluster.nodes[1].port, timeout=10) as c:
        described = c.call(ApiKey.DescribeTransactions, 0, DescribeTransactionsRequest(transactional_ids=[txn0]))
    state = described.transaction_states[0]
    with WireClient("127.0.0.1", cluster.nodes[2].port, timeout=10) as c:
        seen = producers_on(c, topic, remote)
    assert {(p, pid): v for (p, pid), v in seen.items() if pid == state.producer_id} == {
        (p, state.producer_id): (state.producer_epoch, -1) for p in remote}
    # Node 2 was sent v2 for every transaction (one request per transaction), v1 never.
    assert requests_served(cluster, 2, "WriteTxnMarkers", 2) >= 6
    assert requests_served(cluster, 2, "WriteTxnMarkers", 1) == 0
