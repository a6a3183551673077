"""A Kafka Streams word count on the streams rebalance protocol (KIP-1071), against kcoord and
against Apache Kafka 4.4 on the same machine, in one run.

    python -m bench.streams_groups [--instances 3] [--lines 600] [--json]

Needs a JDK (javac) and the Kafka 4.4 jars (``KCOORD_KAFKA_LIBS``, or ``bash scripts/kafka.sh``).
For each broker, with the same streams-group settings (one standby replica, a 4 s session, a
500 ms heartbeat interval, no initial delay): ``--instances`` instances of
``tests/java/StreamsWordCount.java`` (a repartition topic, a counting state store,
``exactly_once_v2``) are started together and timed until every one is RUNNING with the tasks
spread (each task active on exactly one instance); ``--lines`` sentences are produced and one
instance is killed with SIGKILL, timed until the others run all its tasks; then until the output
counts (read_committed) are exactly the words produced. Beside the times: the broker's CPU
seconds over the whole scenario and its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bench.harness import ROOT, Broker, cpu_seconds, rss_mb
from testkit.kafka import KafkaProcess, classpath, kafka_libs
from tests.integration.helpers.clients import create_topic
from tests.integration.helpers.streams_app import Instance, counts, produce, sentences

PARTITIONS = 4
TASKS = {f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)}
# The same streams-group settings on both brokers (Kafka needs its lower bounds moved to allow them).
STREAMS = {"group.streams.num.standby.replicas": "1", "group.streams.session.timeout.ms": "4000",
           "group.streams.heartbeat.interval.ms": "500", "group.streams.initial.rebalance.delay.ms": "0"}
KAFKA_BOUNDS = {"group.streams.min.session.timeout.ms": "4000", "group.streams.min.heartbeat.interval.ms": "500"}


def compile_word_count(libs: Path, out: Path) -> Path:
    built = subprocess.run(["javac", "-cp", classpath(libs), "-d", str(out),
                            str(ROOT / "tests" / "java" / "StreamsWordCount.java")],
                           capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        raise RuntimeError(f"javac failed:\n{built.stdout}\n{built.stderr}")
    return out


def spread(instances: list[Instance]) -> bool:
    live = [i for i in instances if i.proc.poll() is None]
    owned = [t for i in live for t in i.active]
    return bool(live) and all(i.running() and i.active for i in live) and sorted(owned) == sorted(TASKS)


def wait(condition: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not within {timeout}s")
        time.sleep(0.1)
    return time.monotonic() - started


class Peak:
    """The broker's largest RSS, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        self.pid, self.mb = pid, rss_mb(pid)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stop.wait(0.2):
            try:
                self.mb = max(self.mb, rss_mb(self.pid))
            except OSError:
                return

    def done(self) -> float:
        self.stop.set()
        self.thread.join(2)
        return self.mb


def scenario(bootstrap: str, pid: int, classes: Path, libs: Path, work: Path, n: int, lines: int) -> dict[str, float]:
    suffix = uuid.uuid4().hex[:6]
    app, source, sink = f"wordcount-{suffix}", f"lines-{suffix}", f"counts-{suffix}"
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, sink, PARTITIONS)
    rng = random.Random(7)
    expected: Counter[str] = Counter()

    def feed(k: int) -> None:
        batch = sentences(rng, k)
        expected.update(w for line in batch for w in line.split())
        produce(bootstrap, source, batch)

    cpu, peak = cpu_seconds(pid), Peak(pid)
    instances = [Instance(classes, libs, bootstrap, app, (source, sink), work / f"{app}-state{i}",
                          work / f"{app}-{i}.log") for i in range(n)]
    try:
        feed(lines // 2)
        running = wait(lambda: spread(instances), 180, "every instance RUNNING with the tasks spread")
        feed(lines - lines // 2)
        instances[0].kill()
        takeover = wait(lambda: spread(instances[1:]), 120, "the killed instance's tasks taken over")
        exact = wait(lambda: counts(bootstrap, sink) == dict(expected), 120, "exact counts")
    finally:
        for i in instances:
            i.stop()
    return {"running_s": running, "takeover_s": takeover, "exact_counts_s": exact,
            "broker_cpu_s": cpu_seconds(pid) - cpu, "broker_peak_rss_mb": peak.done()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--lines", type=int, default=600)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    libs = kafka_libs()
    if libs is None:
        raise SystemExit("the Kafka 4.4 jars are needed: set KCOORD_KAFKA_LIBS or run scripts/kafka.sh")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-streams-") as tmp:
        work = Path(tmp)
        classes = compile_word_count(libs, work / "classes")
        broker = Broker(group_streams_num_standby_replicas="1", group_streams_session_timeout_ms="4000",
                        group_streams_heartbeat_interval_ms="500", group_streams_initial_rebalance_delay_ms="0")
        try:
            results["kcoord"] = scenario(f"127.0.0.1:{broker.port}", broker.pid, classes, libs, work,
                                         args.instances, args.lines)
        finally:
            broker.stop()
        kafka = KafkaProcess(libs, work / "kafka", {**STREAMS, **KAFKA_BOUNDS}).start()
        try:
            assert kafka.proc is not None
            results["kafka"] = scenario(kafka.bootstrap, kafka.proc.pid, classes, libs, work, args.instances,
                                        args.lines)
        finally:
            kafka.stop()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"word count, {args.instances} instances, {args.lines} lines, one instance killed")
    print(f"{'':28}{'kcoord':>10}{'Kafka 4.4':>12}")
    for key, label in (("running_s", "all RUNNING (s)"), ("takeover_s", "takeover after kill -9 (s)"),
                       ("exact_counts_s", "then exact counts (s)"), ("broker_cpu_s", "broker CPU (s)"),
                       ("broker_peak_rss_mb", "broker peak RSS (MB)")):
        print(f"{label:28}{results['kcoord'][key]:>10.1f}{results['kafka'][key]:>12.1f}")


if __name__ == "__main__":
    main()
