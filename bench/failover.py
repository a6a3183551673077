"""Failover as a client with default settings sees it: the time from the stop of a partition's
leader (SIGSTOP) until a producer and a consumer make progress again.

    python -m bench.failover [--rounds 5] [--client librdkafka|java|both] [--resume served|SECONDS]
                             [--lease-ms 3000] [--root CHECKOUT] [--librdkafka-debug FILE]

Two `kcoord serve` nodes on one shared data dir and a real etcd (Debian's etcd-server), a topic
of one partition. The clients measured keep every setting at its default but ``bootstrap.servers``
(both nodes), ``acks=all`` and the consumer's ``group.id``:

- ``librdkafka``: a confluent-kafka Producer sending 200 records a second, and a Consumer in a
  group subscribed to the topic;
- ``java``: Kafka 4.4's KafkaProducer and KafkaConsumer (bench/java/FailoverClients.java, compiled
  once against the jars of scripts/kafka.sh), the same.

A feeder (a producer tuned to fail over fast: 2 s request timeout, metadata every second) writes
beside them, so that the consumer has new records to read as soon as the cluster serves again,
whatever the measured producer is doing. The consumer's group is coordinated by the node that is
not stopped (the data path is measured, not a coordinator's failover).

Each round stops the partition's leader and keeps it stopped until the other node names itself
the leader in its Metadata (``--resume served``, a node that hangs past its lease and comes back)
or for ``SECONDS`` (a node that stays hung), then resumes it. Printed per round, in seconds from
the stop: ``takeover`` (the other node names itself leader: the lease's expiry, up to
``broker.session.timeout.ms`` after the last renewal, plus the claim and the load), ``resumed``,
``producer`` (the first record sent after the stop acknowledged) and ``consumer`` (the first record
beyond those read before the stop received); then p50 and max of each. Afterwards the stopped node
takes its partition back (a controlled hand-over) before the next round.

``--root`` runs the kcoord of another checkout (an A/B comparison: ``git worktree add`` a commit).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import work_dir
from testkit.etcd import ETCD_BINARY, EtcdProcess
from testkit.kafka import classpath, java_command, kafka_libs
from testkit.kcoord import ROOT
from tests.integration.helpers.cluster import AckedProducer, Cluster, partition_leader, wait_for

TOPIC = "failover"
RATE = 200  # records a second from the measured producer and from the feeder
MARGIN_S = 0.5  # answers a stopped node had sent before it stopped are read within this
JAVA_SOURCE = ROOT / "bench" / "java" / "FailoverClients.java"


class Progress:
    """(monotonic time, offset) of every acknowledgement or record a client reported."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, int]] = []
        self.errors: list[str] = []

    def note(self, offset: int) -> None:
        with self.lock:
            self.events.append((time.monotonic(), offset))

    def count_after(self, moment: float) -> int:
        with self.lock:
            return sum(1 for t, _ in self.events if t > moment)

    def first_new_after(self, moment: float, margin: float = MARGIN_S) -> float | None:
        """When the client first got past every offset it had up to ``margin`` after ``moment``."""
        with self.lock:
            old = max((o for t, o in self.events if t <= moment + margin), default=-1)
            return next((t for t, o in self.events if t > moment and o > old), None)


class ProducerProgress(Progress):
    """An AckedProducer seen as a Progress."""

    def __init__(self, producer: AckedProducer) -> None:
        super().__init__()
        self.producer = producer

    def count_after(self, moment: float) -> int:
        return self.producer.acks_after(moment)

    def first_new_after(self, moment: float, margin: float = MARGIN_S) -> float | None:
        return self.producer.first_new_ack_after(moment, margin)


class LibrdkafkaConsumer(threading.Thread):
    def __init__(self, bootstrap: str, group: str, debug_log: str | None) -> None:
        super().__init__(daemon=True)
        self.conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group}
        if debug_log:
            self.conf |= {"debug": "broker,topic,metadata,fetch,cgrp", "logger": _file_logger(debug_log + ".consumer")}
        self.progress = Progress()
        self.stop_flag = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(self.conf)
        consumer.subscribe([TOPIC])
        try:
            while not self.stop_flag.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    self.progress.errors.append(str(msg.error()))
                    continue
                offset = msg.offset()
                if offset is not None:
                    self.progress.note(offset)
        finally:
            consumer.close()


def _file_logger(path: str) -> Any:
    import logging

    logger = logging.getLogger(path)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(created).3f %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return logger


class JavaClient:
    """One of FailoverClients' modes in a JVM; its lines noted as they arrive."""

    def __init__(self, classes: Path, libs: Path, *args: str) -> None:
        self.progress = Progress()
        self.proc = subprocess.Popen(java_command(libs, "FailoverClients", *args, classes=classes),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind in ("ack", "rec"):
                self.progress.note(int(rest))
            elif kind == "err":
                self.progress.errors.append(rest)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def compiled_java(libs: Path) -> Path:
    """bench/java compiled against Kafka's jars, once per change of the source or the jars."""
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes())
    digest.update(repr(sorted((j.name, j.stat().st_size) for j in libs.glob("*.jar"))).encode())
    classes = libs.parent / f"failover-classes-{digest.hexdigest()[:16]}"
    if not (classes / "FailoverClients.class").exists():
        partial = classes.with_name(f"{classes.name}.{os.getpid()}.tmp")
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(["javac", "-cp", classpath(libs), "-d", str(partial), str(JAVA_SOURCE)], check=True)
        partial.rename(classes)
    return classes


def _stop_thread(thread: Any, timeout: float) -> None:
    thread.stop_flag.set()
    thread.join(timeout)


def _stats(values: list[float]) -> str:
    if not values:
        return "-"
    return f"p50 {statistics.median(values):5.2f} s, max {max(values):5.2f} s"


def run(args: argparse.Namespace, client: str, tmp: Path) -> dict[str, list[float]]:
    (tmp / "etcd").mkdir()
    etcd = EtcdProcess(tmp / "etcd" / "data").start()
    cluster = Cluster(etcd, tmp, session_timeout_ms=args.lease_ms, root=args.root, **{"log.level": "WARNING"})
    rng = random.Random(args.seed)
    results: dict[str, list[float]] = {"takeover": [], "producer": [], "consumer": []}
    stoppers: list[Any] = []
    try:
        bootstrap, leader = cluster.start_with_topic(TOPIC)
        other = 2 if leader == 1 else 1
        group = cluster.groups_on(other, 1, "failover")[0]
        feeder = AckedProducer(bootstrap, TOPIC, rate=RATE)
        feeder.start()
        stoppers.append(lambda: _stop_thread(feeder, 30))
        producer: Progress
        consumer: Progress
        if client == "librdkafka":
            config: dict[str, Any] = {}
            if args.librdkafka_debug:
                config = {"debug": "broker,topic,metadata,msg", "logger": _file_logger(args.librdkafka_debug)}
            measured = AckedProducer(bootstrap, TOPIC, rate=RATE, config=config)
            measured.start()
            stoppers.append(lambda: _stop_thread(measured, 60))
            rk_consumer = LibrdkafkaConsumer(bootstrap, group, args.librdkafka_debug)
            rk_consumer.start()
            stoppers.append(lambda: _stop_thread(rk_consumer, 30))
            producer, consumer = ProducerProgress(measured), rk_consumer.progress
        else:
            libs = kafka_libs()
            assert libs is not None, "Kafka's jars are missing: run scripts/kafka.sh"
            classes = compiled_java(libs)
            java_producer = JavaClient(classes, libs, "produce", bootstrap, TOPIC, str(RATE))
            stoppers.append(java_producer.stop)
            java_consumer = JavaClient(classes, libs, "consume", bootstrap, TOPIC, group)
            stoppers.append(java_consumer.stop)
            producer, consumer = java_producer.progress, java_consumer.progress
        started = time.monotonic()
        wait_for(lambda: producer.count_after(started) > 0 and consumer.count_after(started) > 0, 120,
                 "the clients' first records")
        print(f"{client}: {args.rounds} rounds, lease {args.lease_ms} ms, resume {args.resume}, leader node {leader}, "
              f"kcoord from {args.root or ROOT}", flush=True)
        for round_no in range(1, args.rounds + 1):
            steady = time.monotonic()
            wait_for(lambda steady=steady: producer.count_after(steady) > 0 and consumer.count_after(steady) > 0, 120,
                     "the clients making progress before the stop")
            time.sleep(rng.uniform(0.5, 1.5))
            cluster.pause(leader)
            stopped = time.monotonic()
            try:
                takeover = wait_for(lambda: partition_leader(cluster, TOPIC) == other, 60, "a takeover") - stopped
                if args.resume != "served":
                    time.sleep(max(0.0, stopped + float(args.resume) - time.monotonic()))
            finally:
                cluster.resume(leader)
            resumed = time.monotonic() - stopped
            wait_for(lambda stopped=stopped: producer.first_new_after(stopped) is not None, 120,
                     "the producer's progress")
            wait_for(lambda stopped=stopped: consumer.first_new_after(stopped) is not None, 120,
                     "the consumer's progress")
            produced = producer.first_new_after(stopped)
            consumed = consumer.first_new_after(stopped)
            assert produced is not None and consumed is not None
            results["takeover"].append(takeover)
            results["producer"].append(produced - stopped)
            results["consumer"].append(consumed - stopped)
            print(f"round {round_no}: takeover {takeover:5.2f} s, resumed {resumed:5.2f} s, "
                  f"producer {produced - stopped:5.2f} s, consumer {consumed - stopped:5.2f} s", flush=True)
            wait_for(lambda: all(cluster.leaders(b, TOPIC).get(0) == leader for b in cluster.alive()), 60,
                     "the stopped node leading again")
        print(f"{client} (kcoord from {args.root or ROOT}, resume {args.resume}): "
              + "; ".join(f"{k} {_stats(v)}" for k, v in results.items()), flush=True)
        return results
    finally:
        for stop in reversed(stoppers):
            stop()
        cluster.stop_all()
        etcd.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--client", choices=("librdkafka", "java", "both"), default="both")
    parser.add_argument("--resume", default="served",
                        help="'served': resume the stopped node once the other serves; or seconds after the stop")
    parser.add_argument("--lease-ms", type=int, default=3000)
    parser.add_argument("--root", type=Path, default=None, help="a checkout whose kcoord the nodes run")
    parser.add_argument("--librdkafka-debug", default=None, help="file for librdkafka's debug log")
    parser.add_argument("--seed", type=int, default=4)
    args = parser.parse_args()
    if args.resume != "served":
        float(args.resume)
    if not os.path.exists(ETCD_BINARY):
        print("etcd is not installed (Debian package etcd-server)", file=sys.stderr)
        return 2
    clients = ["librdkafka", "java"] if args.client == "both" else [args.client]
    for client in clients:
        with work_dir(f"kcoord-failover-{client}-") as tmp:
            run(args, client, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
