"""Real-client helpers for the integration tests: confluent-kafka consumers in threads that record
their assignments, and a consumer in its own process (to kill it with SIGKILL)."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.helpers.cluster import wait_for as wait_for  # one polling helper for every test


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """Sets a group's configs (IncrementalAlterConfigs on the GROUP resource), as an operator's
    admin client does; raises what the broker refuses."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)


class ThreadedConsumer:
    """A confluent-kafka consumer polling in a thread; ``assignment`` is what it holds now."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], **conf: Any) -> None:
        # A consumer-protocol (KIP-848) member gets its session and heartbeat from the broker and
        # is assigned incrementally; librdkafka refuses the classic timing settings for it.
        consumer_protocol = conf.get("group.protocol") == "consumer"
        timing = {} if consumer_protocol else {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, **timing, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", **conf}
        self.topics = topics
        self.assignment: set[tuple[str, int]] = set()
        self.revocations = 0
        self.events: list[tuple[str, set[tuple[str, int]]]] = []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.messages: list[tuple[str, int, int, bytes | None]] = []
        self.commits: list[tuple[list[TopicPartition], threading.Event]] = []
        self.consumer = Consumer(self.conf)
        self.cooperative = consumer_protocol or "cooperative" in str(conf.get("partition.assignment.strategy", ""))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer: Any, parts: list[TopicPartition]) -> None:
        got = {(p.topic, p.partition) for p in parts}
        with self.lock:
            self.assignment = self.assignment | got if self.cooperative else got
            self.events.append(("assign", got))
        if self.cooperative:
            consumer.incremental_assign(parts)
        else:
            consumer.assign(parts)

    def _on_revoke(self, consumer: Any, parts: list[TopicPartition]) -> None:
        gone = {(p.topic, p.partition) for p in parts}
        with self.lock:
            self.assignment = self.assignment - gone if self.cooperative else set()
            if gone:
                self.revocations += 1
            self.events.append(("revoke", gone))
        if self.cooperative:
            consumer.incremental_unassign(parts)
        else:
            consumer.unassign()

    def _run(self) -> None:
        self.consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        while not self.stop_flag.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                with self.lock:
                    self.messages.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))
            while self.commits:
                offsets, done = self.commits.pop(0)
                try:
                    self.consumer.commit(offsets=offsets, asynchronous=False)
                finally:
                    done.set()

    def commit(self, offsets: list[TopicPartition], timeout: float = 20) -> None:
        """Commits from the polling thread (librdkafka delivers a commit's outcome to whoever polls)."""
        done = threading.Event()
        self.commits.append((offsets, done))
        if not done.wait(timeout):
            raise AssertionError("commit did not complete")

    def held(self) -> set[tuple[str, int]]:
        with self.lock:
            return set(self.assignment)

    def close(self) -> None:
        self.stop_flag.set()
        self.thread.join(15)
        self.consumer.close()


def covers_exactly(consumers: list[ThreadedConsumer], topic: str, partitions: int) -> bool:
    held = [c.held() for c in consumers]
    union: set[tuple[str, int]] = set().union(*held)
    disjoint = sum(len(h) for h in held) == len(union)
    return disjoint and union == {(topic, p) for p in range(partitions)} and all(held)


CONSUMER_PROCESS = r"""
import sys, time
from confluent_kafka import Consumer
bootstrap, group, topic = sys.argv[1:4]
conf = {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300, "enable.auto.commit": False}
if len(sys.argv) > 4:
    conf["group.instance.id"] = sys.argv[4]
c = Consumer(conf)
def on_assign(consumer, parts):
    print("ASSIGNED", sorted(p.partition for p in parts), flush=True)
    consumer.assign(parts)
c.subscribe([topic], on_assign=on_assign)
while True:
    c.poll(0.05)
"""


def start_consumer_process(bootstrap: str, group: str, topic: str,
                           instance_id: str | None = None) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", CONSUMER_PROCESS, bootstrap, group, topic]
    if instance_id:
        args.append(instance_id)
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
