"""Helpers of the cluster tests: several `kcoord serve` nodes on one shared data dir, joined
through a real etcd, and committers that follow FindCoordinator as a client does."""

from __future__ import annotations

import contextlib
import os
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


def _prefixed(prefix: list[str]) -> type[BrokerProcess]:
    class Prefixed(BrokerProcess):
        def command(self) -> tuple[list[str], dict[str, str]]:
            args, env = super().command()
            return [*prefix, *args], env

    return Prefixed


class Cluster:
    def __init__(self, etcd: EtcdProcess, tmp_path: Path, session_timeout_ms: int = 3000,
                 root: Path | None = None, **overrides: str) -> None:
        """``root``: the checkout whose kcoord the nodes run (another revision, for A/B benches)."""
        self.etcd = etcd
        self.root = root
        self.data_dir = tmp_path / "shared"
        self.tmp_path = tmp_path
        self.cluster_id = "t" + uuid.uuid4().hex[:12]
        self.session_timeout_ms = session_timeout_ms
        self.overrides = overrides
        self.nodes: dict[int, BrokerProcess] = {}
        self.paused: set[int] = set()
        # Run a node's command under a prefix (``ip netns exec <ns>``), and on a port chosen first.
        self.command_prefix: dict[int, list[str]] = {}
        self.ports: dict[int, int] = {}

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the node stops dead (mid-write, perhaps), as a host or VM that hangs does."""
        proc = self.nodes[node_id].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        proc = self.nodes[node_id].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGCONT)
        self.paused.discard(node_id)

    def start_node(self, node_id: int) -> BrokerProcess:
        prefix = self.command_prefix.get(node_id)
        b = (BrokerProcess if prefix is None else _prefixed(prefix))(self.data_dir, {
            "node.id": str(node_id), "etcd.endpoints": self.etcd.endpoint, "cluster.id": self.cluster_id,
            "broker.session.timeout.ms": str(self.session_timeout_ms), **self.overrides}, root=self.root)
        if node_id in self.ports:
            b.port = self.ports[node_id]
            b.overrides["listeners"] = b.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{b.port}"
        b.log_path = self.tmp_path / f"node{node_id}.log"
        b.start()
        self.nodes[node_id] = b
        return b

    def start_with_topic(self, topic: str, nodes: tuple[int, ...] = (1, 2)) -> tuple[str, int]:
        """Starts ``nodes``, waits until they share the partitions, creates ``topic`` with one
        partition and waits until it has a leader; returns the bootstrap list and that leader."""
        from tests.integration.helpers.clients import create_topic  # it imports this module

        for node in nodes:
            self.start_node(node)
        self.wait_spread(set(nodes), timeout=60)
        bootstrap = ",".join(b.bootstrap for b in self.alive())
        create_topic(bootstrap, topic, 1)
        wait_for(lambda: partition_leader(self, topic) in self.nodes, 30, "a leader of the topic")
        return bootstrap, partition_leader(self, topic)

    def alive(self) -> list[BrokerProcess]:
        return [b for n, b in self.nodes.items()
                if b.proc is not None and b.proc.poll() is None and n not in self.paused]

    def stop_all(self) -> None:
        for b in self.nodes.values():
            if b.proc is not None and b.proc.poll() is None:
                b.proc.send_signal(signal.SIGCONT)
            b.kill()

    def leaders(self, via: BrokerProcess | None = None, topic: str = OFFSETS) -> dict[int, int]:
        """Partition -> leader node of ``topic``, as Metadata tells it."""
        via = via or self.alive()[0]
        return {p.partition_index: p.leader_id for p in topic_metadata("127.0.0.1", via.port, topic).partitions}

    def wait_spread(self, nodes: set[int], timeout: float = 60.0) -> dict[int, int]:
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

    def wait_topic_spread(self, topic: str, nodes: set[int], timeout: float = 60.0) -> dict[int, int]:
        """Waits until every live node names the same leader for each partition of ``topic``, and
        the leaders are exactly ``nodes``. A partition is claimed by its owner a moment after the
        topic is created, and each node learns of the others' claims a moment after that: a
        client's produce can already succeed through the owner while another node still answers
        -1 (leader not available) for it."""
        def views() -> list[dict[int, int]]:
            with contextlib.suppress(OSError):
                return [self.leaders(b, topic=topic) for b in self.alive()]
            return []

        def settled() -> bool:
            seen = views()
            return bool(seen) and all(v == seen[0] for v in seen) and set(seen[0].values()) == nodes

        wait_for(settled, timeout, f"{topic} led by {sorted(nodes)} as every node tells it", step=0.2, seen=views)
        return self.leaders(topic=topic)

    def _all_loaded(self) -> bool:
        from protocol.messages.list_groups import ListGroupsRequest

        for b in self.alive():
            with WireClient("127.0.0.1", b.port, timeout=5) as c:
                if c.call(ApiKey.ListGroups, 0, ListGroupsRequest()).error_code != 0:
                    return False
        return True

    def coordinator(self, group: str) -> int:
        """The node that coordinates ``group`` as a live node answers, -1 if none can tell."""
        alive = self.alive()
        if not alive:
            return -1
        with WireClient("127.0.0.1", alive[0].port, timeout=5) as c:
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


def fetch_offset(cluster: Cluster, group: str, topic: str, timeout: float = 60.0) -> int:
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

    def __init__(self, cluster: Cluster, group: str, topic: str = "storm", timeout: float = 20.0) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.timeout = timeout
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
                    client = WireClient("127.0.0.1", self.cluster.nodes[node].port, timeout=self.timeout)
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


# ---- durability: acknowledged writes recorded, then read back ---------------------------------------


class AckedProducer(threading.Thread):
    """A confluent-kafka producer (``acks=all``) writing ``v0``, ``v1``, ... to one partition
    without pause, a bounded number in flight, noting the offset of every acknowledged record
    (``acked``: offset -> value) and when each acknowledgement arrived.

    ``value_size`` pads each value to that many bytes; ``rate`` caps the records sent per second;
    ``config`` overrides the producer's settings (by default it fails over within a few seconds:
    short request and socket timeouts; a client with librdkafka's defaults waits out 30 s)."""

    FAST_FAILOVER = {"enable.idempotence": False, "linger.ms": 5, "request.timeout.ms": 2000,
                     "message.timeout.ms": 60000, "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000,
                     "socket.timeout.ms": 2000, "batch.size": 262144}

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, in_flight: int = 20000, *,
                 value_size: int = 0, rate: float | None = None, config: dict[str, Any] | None = None) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.in_flight = in_flight
        self.value_size = value_size
        self.rate = rate
        self.config = dict(self.FAST_FAILOVER if config is None else config)
        self.acked: dict[int, bytes] = {}
        self.ack_times: list[float] = []
        self.ack_offsets: list[int] = []  # beside ack_times
        self.sent = 0
        self.failed = 0
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()

    def run(self) -> None:
        from confluent_kafka import KafkaError, Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", **self.config})
        pending = [0]

        def delivered(err: KafkaError | None, msg: Any) -> None:
            pending[0] -= 1
            if err is not None:
                self.failed += 1
                return
            with self.lock:
                self.acked[msg.offset()] = msg.value()
                self.ack_times.append(time.monotonic())
                self.ack_offsets.append(msg.offset())

        started = time.monotonic()
        try:
            while not self.stop_flag.is_set():
                if pending[0] >= self.in_flight or (
                        self.rate is not None and self.sent >= (time.monotonic() - started) * self.rate):
                    producer.poll(0.005)
                    continue
                value = b"v%d" % self.sent
                if self.value_size:
                    value = (value + b"-").ljust(self.value_size, b"x")
                try:
                    producer.produce(self.topic, value=value, partition=self.partition, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.05)
                    continue
                self.sent += 1
                pending[0] += 1
                producer.poll(0)
        finally:
            producer.flush(60)

    def acks_after(self, moment: float) -> int:
        with self.lock:
            return sum(1 for t in self.ack_times if t > moment)

    def first_ack_after(self, moment: float) -> float | None:
        with self.lock:
            return next((t for t in self.ack_times if t > moment), None)

    def first_new_ack_after(self, moment: float, margin: float = 0.5) -> float | None:
        """When the first record written after ``moment`` was acknowledged: beyond every offset
        acknowledged up to ``margin`` after it (replies a stopped node had already sent arrive
        within that margin; a node taking over cannot answer that soon: it waits for a lease)."""
        with self.lock:
            old = max((o for t, o in zip(self.ack_times, self.ack_offsets) if t <= moment + margin), default=-1)
            return next((t for t, o in zip(self.ack_times, self.ack_offsets) if t > moment and o > old), None)


def read_partition(bootstrap: str, topic: str, partition: int = 0, timeout: float = 60.0,
                   config: dict[str, Any] | None = None) -> tuple[dict[int, bytes], int]:
    """Every record of the partition from its start, offset -> value, and its high watermark
    (asked first: what the read must reach). ``config`` adds to the reader's settings. A read that
    stops short fails with where it stopped, what the batch there holds and each node's answer."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    tp = TopicPartition(topic, partition)
    deadline = time.monotonic() + timeout
    settings = {"enable.auto.commit": False, "fetch.max.bytes": 8 << 20, **(config or {})}
    while True:
        # A client per attempt: librdkafka keeps a partition without a leader in its metadata
        # cache as a lasting error (LEADER_NOT_AVAILABLE, then "Unknown partition" without asking
        # again), and a node answers so for a moment whenever it cannot be sure of its lease.
        reader: Any = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-" + uuid.uuid4().hex[:8],
                                **settings})
        try:
            _low, high = reader.get_watermark_offsets(tp, timeout=5)
            break
        except KafkaException as exc:
            reader.close()
            if time.monotonic() > deadline:
                raise AssertionError(f"no watermarks of {topic}-{partition}: {exc}; the nodes' metadata: "
                                     f"{metadata_leaders(bootstrap, topic)}") from exc
            time.sleep(0.2)
    try:
        reader.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: dict[int, bytes] = {}
        last = -1
        errors: list[str] = []
        while last < high - 1:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"read {len(out)} records of {topic}-{partition} up to offset {last}, high watermark {high}; "
                    f"client errors {errors[-3:]}; the nodes' metadata: {metadata_leaders(bootstrap, topic)}")
            for msg in reader.consume(1000, 0.5):
                if msg.error() is None:
                    out[msg.offset()] = msg.value()
                    last = max(last, msg.offset())
                else:
                    errors.append(str(msg.error()))
        return out, high
    finally:
        reader.close()


def topic_metadata(host: str, port: int, topic: str) -> Any:
    """The node's Metadata answer for ``topic`` (without creating it)."""
    with WireClient(host, port, timeout=5) as c:
        r = c.call(ApiKey.Metadata, 9, MetadataRequest(topics=[MetadataRequest.Topic(name=topic)],
                                                      allow_auto_topic_creation=False))
    return r.topics[0]


def metadata_leaders(bootstrap: str, topic: str) -> dict[str, object]:
    """What each address of ``bootstrap`` answers to Metadata for ``topic``: the topic's error code
    and, per partition, (error code, leader); for a failed test's message."""
    answers: dict[str, object] = {}
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        try:
            t = topic_metadata(host, int(port), topic)
        except OSError as exc:
            answers[address] = repr(exc)
            continue
        answers[address] = {"topic_error": t.error_code,
                            "partitions": {p.partition_index: (p.error_code, p.leader_id) for p in t.partitions}}
    return answers


def lost_records(acked: dict[int, bytes], stored: dict[int, bytes]) -> list[tuple[int, bytes, bytes | None]]:
    """Acknowledged records not read back with their value: (offset, acknowledged, read)."""
    return [(o, v, stored.get(o)) for o, v in sorted(acked.items()) if stored.get(o) != v]


def leader_seen_by(cluster: Cluster, node: int, topic: str, partition: int = 0) -> int:
    """The leader of the partition as ``node`` tells it (-1 if it cannot be asked)."""
    try:
        return cluster.leaders(cluster.nodes[node], topic).get(partition, -1)
    except (OSError, IndexError):
        return -1


def partition_leader(cluster: Cluster, topic: str, partition: int = 0) -> int:
    """The leader every live node names for the partition, or -1 while they disagree or none leads."""
    answers = set()
    for b in cluster.alive():
        try:
            answers.add(cluster.leaders(b, topic).get(partition, -1))
        except (OSError, IndexError):
            return -1
    return answers.pop() if len(answers) == 1 else -1


def wait_for(predicate: Any, timeout: float, what: str, step: float = 0.05, seen: Any = None) -> float:
    """Polls ``predicate`` until true; returns the monotonic time it was seen true. On a timeout
    the message carries ``seen()``, the state the test was waiting on."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            state = "" if seen is None else f"; saw {seen()!r}"
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{state}")
        time.sleep(step)
    return time.monotonic()
