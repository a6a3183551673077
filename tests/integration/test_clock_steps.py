"""A node whose wall clock is stepped (NTP correcting a host's clock, an operator's ``date -s``)
times sessions, acquisition locks and transactions on real time all the same: a member that died
is fenced a session timeout after its last heartbeat, and a share consumer's stalled records come
back a lock duration after it took them, even when the clock stepped an hour back in between
(before, both waited out the hour); an open transaction outlives a clock stepped an hour ahead
(before, the coordinator's scan compared wall-clock times and aborted it at once, as Kafka's does).
The node runs under libfaketime, which steps only its wall clock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.etcd import ETCD_BINARY
from testkit.faults.cluster import FaultCluster, faketime_library

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    NewTopic,
)

from kclient.wire_client import WireClient  # noqa: E402
from protocol.messages import ApiKey  # noqa: E402
from protocol.messages.describe_transactions import DescribeTransactionsRequest  # noqa: E402
from tests.integration.helpers.cluster import wait_for  # noqa: E402
from tests.integration.helpers.share import consumer, make_topic, poll_until, produce  # noqa: E402

pytestmark = [
    pytest.mark.skipif(faketime_library() is None, reason="needs libfaketime (Debian package libfaketime)"),
    pytest.mark.skipif(not os.path.exists(ETCD_BINARY), reason="needs etcd (Debian package etcd-server)"),
]

HOUR_S = 3600
LOCK_MS = 20_000


@pytest.fixture
def node(tmp_path: Path) -> Iterator[FaultCluster]:
    cluster = FaultCluster(tmp_path, 1, clock=True, overrides={
        "group.initial.rebalance.delay.ms": "0", "group.share.record.lock.duration.ms": str(LOCK_MS),
        "group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def step_back(cluster: FaultCluster, seconds: int) -> None:
    step(cluster, -seconds)


def step(cluster: FaultCluster, seconds: int) -> None:
    """Steps the node's wall clock (back when negative) and waits until the node reads it (a
    record it stamps with its own time says so)."""
    cluster.skew(1, seconds)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("clock-probe", 1, 1, config={"message.timestamp.type": "LogAppendTime"})])[
        "clock-probe"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "clock-probe", "enable.auto.commit": False})
    reader.assign([TopicPartition("clock-probe", 0, 0)])
    try:
        stamps: list[float] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            producer.produce("clock-probe", b"t")
            producer.flush(10)
            m = reader.poll(5)
            if m is not None and m.error() is None:
                stamps.append(m.timestamp()[1] / 1000 - time.time())
                if (stamps[-1] < seconds / 2) if seconds < 0 else (stamps[-1] > seconds / 2):
                    return
        raise AssertionError(f"the node's clock was not stepped by {seconds} s: offsets seen {stamps}")
    finally:
        reader.close()


def test_a_dead_member_is_fenced_a_session_after_its_last_heartbeat_across_a_clock_step(node: FaultCluster) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("t", 4, 1)])["t"].result(30)
    conf: dict[str, Any] = {"bootstrap.servers": node.bootstrap, "group.id": "g", "session.timeout.ms": 10000,
                            "heartbeat.interval.ms": 1000}
    held: list[int] = [0]
    survivor = Consumer(conf)
    survivor.subscribe(["t"], on_assign=lambda c, ps: held.__setitem__(0, len(ps)))
    other = subprocess.Popen([sys.executable, "-c", (
        "from confluent_kafka import Consumer\n"
        f"c = Consumer({conf!r}); c.subscribe(['t'])\n"
        "while True: c.poll(0.1)\n")])
    try:
        deadline = time.monotonic() + 90
        while held[0] != 2 and time.monotonic() < deadline:
            survivor.poll(0.1)
        assert held[0] == 2, f"the two members did not share the 4 partitions: the survivor holds {held[0]}"
        os.kill(other.pid, signal.SIGKILL)  # no LeaveGroup: only its session can end it
        other.wait()
        node.skew(1, -HOUR_S)
        # A session timeout (10 s) after its last heartbeat, whatever the wall clock says; stepped
        # back an hour, a deadline kept on the wall clock would come due an hour later.
        deadline = time.monotonic() + 120
        while held[0] != 4 and time.monotonic() < deadline:
            survivor.poll(0.1)
        assert held[0] == 4, f"the dead member was not fenced: the survivor holds {held[0]} of 4 partitions"
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
        survivor.close()


def test_a_stalled_share_consumers_records_come_back_a_lock_after_across_a_clock_step(node: FaultCluster) -> None:
    broker = node.nodes[1]
    make_topic(broker, "q")
    # The group reads the topic from its start (helpers.share.consumer): records produced before
    # its first fetch has started the share partition (a slow join) are delivered too.
    a = consumer(broker, "sg", "q", explicit=True)
    b = None
    try:
        produce(broker, "q", ["x", "y"])
        held = poll_until(a, lambda got: len(got) >= 2, seconds=60)  # acquired; a never acknowledges
        assert len(held) == 2
        step_back(node, HOUR_S)
        b = consumer(broker, "sg", "q", explicit=True)
        # LOCK_MS after a took them; a lock deadline on the wall clock would hold them an hour more.
        back = poll_until(b, lambda got: len(got) >= 2, seconds=120, on_message=lambda m: b.acknowledge(m))
        assert sorted((m.value().decode(), m.delivery_count()) for m in back) == [("x", 2), ("y", 2)]
    finally:
        a.close()
        if b is not None:
            b.close()


def _transaction_state(cluster: FaultCluster, transactional_id: str) -> str:
    with WireClient("127.0.0.1", cluster.nodes[1].port, timeout=10) as c:
        answer = c.call(ApiKey.DescribeTransactions, 0, DescribeTransactionsRequest(transactional_ids=[transactional_id]))
        return str(answer.transaction_states[0].transaction_state)


def test_an_open_transaction_outlives_a_clock_stepped_ahead(node: FaultCluster) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("txn", 1, 1)])["txn"].result(30)

    def producer(transactional_id: str, timeout_ms: int) -> Producer:
        p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": transactional_id,
                      "transaction.timeout.ms": timeout_ms})
        p.init_transactions(60)
        p.begin_transaction()
        p.produce("txn", value=transactional_id.encode())
        p.flush(30)
        return p

    long_lived = producer("long-lived", 300_000)
    step(node, HOUR_S)
    # A transaction begun after the step with a timeout of 2 s is aborted 2 s later: the
    # coordinator's timeouts run. The first one, begun before the step, is not yet due.
    short_lived = producer("short-lived", 2_000)
    wait_for(lambda: _transaction_state(node, "short-lived") in ("PrepareAbort", "CompleteAbort"), 120,
             "the short transaction to time out", step=0.2, seen=lambda: _transaction_state(node, "short-lived"))
    assert _transaction_state(node, "long-lived") == "Ongoing"
    long_lived.commit_transaction(60)
    reader = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "txn-reader", "isolation.level":
                       "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    reader.assign([TopicPartition("txn", 0, 0)])
    try:
        got = poll_values(reader, 1, 60)
        assert got == [b"long-lived"]
    finally:
        reader.close()
        del short_lived


def poll_values(reader: Consumer, count: int, seconds: float) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + seconds
    while len(values) < count and time.monotonic() < deadline:
        m = reader.poll(0.5)
        if m is not None and m.error() is None:
            values.append(m.value())
    return values
