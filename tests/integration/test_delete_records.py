"""DeleteRecords and the log directory through real clients and real files: kafka-python's and
confluent-kafka's admin clients delete records and describe the log directory, consumers and
`kcoord groups` see the new log start, it survives kill -9, and in a cluster only the partition's
owner moves it and the next owner starts from it."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaAdminClient
from kafka.structs import TopicPartition as KafkaTopicPartition

from kclient.wire_client import WireClient
from kcoord.cli import main as kcoord_main
from protocol.messages import ApiKey
from protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from protocol.messages.fetch import FetchRequest, FetchResponse
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from storage.checkpoints import read_leader_epochs, read_offset_checkpoint, read_partition_log_start
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.cluster import Cluster, partition_leader, wait_for

pytestmark = [pytest.mark.timeout(120)]


def create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(30)


def produce(bootstrap: str, topic: str, count: int, partition: int = 0, size: int = 10) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, b"%05d" % i + b"x" * size, partition=partition)
        producer.poll(0)
    assert producer.flush(30) == 0


def listed(port: int, topic: str, timestamp: int) -> ListOffsetsResponse.Topic.Partition:
    with WireClient("127.0.0.1", port) as c:
        answer: ListOffsetsResponse = c.call(ApiKey.ListOffsets, 7, ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.Topic(name=topic, partitions=[
                ListOffsetsRequest.Topic.Partition(partition_index=0, timestamp=timestamp)])]))
    return answer.topics[0].partitions[0]


def earliest(port: int, topic: str) -> tuple[int, int]:
    p = listed(port, topic, -2)
    return p.error_code, p.offset


def fetch_error(port: int, topic: str, offset: int, partition: int = 0) -> int:
    with WireClient("127.0.0.1", port) as c:
        answer: FetchResponse = c.call(ApiKey.Fetch, 12, FetchRequest(
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, topics=[FetchRequest.Topic(
                topic=topic, partitions=[FetchRequest.Topic.Partition(partition=partition, fetch_offset=offset,
                                                                      partition_max_bytes=1 << 20)])]))
    return answer.responses[0].partitions[0].error_code


def delete_to(port: int, topic: str, offset: int, partition: int = 0) -> tuple[int, int]:
    with WireClient("127.0.0.1", port) as c:
        answer: DeleteRecordsResponse = c.call(ApiKey.DeleteRecords, 2, DeleteRecordsRequest(timeout_ms=30000, topics=[
            DeleteRecordsRequest.Topic(name=topic, partitions=[
                DeleteRecordsRequest.Topic.Partition(partition_index=partition, offset=offset)])]))
    p = answer.topics[0].partitions[0]
    return p.error_code, p.low_watermark


def end_for(port: int, topic: str, epoch: int, current: int) -> tuple[int, int, int]:
    """OffsetForLeaderEpoch as a consumer asks it (replica id -1)."""
    L = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    with WireClient("127.0.0.1", port) as c:
        answer: OffsetForLeaderEpochResponse = c.call(ApiKey.OffsetForLeaderEpoch, 4, OffsetForLeaderEpochRequest(
            replica_id=-1, topics=[L(topic=topic, partitions=[L.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current, leader_epoch=epoch)])]))
    p = answer.topics[0].partitions[0]
    return p.error_code, p.leader_epoch, p.end_offset


def test_admin_clients_delete_records_and_describe_log_dirs(broker: BrokerProcess, capsys: Any) -> None:
    topic = "deleted-records"
    create(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 20)

    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        deleted = kadmin.delete_records({KafkaTopicPartition(topic, 0): 7, KafkaTopicPartition(topic, 1): -1})
        assert {(tp.partition, r["low_watermark"]) for tp, r in deleted.items()} == {(0, 7), (1, 0)}
        (described,) = kadmin.describe_log_dirs(topic_partitions={topic: [0, 1]})
        (log_dir,) = described["log_dirs"]
        assert (log_dir["error_code"], log_dir["log_dir"]) == (0, os.path.abspath(broker.data_dir))
        assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
        (found,) = log_dir["topics"]
        sizes = {p["partition_index"]: p["partition_size"] for p in found["partitions"]}
        on_disk = sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-0").glob("*.log"))
        assert sizes == {0: on_disk, 1: 0} and on_disk > 20 * 15
        assert {(p["offset_lag"], p["is_future_key"]) for p in found["partitions"]} == {(0, False)}
    finally:
        kadmin.close()
    assert earliest(broker.port, topic) == (0, 7)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    done = admin.delete_records([TopicPartition(topic, 0, 12)])
    assert done[TopicPartition(topic, 0, 12)].result(30).low_watermark == 12
    listed = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})
    assert listed[TopicPartition(topic, 0)].result(30).offset == 12
    assert fetch_error(broker.port, topic, 11) == 1  # OFFSET_OUT_OF_RANGE
    assert fetch_error(broker.port, topic, 12) == 0

    # A consumer of a new group starts at the new log start.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "after-delete",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0)])
        first = None
        for _ in range(50):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                first = msg
                break
        assert first is not None and first.offset() == 12 and first.value().startswith(b"00012")
        consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    finally:
        consumer.close()

    # `kcoord groups`: a committed offset below the log start lags from the log start; a reset to
    # earliest lands on it.
    capsys.readouterr()
    assert kcoord_main(["groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group",
                        "after-delete"]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.startswith("after-delete"))
    assert row[3:6] == ["5", "20", "8"], out
    assert kcoord_main(["groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group",
                        "after-delete", "--topic", topic, "--to-earliest", "--execute"]) == 0
    out = capsys.readouterr().out
    assert any(line.split()[:4] == ["after-delete", topic, "0", "12"] for line in out.splitlines()), out


def test_the_log_start_survives_kill_9_and_old_segments_go(broker_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = broker_factory({"log.segment.bytes": "2048"}, data_dir=data)
    topic = "kept-start"
    create(broker.bootstrap, topic, 1)
    for _ in range(20):  # batches of 10: a few to a segment
        produce(broker.bootstrap, topic, 10, size=40)
    segments = sorted((data / f"{topic}-0").glob("*.log"))
    assert len(segments) > 4
    third_base = int(segments[3].stem)
    assert delete_to(broker.port, topic, third_base + 2) == (0, third_base + 2)
    # Answered once durable: the checkpoint holds it, the segments wholly below it are gone.
    assert read_offset_checkpoint(data / "log-start-offset-checkpoint")[(topic, 0)] == third_base + 2
    left = sorted(int(p.stem) for p in (data / f"{topic}-0").glob("*.log"))
    assert left[0] == third_base and len(left) == len(segments) - 3
    assert delete_to(broker.port, topic, 201) == (1, -1)  # past the high watermark

    broker.kill()
    again = broker_factory({"log.segment.bytes": "2048"}, data_dir=data)
    assert earliest(again.port, topic) == (0, third_base + 2)
    assert fetch_error(again.port, topic, third_base + 1) == 1
    assert fetch_error(again.port, topic, third_base + 2) == 0
    assert end_for(again.port, topic, 0, 0) == (0, 0, 200)


def _served(node: Any, api: str) -> float:
    """How many requests of ``api`` (any version) a node has served, from its metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(v) for v in re.findall(rf'^kcoord_requests_total{{api="{api}",version="\d+"}} (\S+)$', text,
                                            re.M))


def _poll_into(consumer: Consumer, seen: list[int]) -> bool:
    msg = consumer.poll(0.2)
    if msg is not None:
        assert msg.error() is None, msg.error()
        seen.append(msg.offset())
    return True


def test_in_a_cluster_the_owner_moves_the_log_start_and_the_next_owner_keeps_it(cluster: Cluster) -> None:
    """Only the partition's owner deletes records; its owner is killed; the next owner starts from
    the log start it left, at a higher epoch, and a librdkafka consumer checks its position with
    it (OffsetForLeaderEpoch, KIP-320) before reading on, without a reset and without a gap."""
    for node in (1, 2):
        cluster.start_node(node)
    cluster.wait_spread({1, 2})
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    topic = "cluster-deleted"
    create(bootstrap, topic, 1)
    wait_for(lambda: partition_leader(cluster, topic) in cluster.nodes, 30, "a leader of the topic")
    produce(bootstrap, topic, 30)
    owner = partition_leader(cluster, topic)
    other = next(n for n in cluster.nodes if n != owner)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "epoch-checker", "auto.offset.reset": "error",
                         "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 500})
    seen: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        wait_for(lambda: _poll_into(consumer, seen) and len(seen) >= 30, 30, "the first records")
        assert delete_to(cluster.nodes[other].port, topic, 10) == (6, -1)  # NOT_LEADER_OR_FOLLOWER
        assert delete_to(cluster.nodes[owner].port, topic, 10) == (0, 10)
        assert read_partition_log_start(cluster.data_dir / f"{topic}-0") == 10
        checked = _served(cluster.nodes[other], "OffsetForLeaderEpoch")
        cluster.nodes[owner].kill()
        wait_for(lambda: earliest(cluster.nodes[other].port, topic) == (0, 10), 60, "the next owner serving")
        produce(cluster.nodes[other].bootstrap, topic, 10)
        wait_for(lambda: _poll_into(consumer, seen) and len(seen) >= 40, 60, "the records after the change")
    finally:
        consumer.close()
    assert seen == list(range(40))
    assert _served(cluster.nodes[other], "OffsetForLeaderEpoch") > checked
    assert fetch_error(cluster.nodes[other].port, topic, 9) == 1
    # Owner epochs are real: the old owner's epoch ended where the new owner's began, the log end
    # it left; a client still at the old epoch is fenced.
    entries = read_leader_epochs(cluster.data_dir / f"{topic}-0")
    assert len(entries) == 2 and entries[1][1] == 30
    (old_epoch, _), (new_epoch, _) = entries
    assert end_for(cluster.nodes[other].port, topic, old_epoch, new_epoch) == (0, old_epoch, 30)
    assert end_for(cluster.nodes[other].port, topic, new_epoch, new_epoch) == (0, new_epoch, 40)
    assert end_for(cluster.nodes[other].port, topic, old_epoch, old_epoch) == (74, -1, -1)  # FENCED_LEADER_EPOCH
    assert end_for(cluster.nodes[other].port, topic, new_epoch, new_epoch + 1) == (75, -1, -1)
    # An epoch older than any left in the log ends where the log now starts.
    assert end_for(cluster.nodes[other].port, topic, 0, -1) == (0, 0, 10)
    # ListOffsets gives the epoch an offset was written in, which a consumer resetting to it checks
    # its position with after the next change.
    assert (listed(cluster.nodes[other].port, topic, -2).leader_epoch,
            listed(cluster.nodes[other].port, topic, -1).leader_epoch) == (old_epoch, new_epoch)
