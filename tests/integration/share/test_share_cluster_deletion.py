"""Deleting a share group or a topic in a cluster deletes the share state where it lives: two
`kcoord serve` nodes on one shared data dir and a real etcd, a group coordinated by one node whose
share partition (topic partition and ``__share_group_state`` key) lives on the other. After
DeleteGroups, a group of the same name starts afresh (``share.auto.offset.reset``), and nothing
it had acknowledged comes back; after DeleteTopics, the old topic's share state is tombstoned
where it lives and the topic created again under the same name is consumed from its start."""

from __future__ import annotations

import base64
import time

import pytest

from broker.coordinators.group.core.base.partitioning import partition_for
from broker.coordinators.share.service.coordinator import coordinator_key
from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest
from protocol.payloads import share_state_records
from protocol.record_batch import decode_records, iter_batches
from tests.integration.helpers.clients import create_topic, set_group_configs
from tests.integration.helpers.cluster import Cluster, partition_leader, wait_for

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
)

pytestmark = [pytest.mark.timeout(150)]

CLUSTER_OVERRIDES = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500"}
STATE_TOPIC = "__share_group_state"
STATE_PARTITIONS = 50  # share.coordinator.state.topic.num.partitions


def topic_id(cluster: Cluster, topic: str) -> bytes:
    with WireClient("127.0.0.1", cluster.alive()[0].port, timeout=5) as c:
        r = c.call(ApiKey.Metadata, 12, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                                       allow_auto_topic_creation=False))
    return bytes(r.topics[0].topic_id)


def state_owner(cluster: Cluster, group: str, tid: bytes, partition: int) -> int:
    """The node coordinating the share partition's ``__share_group_state`` key."""
    key = f"{group}:{base64.urlsafe_b64encode(tid).rstrip(b'=').decode()}:{partition}"
    with WireClient("127.0.0.1", cluster.alive()[0].port, timeout=5) as c:
        r = c.call(ApiKey.FindCoordinator, 6, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]))
    return int(r.coordinators[0].node_id) if r.coordinators[0].error_code == 0 else -1


def group_elsewhere(cluster: Cluster, tid: bytes, holder: int, prefix: str) -> str:
    """A group coordinated by the node that is not ``holder``, whose share partition 0 of ``tid``
    has its state coordinated by ``holder``."""
    for i in range(200):
        group = f"{prefix}-{i}"
        if cluster.coordinator(group) not in (holder, -1) and state_owner(cluster, group, tid, 0) == holder:
            return group
    raise AssertionError("no such group among 200 names")


def start_at_log_start(bootstrap: str, group: str) -> None:
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v.encode(), partition=0)
    assert p.flush(15) == 0


def consume(bootstrap: str, group: str, topic: str, want: int, seconds: float) -> list[str]:
    """What a new share consumer of ``group`` is delivered (each accepted, durable before
    ``commit_sync`` returns) until ``want`` records or ``seconds`` have passed."""
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    got: list[str] = []
    try:
        deadline = time.monotonic() + seconds
        while len(got) < want and time.monotonic() < deadline:
            batch = [m for m in c.poll(0.5) if m.error() is None]
            for m in batch:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                got.append((m.value() or b"").decode())
            if batch:
                c.commit_sync()
    finally:
        c.close()
    return got


def delete_group(bootstrap: str, group: str) -> None:
    """DeleteGroups, again while the closed consumer's leave is on its way (NON_EMPTY_GROUP)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def deleted() -> bool:
        try:
            admin.delete_consumer_groups([group])[group].result(15)
            return True
        except ck.KafkaException as exc:
            if exc.args[0].code() != ck.KafkaError.NON_EMPTY_GROUP:
                raise
            return False

    wait_for(deleted, 60, f"{group} deleted (its members gone)", step=0.3)


def two_nodes(cluster: Cluster, topic: str) -> tuple[str, bytes, int]:
    for node in (1, 2):
        cluster.start_node(node)
    cluster.wait_spread({1, 2})
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    create_topic(bootstrap, topic, 1)
    wait_for(lambda: partition_leader(cluster, topic) in (1, 2), 30, "a leader")
    return bootstrap, topic_id(cluster, topic), partition_leader(cluster, topic)


def test_deleted_share_group_starts_afresh_where_its_state_lives_on_another_node(cluster: Cluster) -> None:
    topic = "sg-del-q"
    bootstrap, tid, leader = two_nodes(cluster, topic)
    group = group_elsewhere(cluster, tid, leader, "sg-del")
    start_at_log_start(bootstrap, group)
    first = [f"a{i}" for i in range(10)]
    produce(bootstrap, topic, first)
    assert sorted(consume(bootstrap, group, topic, len(first), 40)) == sorted(first)

    delete_group(bootstrap, group)
    # Once DeleteGroups answered, the state is gone where it lived: a durable tombstone on the
    # other node's __share_group_state partition.
    written = state_records(cluster, group, tid)
    assert written and written[-1] is None, written
    # The same name again: a new group, with nothing of the old one's acknowledgements.
    start_at_log_start(bootstrap, group)
    again = consume(bootstrap, group, topic, len(first), 30)
    assert sorted(again) == sorted(first)


def state_records(cluster: Cluster, group: str, tid: bytes) -> list[object | None]:
    """The values (None: a tombstone) of the share partition (group, tid, 0)'s records in its
    ``__share_group_state`` partition, in log order, as the segments in the shared directory hold
    them (written durably before the request that wrote them was answered)."""
    key = (group, tid, 0)
    directory = cluster.data_dir / f"{STATE_TOPIC}-{partition_for(coordinator_key(key), STATE_PARTITIONS)}"
    values: list[object | None] = []
    for segment in sorted(directory.glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            for record in decode_records(batch):
                rec = None if record.key is None else share_state_records.decode(record.key, record.value)
                if rec is not None and (rec.group, rec.topic_id, rec.partition) == key:
                    values.append(rec.value)
    return values


def test_deleted_topic_share_state_goes_and_the_new_topic_starts_afresh(cluster: Cluster) -> None:
    topic = "sg-deltopic-q"
    bootstrap, tid, leader = two_nodes(cluster, topic)
    group = group_elsewhere(cluster, tid, leader, "sg-deltopic")
    start_at_log_start(bootstrap, group)
    first = [f"a{i}" for i in range(10)]
    produce(bootstrap, topic, first)
    assert sorted(consume(bootstrap, group, topic, len(first), 40)) == sorted(first)

    # DeleteTopics at the group's coordinator, which neither leads the partition nor coordinates
    # its share state: once answered, the state is gone where it lived (a durable tombstone on
    # the other node's __share_group_state partition).
    with WireClient("127.0.0.1", cluster.nodes[cluster.coordinator(group)].port, timeout=20) as c:
        r = c.call(ApiKey.DeleteTopics, 4, DeleteTopicsRequest(topic_names=[topic], timeout_ms=15000))
    assert r.responses[0].error_code == 0
    written = state_records(cluster, group, tid)
    assert written and written[-1] is None, written
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for(lambda: topic not in admin.list_topics(timeout=5).topics, 15, "the topic gone")
    create_topic(bootstrap, topic, 1)
    wait_for(lambda: partition_leader(cluster, topic) in (1, 2), 30, "a leader")
    second = [f"b{i}" for i in range(5)]
    produce(bootstrap, topic, second)
    assert sorted(consume(bootstrap, group, topic, len(second), 40)) == sorted(second)
