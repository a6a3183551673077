"""The console seen from outside: its pages over HTTP, its live stream read as a browser's
EventSource reads it, and a group whose members come and go with real clients."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kclient.admin_client import KafkaAdmin
from testkit.kcoord import BrokerProcess
from tests.integration.helpers.clients import ThreadedConsumer, create_topic, start_consumer_process, wait_for

GROUP, TOPIC = "console-g", "console-t"


def get(broker: BrokerProcess, path: str) -> tuple[int, str, str]:
    """Status, content type and body of a console page."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{broker.console_port}{path}", timeout=30) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


class EventStream:
    """A console stream read in a thread: every event's name and data, in order. HTTP/1.0, so the
    body comes unchunked until the connection closes."""

    def __init__(self, broker: BrokerProcess, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.console_port), timeout=30)
        self.sock.sendall(f"GET {path} HTTP/1.0\r\nHost: console\r\nAccept: text/event-stream\r\n\r\n".encode())
        self.raw = b""
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        self.sock.settimeout(0.5)
        while not self.stopped.is_set():
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.raw += chunk

    @property
    def head(self) -> str:
        with self.lock:
            return self.raw.split(b"\r\n\r\n", 1)[0].decode("latin-1")

    def events(self) -> list[tuple[str, str]]:
        with self.lock:
            body = self.raw.split(b"\r\n\r\n", 1)[1].decode() if b"\r\n\r\n" in self.raw else ""
        out = []
        for block in body.split("\n\n")[:-1]:  # the last one may be incomplete
            name, data = "message", []
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[len("event: "):]
                elif line.startswith("data: "):
                    data.append(line[len("data: "):])
            if data:
                out.append((name, "\n".join(data)))
        return out

    def pages(self) -> list[str]:
        return [data for name, data in self.events() if name == "page"]

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(5)
        self.sock.close()


@dataclass
class Scenario:
    """A group of three members: two confluent-kafka consumers in threads (``stayer`` and
    ``leaver``) and one in a process of its own (``victim``), on a topic with records to read."""

    broker: BrokerProcess
    stayer: ThreadedConsumer
    leaver: ThreadedConsumer
    victim: subprocess.Popen[str]
    closed: list[ThreadedConsumer] = field(default_factory=list)

    def leave(self) -> None:
        """The leaver closes: LeaveGroup, a rebalance caused by ``member-left``."""
        self.leaver.close()
        self.closed.append(self.leaver)

    def time_out(self) -> None:
        """The victim is killed: no LeaveGroup, its session times out (6 s)."""
        self.victim.send_signal(signal.SIGKILL)
        self.victim.wait(10)

    def close(self) -> None:
        if self.victim.poll() is None:
            self.victim.kill()
            self.victim.wait(10)
        for c in (self.stayer, self.leaver):
            if c not in self.closed:
                c.close()


def three_members(broker: BrokerProcess) -> Scenario:
    create_topic(broker.bootstrap, TOPIC, 3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce(TOPIC, f"record-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    stayer = ThreadedConsumer(broker.bootstrap, GROUP, [TOPIC], **{"client.id": "stayer"})
    leaver = ThreadedConsumer(broker.bootstrap, GROUP, [TOPIC], **{"client.id": "leaver"})
    victim = start_consumer_process(broker.bootstrap, GROUP, TOPIC)
    scenario = Scenario(broker, stayer, leaver, victim)
    try:
        assert victim.stdout is not None and "ASSIGNED" in victim.stdout.readline()
        wait_for(lambda: len(stayer.held()) == 1 and len(leaver.held()) == 1, 60, "three members sharing the topic",
                 seen=lambda: (stayer.held(), leaver.held()))
    except BaseException:
        scenario.close()
        raise
    return scenario


def committed_offsets(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    with KafkaAdmin(broker.bootstrap) as admin:
        return admin.committed_offsets(group)


def group_acl(name: str, principal: str, operation: AclOperation) -> AclBinding:
    """An ACL allowing ``principal`` ``operation`` on group ``name``, from any host."""
    return AclBinding(ResourceType.GROUP, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def guarded_group(broker: BrokerProcess, group: str, topic: str, partitions: int, records: int) -> None:
    """``topic`` with ``records`` records in each partition and ``group``'s offsets committed at the
    end of every partition, with no member; User:alice may read the group (commit its offsets), and
    User:ANONYMOUS, as which the console's own connection and the tests' clients come in on
    PLAINTEXT, may do anything with it."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(records * partitions):
        producer.produce(topic, f"r{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_acls([group_acl(group, "User:alice", AclOperation.READ),
                                     group_acl(group, "User:ANONYMOUS", AclOperation.ALL)]).values():
        future.result(15)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, p, records) for p in range(partitions)], asynchronous=False)
    consumer.close()
    at_end = {(topic, p): records for p in range(partitions)}
    wait_for(lambda: committed_offsets(broker, group) == at_end, 30, "the commit")


def first_offsets(consumer: ThreadedConsumer) -> dict[int, int]:
    """The offset of the first record ``consumer`` read of each partition."""
    with consumer.lock:
        firsts: dict[int, int] = {}
        for _topic, partition, offset, _value in consumer.messages:
            firsts.setdefault(partition, offset)
        return firsts
