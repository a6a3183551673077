"""Helpers of the cluster tests: several `kcoord serve` nodes on one shared data dir, joined
through a real etcd, and committers that follow FindCoordinator as a client does."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from testkit.etcd import EtcdProcess
from testkit.kcoord import BrokerProcess

OFFSETS = "__consumer_offsets"


class Cluster:
    def __init__(self, etcd: EtcdProcess, tmp_path: Path, session_timeout_ms: int = 3000,
                 **overrides: str) -> None:
        self.etcd = etcd
        self.data_dir = tmp_path / "shared"
        self.tmp_path = tmp_path
        self.cluster_id = "t" + uuid.uuid4().hex[:12]
        self.session_timeout_ms = session_timeout_ms
        self.overrides = overrides
        self.nodes: dict[int, BrokerProcess] = {}

    def start_node(self, node_id: int) -> BrokerProcess:
        b = BrokerProcess(self.data_dir, {
            "node.id": str(node_id), "etcd.endpoints": self.etcd.endpoint, "cluster.id": self.cluster_id,
            "broker.session.timeout.ms": str(self.session_timeout_ms), **self.overrides})
        b.log_path = self.tmp_path / f"node{node_id}.log"
        b.start()
        self.nodes[node_id] = b
        return b

    def alive(self) -> list[BrokerProcess]:
        return [b for b in self.nodes.values() if b.proc is not None and b.proc.poll() is None]

    def stop_all(self) -> None:
        for b in self.nodes.values():
            if b.proc is not None and b.proc.poll() is None:
                b.proc.send_signal(signal.SIGCONT)
            b.kill()

    def leaders(self, via: BrokerProcess | None = None, topic: str = OFFSETS) -> dict[int, int]:
        """Partition -> leader node of ``topic``, as Metadata tells it."""
        via = via or self.alive()[0]
        with WireClient("127.0.0.1", via.port, timeout=5) as c:
            r = c.call(ApiKey.Metadata, 9, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                                          allow_auto_topic_creation=False))
        return {p.partition_index: p.leader_id for p in r.topics[0].partitions}

    def wait_spread(self, nodes: set[int], timeout: float = 30.0) -> dict[int, int]:
        """Waits until every node of ``nodes`` serves its share and nothing is without an owner
        (as seen by each live node)."""
        deadline = time.monotonic() + timeout
        while True:
            views = []
            with contextlib.suppress(OSError):
                views = [self.leaders(b) for b in self.alive()]
            if views and all(len(v) == 50 and set(v.values()) == nodes for v in views) and \
                    all(v == views[0] for v in views) and self._all_loaded():
                return views[0]
            if time.monotonic() > deadline:
                raise AssertionError(f"ownership did not settle over {nodes}: {views[:1]}")
            time.sleep(0.2)

    def _all_loaded(self) -> bool:
        from protocol.messages.list_groups import ListGroupsRequest

        for b in self.alive():
            with WireClient("127.0.0.1", b.port, timeout=5) as c:
                if c.call(ApiKey.ListGroups, 0, ListGroupsRequest()).error_code != 0:
                    return False
        return True

    def coordinator(self, group: str) -> int:
        with WireClient("127.0.0.1", self.alive()[0].port, timeout=5) as c:
            r = c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=group, key_type=0))
        return int(r.node_id) if r.error_code == 0 else -1

    def groups_on(self, node_id: int, count: int, prefix: str = "g") -> list[str]:
        """``count`` group ids coordinated by ``node_id`` now."""
        found: list[str] = []
        i = 0
        while len(found) < count:
            group = f"{prefix}-{node_id}-{i}"
            if self.coordinator(group) == node_id:
                found.append(group)
            i += 1
        return found


def commit_request(group: str, topic: str, offset: int) -> Any:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.Topic(name=topic, partitions=[
            OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=offset)])])


def fetch_offset(cluster: Cluster, group: str, topic: str, timeout: float = 30.0) -> int:
    """The committed offset of ``group`` as its coordinator answers it now."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node = cluster.coordinator(group)
        if node in cluster.nodes:
            try:
                with WireClient("127.0.0.1", cluster.nodes[node].port, timeout=5) as c:
                    r = c.call(ApiKey.OffsetFetch, 7, OffsetFetchRequest(group_id=group, topics=None))
                if r.error_code == 0:
                    offsets = [p.committed_offset for t in r.topics if t.name == topic for p in t.partitions]
                    return offsets[0] if offsets else -1
            except OSError:
                pass
        time.sleep(0.1)
    raise AssertionError(f"no coordinator answered OffsetFetch for {group}")


class Committer(threading.Thread):
    """Commits 1, 2, 3, ... for one group, one request at a time, following FindCoordinator and
    NOT_COORDINATOR as a client does. ``acked`` is the last offset the cluster acknowledged."""

    def __init__(self, cluster: Cluster, group: str, topic: str = "storm") -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.group = group
        self.topic = topic
        self.acked = 0
        self.attempted = 0
        self.successes: list[float] = []  # monotonic times of acknowledged commits
        self.errors = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        client: WireClient | None = None
        while not self.stop_flag.is_set():
            try:
                if client is None:
                    node = self.cluster.coordinator(self.group)
                    if node not in self.cluster.nodes:
                        time.sleep(0.05)
                        continue
                    client = WireClient("127.0.0.1", self.cluster.nodes[node].port, timeout=20)
                offset = self.acked + 1
                self.attempted = max(self.attempted, offset)
                r = client.call(ApiKey.OffsetCommit, 2, commit_request(self.group, self.topic, offset))
                code = r.topics[0].partitions[0].error_code
                if code == 0:
                    self.acked = offset
                    self.successes.append(time.monotonic())
                else:
                    self.errors += 1
                    client.close()
                    client = None
                    time.sleep(0.05)
            except OSError:
                self.errors += 1
                if client is not None:
                    client.close()
                client = None
                time.sleep(0.05)
        if client is not None:
            client.close()

    def first_success_after(self, moment: float) -> float | None:
        return next((t for t in self.successes if t > moment), None)


class MemberCommitter(threading.Thread):
    """A confluent-kafka group member committing 1, 2, 3, ... synchronously on the one partition of
    ``topic``; librdkafka finds the coordinator again by itself when a node goes away."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}
        self.group = group
        self.topic = topic
        self.acked = 0
        self.attempted = 0
        self.successes: list[float] = []
        self.errors = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer(self.conf)
        consumer.subscribe([self.topic])
        try:
            while not self.stop_flag.is_set():
                consumer.poll(0.02)
                if not consumer.assignment():
                    continue
                offset = self.acked + 1
                self.attempted = max(self.attempted, offset)
                try:
                    consumer.commit(offsets=[TopicPartition(self.topic, 0, offset)], asynchronous=False)
                except KafkaException:
                    self.errors += 1
                    time.sleep(0.05)
                    continue
                self.acked = offset
                self.successes.append(time.monotonic())
        finally:
            consumer.close()

    def first_success_after(self, moment: float) -> float | None:
        return next((t for t in self.successes if t > moment), None)
