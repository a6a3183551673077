"""Deleting a topic in a cluster: two `kcoord serve` nodes on one shared data dir and a real etcd.
Only the owner of a partition removes its directory (under its claim): the node that handled
DeleteTopics leaves alone the partitions another node owns, however that node is doing; every
directory of the topic is nevertheless gone within seconds; and a topic deleted and created again
at once under the same name keeps what is written to it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.metadata import MetadataRequest
from storage.checkpoints import read_partition_metadata, write_partition_metadata
from testkit.etcd import EtcdProcess
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.cluster import Cluster, read_partition, wait_for

pytestmark = [pytest.mark.timeout(120)]

A, B = 1, 2


@pytest.fixture(scope="module")
def cluster(etcd: EtcdProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # A lease of 6 s: a node stopped for a second or two still owns its partitions, whatever the
    # load on the machine. No auto-creation: a producer of a deleted topic must not bring it back.
    c = Cluster(etcd, tmp_path_factory.mktemp("deletion"), session_timeout_ms=6000,
                **{"log.segment.bytes": "65536", "auto.create.topics.enable": "false"})
    try:
        # Both at once: each start waits until the node serves.
        starting = [threading.Thread(target=c.start_node, args=(node,)) for node in (A, B)]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join(60)
        wait_for(lambda: all(registered(c, node) == {A, B} for node in (A, B)), 30, "both nodes registered")
        yield c
    finally:
        c.stop_all()


def registered(cluster: Cluster, node: int) -> set[int]:
    """The nodes ``node`` knows of (Metadata's brokers)."""
    try:
        with WireClient("127.0.0.1", cluster.nodes[node].port, timeout=5) as c:
            answer = c.call(ApiKey.Metadata, 9, MetadataRequest(topics=[], allow_auto_topic_creation=False))
    except OSError:
        return set()
    return {b.node_id for b in answer.brokers}


def tree(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def leaders(cluster: Cluster, topic: str, count: int) -> dict[int, int]:
    found: dict[int, int] = {}

    def known() -> bool:
        nonlocal found
        try:
            found = cluster.leaders(cluster.nodes[A], topic)
        except (OSError, IndexError):
            return False
        return len(found) == count and set(found.values()) <= {A, B}

    wait_for(known, 20, f"a leader for every partition of {topic}")
    return found


def delete_then_create(cluster: Cluster, topic: str, partitions: int | None) -> None:
    """DeleteTopics (and, with ``partitions``, CreateTopics of the same name at once) on node A."""
    with WireClient("127.0.0.1", cluster.nodes[A].port, timeout=30) as c:
        deleted = c.call(ApiKey.DeleteTopics, 6, DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name=topic)], timeout_ms=10000))
        assert deleted.responses[0].error_code == 0
        if partitions is not None:
            created = c.call(ApiKey.CreateTopics, 7, CreateTopicsRequest(timeout_ms=10000, topics=[
                CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1)]))
            assert created.topics[0].error_code == 0


class Writer(threading.Thread):
    """A confluent-kafka producer (acks=all) writing to one partition without pause until stopped."""

    def __init__(self, bootstrap: str, topic: str, partition: int) -> None:
        super().__init__(daemon=True)
        self.conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 3000,
                     "request.timeout.ms": 2000, "retry.backoff.ms": 50}
        self.topic, self.partition = topic, partition
        self.acked = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        from confluent_kafka import KafkaError, Producer

        producer = Producer(self.conf)

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is None:
                self.acked += 1

        while not self.stop_flag.is_set():
            with contextlib.suppress(BufferError):  # the queue is full: poll, then go on
                producer.produce(self.topic, value=b"x" * 200, partition=self.partition, on_delivery=delivered)
            producer.poll(0.001)
        producer.flush(5)


def deletions_logged(cluster: Cluster, node: int, topic: str) -> set[int]:
    pattern = re.compile(rf"partition\.deleted topic={re.escape(topic)} partition=(\d+)")
    return {int(m.group(1)) for m in pattern.finditer(cluster.nodes[node].log())}


def test_only_the_owner_removes_a_deleted_topics_partitions(cluster: Cluster) -> None:
    topic = "doomed"
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    create_topic(bootstrap, topic, 4)
    owner = leaders(cluster, topic, 4)
    of_a = [p for p, n in owner.items() if n == A]
    of_b = [p for p, n in owner.items() if n == B]
    assert of_a and of_b, owner
    writer = Writer(bootstrap, topic, of_b[0])
    writer.start()
    try:
        wait_for(lambda: writer.acked >= 500, 20, "the first acknowledgements from B")
        data = cluster.data_dir
        # B stops dead with writes in flight, owning its partitions until its lease runs out
        # (6 s): whatever A does meanwhile, B's directories are B's.
        cluster.pause(B)
        paused_at = time.monotonic()
        before = {p: tree(data / f"{topic}-{p}") for p in of_b}
        delete_then_create(cluster, topic, None)
        wait_for(lambda: not any((data / f"{topic}-{p}").exists() for p in of_a), 5, "A's own partitions removed")
        # That A leaves B's directories alone has no condition to wait on: a node that would
        # touch them is given until 1.2 s into the pause (well within B's 6 s lease) to do so.
        time.sleep(max(0.0, paused_at + 1.2 - time.monotonic()))
        assert {p: tree(data / f"{topic}-{p}") for p in of_b} == before
        assert not list(data.glob(f"{topic}-*-delete")) and not list(data.glob(f"{topic}-*.*-delete"))
        cluster.resume(B)
        # B removes its own when it learns of the deletion (or, if its lease ran out meanwhile,
        # whoever claims what nobody owns any more does).
        wait_for(lambda: not list(data.glob(f"{topic}-*")), 30, "every directory of the deleted topic removed")
    finally:
        if B in cluster.paused:
            cluster.resume(B)
        writer.stop_flag.set()
        writer.join(15)
    # Each deletion logged once, by the node that did it (a moment after the directory went).
    wait_for(lambda: deletions_logged(cluster, A, topic) | deletions_logged(cluster, B, topic) == set(owner), 30,
             "every deletion logged")
    assert deletions_logged(cluster, A, topic) >= set(of_a)
    assert not deletions_logged(cluster, A, topic) & deletions_logged(cluster, B, topic)


def test_a_topic_deleted_and_created_again_at_once_keeps_the_new_topics_data(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    topic = "again"
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    create_topic(bootstrap, topic, 2)
    owner = leaders(cluster, topic, 2)
    assert set(owner.values()) == {A, B}, owner

    def produce(prefix: bytes, count: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                             "message.timeout.ms": 20000})
        failures: list[object] = []
        for p in (0, 1):
            for i in range(count):
                producer.produce(topic, value=b"%s-%d-%d" % (prefix, p, i), partition=p,
                                 on_delivery=lambda err, _m: failures.append(err) if err else None)
        assert producer.flush(30) == 0 and not failures, failures

    produce(b"old", 300)
    delete_then_create(cluster, topic, 2)
    produce(b"new", 100)
    catalog = json.loads((cluster.data_dir / "kcoord-topics.json").read_text())
    new_id = bytes.fromhex(next(t["id"] for t in catalog["topics"] if t["name"] == topic))
    expected = {p: {i: b"new-%d-%d" % (p, i) for i in range(100)} for p in (0, 1)}
    for p in (0, 1):
        assert read_partition(bootstrap, topic, p, timeout=20) == (expected[p], 100)
    # Later, whatever the owners of the deleted topic's partitions did meanwhile, nothing of it
    # is lost, and each directory is the new topic's. A loss has no condition to wait on: an
    # owner that would remove the new topic's data late is given a second to do so.
    time.sleep(1.0)
    for p in (0, 1):
        assert read_partition(bootstrap, topic, p, timeout=20) == (expected[p], 100)
        assert read_partition_metadata(cluster.data_dir / f"{topic}-{p}") == new_id
    assert not list(cluster.data_dir.glob(f"{topic}-*-delete"))
    # The old topic's directories went, each once, by their owner (released, or replaced by the
    # new topic's partition opened under the same claim).
    wait_for(lambda: deletions_logged(cluster, A, topic) | deletions_logged(cluster, B, topic) == {0, 1}, 30,
             "the old topic's deletions logged")
    assert not deletions_logged(cluster, A, topic) & deletions_logged(cluster, B, topic)


def test_the_directories_of_a_dead_owner_are_removed_once_its_claims_expire(cluster: Cluster) -> None:
    """Last: node B does not come back."""
    topic = "orphaned"
    bootstrap = ",".join(b.bootstrap for b in cluster.alive())
    create_topic(bootstrap, topic, 4)
    owner = leaders(cluster, topic, 4)
    of_b = [p for p, n in owner.items() if n == B]
    assert of_b, owner
    data = cluster.data_dir
    wait_for(lambda: all((data / f"{topic}-{p}").is_dir() for p in owner), 10, "every partition opened")
    # A directory of a topic the catalog never knew is nobody's to remove.
    stranger = data / "stranger-0"
    stranger.mkdir()
    write_partition_metadata(stranger, b"\x07" * 16)
    cluster.nodes[B].kill()
    killed_at = time.monotonic()
    before = {p: tree(data / f"{topic}-{p}") for p in of_b}
    delete_then_create(cluster, topic, None)
    # B's claims hold until its lease expires: its directories are left as they are meanwhile.
    # That nobody removes them early has no condition to wait on: a node that would is given a
    # second (of B's 6 s lease) to do so.
    time.sleep(1.0)
    assert {p: tree(data / f"{topic}-{p}") for p in of_b} == before
    wait_for(lambda: not list(data.glob(f"{topic}-*")), 30, "the dead owner's directories removed")
    assert time.monotonic() - killed_at > 3.0  # not before B's claims could have expired
    wait_for(lambda: deletions_logged(cluster, A, topic) == set(owner), 30, "every deletion logged by A")
    assert read_partition_metadata(stranger) == b"\x07" * 16
