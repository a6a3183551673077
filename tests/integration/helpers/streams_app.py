"""One StreamsWordCount process (``tests/java/StreamsWordCount.java``) and what it last reported:
its state and its active and standby tasks; the sentences it counts, written to its input, and the
counts read back from its output (the tests and ``bench/streams_groups.py`` share them)."""

from __future__ import annotations

import json
import random
import signal
import struct
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from testkit.kafka import java_command

PARTITIONS = 4
WORDS = ["kafka", "streams", "group", "task", "epoch", "topology", "store", "changelog", "broker", "count"]


class Instance:
    """One StreamsWordCount process and what it last reported."""

    def __init__(self, classes: Path, libs: Path, bootstrap: str, app: str, topics: tuple[str, str],
                 state_dir: Path, log: Path, *options: str) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            java_command(libs, "StreamsWordCount", bootstrap, app, *topics, str(state_dir), *options,
                         classes=classes),
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.state = "CREATED"
        self.active: set[str] = set()
        self.standby: set[str] = set()
        self.errors: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event["event"] == "tasks":
                self.state = event["state"]
                self.active, self.standby = set(event["active"]), set(event["standby"])
            elif event["event"] == "state":
                self.state = event["state"]
            else:
                self.errors.append(event)

    def running(self) -> bool:
        return self.state == "RUNNING" and self.proc.poll() is None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.active, self.standby, self.state = set(), set(), "KILLED"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for n, line in enumerate(lines):
        producer.produce(topic, key=str(n), value=line)
    assert producer.flush(30) == 0


def counts(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[str, int]:
    """The last committed count of every word in the output topic (read up to each partition's end;
    under read_committed the position passes the transaction markers too)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        parts = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign(parts)
        latest: dict[str, int] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(tp.offset >= ends[tp.partition] for tp in consumer.position(parts) if ends[tp.partition]):
                break
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                latest[msg.key().decode()] = struct.unpack(">q", msg.value())[0]
        return latest
    finally:
        consumer.close()


def sentences(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(n)]
