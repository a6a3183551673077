"""A share group's dead-letter queue in a cluster: two `kcoord serve` nodes on one shared data dir
and a real etcd. The source topic's and the queue's partitions are spread over both nodes, so a
record rejected on one node's share partition is written to a queue partition the other node
leads (produced to it, as Kafka's brokers send dead letters) as well as to its own: every rejected
record reaches the queue once, on partition ``source partition % queue partitions``, with its key
and value and Kafka's headers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.helpers.clients import set_group_configs
from tests.integration.helpers.cluster import Cluster, wait_for

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    NewTopic,
)

pytestmark = [pytest.mark.timeout(180)]

SOURCE, QUEUE, GROUP = "dlq-cluster-src", "dlq.cluster", "dlq-cluster-group"
SOURCE_PARTITIONS, QUEUE_PARTITIONS = 4, 1  # one queue partition: the source partitions of the other node cross
CLUSTER_OVERRIDES = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"}


def test_rejected_records_reach_queue_partitions_on_either_node(cluster: Cluster) -> None:
    for node in (1, 2):
        cluster.start_node(node)
    cluster.wait_spread({1, 2})
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([
            NewTopic(SOURCE, SOURCE_PARTITIONS, 1),
            NewTopic(QUEUE, QUEUE_PARTITIONS, 1, config={"errors.deadletterqueue.group.enable": "true"})]).values():
        future.result(30)
    wait_for(lambda: set(cluster.leaders(topic=SOURCE).values()) == {1, 2}
             and -1 not in cluster.leaders(topic=QUEUE).values(), 30, "leaders of both topics")
    set_group_configs(bootstrap, GROUP, {"share.auto.offset.reset": "earliest",
                                         "errors.deadletterqueue.topic.name": QUEUE,
                                         "errors.deadletterqueue.copy.record.enable": "true"})
    producer = Producer({"bootstrap.servers": bootstrap})
    values = [f"v{i}" for i in range(16)]
    for i, v in enumerate(values):
        producer.produce(SOURCE, key=f"k{i}".encode(), value=v.encode(), partition=i % SOURCE_PARTITIONS)
    assert producer.flush(30) == 0
    source_leaders = cluster.leaders(topic=SOURCE)
    queue_leaders = cluster.leaders(topic=QUEUE)
    # Some dead letters cross nodes: a source partition led by one node, its queue partition by the other.
    assert any(source_leaders[p] != queue_leaders[p % QUEUE_PARTITIONS] for p in range(SOURCE_PARTITIONS))

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "share.acknowledgement.mode": "explicit"})
    c.subscribe([SOURCE])
    rejected: dict[str, int] = {}
    deadline = time.monotonic() + 60
    try:
        while len(rejected) < len(values):
            assert time.monotonic() < deadline, f"rejected only {sorted(rejected)}"
            got = [m for m in c.poll(0.5) if m.error() is None]
            for m in got:
                c.acknowledge(m, AcknowledgeType.REJECT)
                rejected[m.value().decode()] = m.partition()
            if got:
                c.commit_sync()
    finally:
        c.close()

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "dlq-cluster-reader",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False})
    reader.subscribe([QUEUE])
    letters: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(letters) < len(values):
            assert time.monotonic() < deadline, f"the queue holds only {len(letters)} of {len(values)} records"
            m = reader.poll(0.5)
            if m is not None and m.error() is None:
                letters.append(m)
    finally:
        reader.close()
    seen = {}
    for m in letters:
        headers = {k: v.decode() for k, v in m.headers()}
        source_partition = int(headers["__dlq.errors.partition"])
        assert m.partition() == source_partition % QUEUE_PARTITIONS
        assert headers["__dlq.errors.topic"] == SOURCE and headers["__dlq.errors.group"] == GROUP
        assert headers["__dlq.errors.message"] == "Offset rejected by client."
        seen[m.value().decode()] = (source_partition, m.key().decode())
    assert seen == {v: (rejected[v], "k" + v[1:]) for v in values}
