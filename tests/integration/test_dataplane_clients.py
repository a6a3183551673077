"""Real clients end to end: each library produces, a group of three of its consumers reads and
commits, and a restarted group resumes exactly where the first one stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.dataplane_clients import (
    GroupRun,
    Seen,
    confluent_group,
    confluent_produce,
    kafka_python_group,
)
from tests.integration.helpers.transactions import read_all

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "js"
PARTITIONS = 6
HALF = 1500


# ---- one driver per client library ---------------------------------------------------------------







def kafka_python_produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
    for i in range(first, first + count):
        p.send(topic, key=b"k%d" % i, value=b"m%d" % i)
    p.flush(30)
    p.close()






def aiokafka_produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    from aiokafka import AIOKafkaProducer

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
        await p.start()
        try:
            futures = [await p.send(topic, key=b"k%d" % i, value=b"m%d" % i) for i in range(first, first + count)]
            await asyncio.gather(*futures)
        finally:
            await p.stop()

    asyncio.run(go())


def aiokafka_group(bootstrap: str, topic: str, group: str, target: int) -> Seen:
    from aiokafka import AIOKafkaConsumer

    run = GroupRun(target)

    async def member() -> None:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=10000)
        await c.start()
        try:
            while not run.done.is_set():
                polled = await c.getmany(timeout_ms=200)
                batch = [(m.partition, m.offset, m.value.decode()) for msgs in polled.values() for m in msgs]
                if batch:
                    await c.commit()
                    run.add(batch)
        finally:
            await c.stop()

    async def go() -> None:
        await asyncio.wait_for(asyncio.gather(*(member() for _ in range(3))), 120)

    asyncio.run(go())
    return run.seen


def node(*args: str) -> str:
    out = subprocess.run(["node", str(JS_DIR / "group_client.js"), *args], capture_output=True, text=True,
                         timeout=150, cwd=JS_DIR)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def kafkajs_produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    node("produce", bootstrap, topic, str(count), str(first))


def kafkajs_group(bootstrap: str, topic: str, group: str, target: int) -> Seen:
    lines = node("consume", bootstrap, topic, group, "3", str(target), "90000").strip().splitlines()
    return [(p, o, v) for p, o, v in json.loads(lines[-1])]


CLIENTS: dict[str, tuple[Callable[[str, str, int, int], None], Callable[[str, str, str, int], Seen]]] = {
    "confluent-kafka": (confluent_produce, confluent_group),
    "kafka-python": (kafka_python_produce, kafka_python_group),
    "aiokafka": (aiokafka_produce, aiokafka_group),
    "kafkajs": (kafkajs_produce, kafkajs_group),
}


def kafkajs_available() -> bool:
    return shutil.which("node") is not None and (JS_DIR / "node_modules" / "kafkajs").is_dir()


# ---- the tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("library", list(CLIENTS))
def test_group_of_three_commits_and_a_restarted_group_resumes(broker_factory: Any, library: str) -> None:
    if library == "kafkajs" and not kafkajs_available():
        pytest.skip("node and tests/js/node_modules (npm install) are needed for kafkajs")
    # A realistic initial rebalance delay lets all three members join the first generation.
    broker = broker_factory({"group.initial.rebalance.delay.ms": "2000"})
    produce, group = CLIENTS[library]
    topic = f"orders-{library}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, 0, HALF)
    first = group(broker.bootstrap, topic, "billing", HALF)
    produce(broker.bootstrap, topic, HALF, HALF)
    second = group(broker.bootstrap, topic, "billing", HALF)

    first_values = [v for _, _, v in first]
    second_values = [v for _, _, v in second]
    assert len(first_values) == len(set(first_values)) == HALF
    assert len(second_values) == len(set(second_values)) == HALF, "the restarted group re-read committed records"
    assert set(first_values) | set(second_values) == {f"m{i}" for i in range(2 * HALF)}
    assert {p for p, _, _ in first + second} == set(range(PARTITIONS))
    # Per partition, offsets are dense and in the order the producer sent each key's records.
    for p in range(PARTITIONS):
        offsets = sorted(o for q, o, _ in first + second if q == p)
        assert offsets == list(range(len(offsets)))


def test_kcat_produces_and_a_kcat_group_consumes_everything_once(broker: Any, tmp_path: Path) -> None:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed")
    create_topic(broker.bootstrap, "lines", 3)
    lines = [f"line-{i}" for i in range(5000)]
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        chunk = lines[: len(lines) // 5]
        lines = lines[len(chunk):] + chunk  # rotate: every codec sends a different fifth
        subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", "lines", "-z", codec], input="\n".join(chunk),
                       text=True, check=True, timeout=60)

    def consume() -> list[str]:
        out = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", "kcat-group", "-e", "-q",
                              "-X", "auto.offset.reset=earliest", "-f", "%s\n", "lines"],
                             capture_output=True, text=True, timeout=90)
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    got = consume()
    assert sorted(got) == sorted(f"line-{i}" for i in range(5000))
    assert consume() == []  # the group committed everything it read


class DroppingProxy:
    """A loopback TCP proxy that, for the first ``drops`` Produce responses, closes the client's
    connection instead of delivering the response: the producer must retry batches the broker
    already stored."""

    def __init__(self, target_port: int, listen_port: int, drops: int) -> None:
        self.target_port = target_port
        self.drops = drops
        self.dropped = 0
        self.server = socket.create_server(("127.0.0.1", listen_port))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.server.settimeout(0.2)
        while not self.stop.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            produce_ids: set[int] = set()
            threading.Thread(target=self._pump, args=(client, upstream, produce_ids, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, produce_ids, False), daemon=True).start()

    def _pump(self, src: Any, dst: Any, produce_ids: set[int], requests: bool) -> None:
        buf = b""
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                    size = int.from_bytes(buf[:4], "big")
                    frame, buf = buf[: 4 + size], buf[4 + size :]
                    if requests:
                        if int.from_bytes(frame[4:6], "big") == 0:
                            produce_ids.add(int.from_bytes(frame[8:12], "big"))
                    elif int.from_bytes(frame[4:8], "big") in produce_ids and self.dropped < self.drops:
                        self.dropped += 1
                        raise ConnectionError("response dropped")
                    dst.sendall(frame)
        except OSError:
            pass
        finally:
            # shutdown, not just close: the other pump thread is blocked reading these sockets.
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.server.close()


def test_idempotent_producer_retries_do_not_duplicate_records(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    from testkit.ports import free_port

    proxy_port = free_port()
    broker = broker_factory({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"})
    proxy = DroppingProxy(broker.port, proxy_port, drops=3)
    try:
        bootstrap = f"127.0.0.1:{proxy_port}"
        create_topic(bootstrap, "payments", 2)
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                      "retry.backoff.ms": 50})
        count = 3000
        for i in range(count):
            p.produce("payments", key=b"%d" % (i % 10), value=b"pay-%d" % i)
            p.poll(0)
            if i % 500 == 499:
                time.sleep(0.1)  # several batches, several dropped responses
        assert p.flush(60) == 0
        assert proxy.dropped == 3
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "audit", "auto.offset.reset": "earliest"})
        try:
            stored = sum(c.get_watermark_offsets(TopicPartition("payments", p), timeout=10)[1] for p in range(2))
        finally:
            c.close()
        assert stored == count  # the retried batches were answered, not stored again
        # Read from the start up to the end offsets: each record once, none twice.
        got = read_all(bootstrap, "payments")
        assert len(got) == count and set(got) == {b"pay-%d" % i for i in range(count)}
    finally:
        proxy.close()
