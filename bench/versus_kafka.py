"""kcoord beside Apache Kafka on the same machine, in one run, driven by the same load generators.

    python -m bench.versus_kafka [--seconds 5] [--warmup 2] [--members 2000] [--with-5000] [--json]
                                 [--baseline DIR] [--repeat N]

Run from the repository root after ``bash scripts/kafka.sh`` (which fetches Apache Kafka). Both
brokers are started here on free loopback ports: kcoord as a user runs it (``python -m kcoord
serve``, its defaults, ``group.initial.rebalance.delay.ms=0``), Apache Kafka as the tests run it
(``testkit.kafka.KafkaProcess``: one KRaft node, the same initial delay of 0). Each measurement
is taken on one broker and then at once on the other, which goes first alternating from one
measurement to the next, so that both see much the same machine:

* launch to the first answered request (ApiVersions), from the broker process's start;
* OffsetCommit requests/s with p50/p99 latency (after ``--warmup`` seconds of the same load) (4 connections x 8 in flight x 4 partitions, from
  a separate process, as ``bench/commits.py``), and the latency of one connection with one
  commit in flight;
* heartbeats/s from 50 members of one classic group heartbeating back to back
  (``bench/groups.py``);
* the time for 100 members to form a classic group (median of 3, ``bench/groups.py``);
* produce and fetch MB/s of 1 KiB messages with confluent-kafka (``bench/dataplane.py``);
* 2,000 members on their own connections, heartbeat every second and commit every five
  (``bench/members.py``), and 5,000 with ``--with-5000``;
* RSS idle (after startup and topic creation) and its peak under all that load.

Beside them, the broker's CPU per request (what the work costs, whatever else runs) and the time
its threads spent runnable but waiting for a CPU (on a loaded machine, how much of the latency is
the scheduler's: a single event-loop thread gets a smaller share of busy cores than a JVM's dozens
of threads). Prints a table: kcoord, Kafka and kcoord/Kafka. Kafka acknowledges writes once they are in the page
cache (it relies on replication, not fsync); kcoord's default acknowledges after fdatasync.
``--kcoord-flush interval`` runs kcoord the way Kafka writes.

``--baseline DIR`` puts kcoord from another checkout (the previous release, say) where Kafka
stands: an A/B of two revisions through the same generators, interleaved as above, Java not
needed. ``--repeat N`` runs the whole comparison N times (fresh brokers each time, which starts
first alternating too) and reports each figure's median, with each side's own spread
((max - min) / median) beside the ratio: a difference smaller than the spreads is noise.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from bench import commits, dataplane, groups, members
from broker.coordinators.group.core.base.partitioning import partition_for
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.messages.offset_fetch import OffsetFetchRequest
from testkit.kafka import KafkaProcess, kafka_libs
from testkit.kcoord import known_properties
from testkit.ports import api_versions_ok, free_port

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
COMMIT_TOPIC = "bench"  # the topic bench/commits.py commits to, 16 partitions
DATA_TOPIC = "versus-data"
DATA_PARTITIONS = 4
OFFSETS_PARTITIONS = 50


# ---- the two brokers ---------------------------------------------------------------------------


def boot_seconds() -> float:
    """Now on the clock /proc/<pid>/stat's start time counts in (seconds since boot)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def started_at(pid: int) -> float:
    """When a process started, in seconds since boot (to a clock tick)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_wait_seconds(pid: int) -> float:
    """Seconds the process's threads have spent runnable but waiting for a CPU (their run-queue
    delay, /proc/<pid>/task/*/schedstat), summed over the threads."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError):
            continue
    return total / 1e9


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class FirstAnswer:
    """Polls a port with ApiVersions every 10 ms from a thread; notes when it is first answered."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if api_versions_ok(self.port, timeout=0.5):
                self.at = boot_seconds()
                return
            time.sleep(0.01)

    def wait(self, timeout: float) -> float:
        self._thread.join(timeout)
        self._stop.set()
        if self.at is None:
            raise RuntimeError(f"port {self.port} not answered within {timeout:.0f}s")
        return self.at


@dataclass
class Subject:
    """One broker under test: its name, where it listens, its process, and what was measured."""

    name: str
    port: int
    pid: int
    stop: Callable[[], None]
    launch_s: float
    results: dict[str, float] = field(default_factory=dict)
    peak_rss: float = 0.0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return cpu_seconds(self.pid)


def start_kcoord(work: Path, flush: str, root: Path = ROOT, name: str = "kcoord") -> Subject:
    """kcoord of the checkout ``root``, under ``name``."""
    port, metrics_port = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(work / f"{name}-data"),
        "metrics.listener": f"http://127.0.0.1:{metrics_port}",
        "group.initial.rebalance.delay.ms": "0",
        "log.flush.policy": flush,
        "log.level": "WARNING",
        # Its own console port: two kcoords side by side would otherwise both ask for 9465.
        "console.listener": f"http://127.0.0.1:{free_port()}",
    }
    if root != ROOT:
        known = known_properties(root)  # an older checkout refuses a property it does not have
        overrides = {k: v for k, v in overrides.items() if k in known}
    args = [sys.executable, "-m", "kcoord", "serve"]
    for k, v in overrides.items():
        args += ["--override", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
    env["PYTHONPATH"] = str(root)
    probe = FirstAnswer(port)
    with open(work / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(args, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=env)
    answered = probe.wait(120)
    launch = answered - started_at(proc.pid)

    def stop() -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    return Subject(name, port, proc.pid, stop, launch)


def start_kafka(work: Path, libs: Path) -> Subject:
    kafka = KafkaProcess(libs, work / "kafka")
    probe = FirstAnswer(kafka.port)
    kafka.start(wait=180)
    answered = probe.wait(180)
    assert kafka.proc is not None
    # The clock starts with the broker's process, after `kafka-storage format` (a separate run).
    return Subject("Kafka", kafka.port, kafka.proc.pid, kafka.stop, answered - started_at(kafka.proc.pid))


@contextmanager
def rss_peak(subject: Subject) -> Iterator[None]:
    """Samples the broker's RSS every 0.2 s while the block runs; keeps the highest."""
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                subject.peak_rss = max(subject.peak_rss, rss_mb(subject.pid))
            except OSError:
                return
            stop.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        subject.peak_rss = max(subject.peak_rss, rss_mb(subject.pid))


# ---- preparing a broker: topics, coordinators loaded -------------------------------------------


def call(port: int, api_key: int, version: int, body: Any) -> Any:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        return members.blocking_call(sock, api_key, version, body)


def one_group_per_offsets_partition() -> list[str]:
    names: dict[int, str] = {}
    i = 0
    while len(names) < OFFSETS_PARTITIONS:
        names.setdefault(partition_for(f"probe-{i}", OFFSETS_PARTITIONS), f"probe-{i}")
        i += 1
    return list(names.values())


def prepare(subject: Subject, timeout: float = 120.0) -> None:
    """Creates the topics every phase uses and waits until the broker serves them and every
    ``__consumer_offsets`` partition (Kafka creates that topic on the first FindCoordinator)."""
    topics = {COMMIT_TOPIC: 16, members.TOPIC: members.GROUP_SIZE, DATA_TOPIC: DATA_PARTITIONS}
    created = call(subject.port, ApiKey.CreateTopics, 5, CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=n, replication_factor=1,
                                           assignments=[], configs=[]) for name, n in topics.items()],
        timeout_ms=30000))
    for t in created.topics:
        if t.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise RuntimeError(f"{subject.name}: CreateTopics {t.name}: {ErrorCode(t.error_code).name}")
    deadline = time.monotonic() + timeout

    def until(ready: Callable[[], bool], what: str) -> None:
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{subject.name}: {what} not ready within {timeout:.0f}s")
            time.sleep(0.1)

    def topics_led() -> bool:
        m = call(subject.port, ApiKey.Metadata, 9, MetadataRequest(
            topics=[MetadataRequest.Topic(name=n) for n in topics], allow_auto_topic_creation=False))
        return all(t.error_code == 0 and len(t.partitions) == topics[t.name]
                   and all(p.leader_id >= 0 for p in t.partitions) for t in m.topics)

    def coordinator_found() -> bool:
        r = call(subject.port, ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key="probe", key_type=0))
        return bool(r.error_code == 0)

    probes = one_group_per_offsets_partition()

    def shards_loaded() -> bool:
        r = call(subject.port, ApiKey.OffsetFetch, 8, OffsetFetchRequest(
            groups=[OffsetFetchRequest.Group(group_id=g, topics=None) for g in probes]))
        return all(g.error_code == 0 for g in r.groups)

    def commits_accepted() -> bool:
        r = call(subject.port, ApiKey.OffsetCommit, commits.VERSION, OffsetCommitRequest(
            group_id="versus-probe", generation_id_or_member_epoch=-1, member_id="",
            topics=[OffsetCommitRequest.Topic(name=COMMIT_TOPIC, partitions=[
                OffsetCommitRequest.Topic.Partition(partition_index=i, committed_offset=0, committed_metadata="")
                for i in range(16)])]))
        return all(p.error_code == 0 for t in r.topics for p in t.partitions)

    until(topics_led, "topics")
    until(coordinator_found, "the group coordinator")
    until(shards_loaded, "every __consumer_offsets partition")
    until(commits_accepted, "OffsetCommit")


# ---- the measurements (the same code for both brokers) -----------------------------------------


def _commit_child(port: int, committers: list[commits.Committer], in_flight: int, seconds: float,
                  out: Any) -> None:
    out.put(commits.generate(port, committers, in_flight, seconds))


def offset_commits(subject: Subject, seconds: float, warmup: float) -> None:
    ctx = multiprocessing.get_context("fork")

    def run(committers: list[commits.Committer], in_flight: int, length: float) -> tuple[int, float, float]:
        results: Any = ctx.Queue()
        child = ctx.Process(target=_commit_child, args=(subject.port, committers, in_flight, length, results))
        child.start()
        done, latencies, _cpu = results.get()
        child.join()
        latencies.sort()
        return done, members.percentile(latencies, 0.5) * 1000, members.percentile(latencies, 0.99) * 1000

    simple: list[commits.Committer] = [(f"bench-simple-{i}", -1, "") for i in range(4)]
    if warmup:
        run(simple, 8, warmup)  # not counted: Kafka's JIT compiles the path, kcoord's heap settles
    b0, t0 = subject.cpu(), time.perf_counter()
    done, p50, p99 = run(simple, 8, seconds)
    cpu, wall = subject.cpu() - b0, time.perf_counter() - t0
    _, one_p50, one_p99 = run(simple[:1], 1, max(2.0, seconds / 2))
    commits.check_committed(subject.port, simple)  # the generator counts answers without reading them
    subject.results.update({
        "commit_rps": done / seconds, "commit_p50_ms": p50, "commit_p99_ms": p99, "commit_broker_cores": cpu / wall,
        "commit_cpu_us": cpu / done * 1e6,
        "commit_one_p50_ms": one_p50, "commit_one_p99_ms": one_p99})


async def _heartbeats(port: int, n: int, seconds: float, warmup: float, group: str,
                      broker_cpu: Callable[[], float]) -> tuple[int, int, float]:
    """(heartbeats answered, answers carrying an error, broker CPU µs per heartbeat) while ``n``
    formed members of one classic group heartbeat back to back, each on its own connection with
    one request in flight; the first ``warmup`` seconds are not counted."""
    formed, _start, stop, body = await groups.form_group(port, n, group, 0.05)  # type: ignore[misc]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(body)
        while not (len({m.generation for m in formed}) == 1 and all(m.assignment for m in formed)):
            await trio.sleep(0.001)
        stop.set()
    count = errors = answered = 0

    async def hammer(m: groups.Member, counted_from: float, deadline: float) -> None:
        nonlocal count, errors, answered
        data = m.client.encode(ApiKey.Heartbeat, 4, HeartbeatRequest(
            group_id=m.group, generation_id=m.generation, member_id=m.member_id))
        while (sent := time.perf_counter()) < deadline:
            await m.client.send_raw(data)
            frame = await m.client.recv_frame()
            answered += 1
            # Response header (correlation id, tag block), throttle_time_ms, then the error code.
            if frame[9:11] != b"\x00\x00":
                errors += 1
            elif sent >= counted_from:
                count += 1

    counted_from = time.perf_counter() + warmup
    deadline = counted_from + seconds
    cpu0 = broker_cpu()
    async with trio.open_nursery() as inner:
        for m in formed:
            inner.start_soon(hammer, m, counted_from, deadline)
    cpu_us = (broker_cpu() - cpu0) / max(answered, 1) * 1e6
    for m in formed:
        await m.client.stream.aclose()
    return count, errors, cpu_us


def heartbeats(subject: Subject, seconds: float, warmup: float) -> None:
    w0, t0 = cpu_wait_seconds(subject.pid), time.perf_counter()
    count, errors, cpu_us = trio.run(_heartbeats, subject.port, 50, seconds, warmup, "versus-heartbeats",
                                     subject.cpu)
    if errors:
        raise RuntimeError(f"{subject.name}: {errors} heartbeats answered an error")
    subject.results.update({"heartbeat_rps": count / seconds, "heartbeat_cpu_us": cpu_us,
                            "heartbeat_cpu_wait": (cpu_wait_seconds(subject.pid) - w0) / (time.perf_counter() - t0)})


def formation(subject: Subject, rounds: int) -> None:
    times = [trio.run(groups.formation, subject.port, 100, i) for i in range(rounds)]
    subject.results["form_100_s"] = statistics.median(times)


def data_plane(subject: Subject, messages: int) -> None:
    mb = messages * dataplane.MESSAGE / dataplane.MB
    seconds, _ = dataplane.produce(subject.bootstrap, DATA_TOPIC, messages)
    subject.results["produce_mb_s"] = mb / seconds
    seconds, _ = dataplane.consume(subject.bootstrap, DATA_TOPIC, DATA_PARTITIONS, messages)
    subject.results["fetch_mb_s"] = mb / seconds


def many_members(subject: Subject, n: int, seconds: float, warmup: float) -> None:
    """``bench/members.py``'s load: formation, then every member heartbeats each second and commits
    every five; its groups are named apart so that runs of several sizes do not meet."""
    load = members.Load(subject.port, n, seed=1)
    for g in load.groups:
        g.name = f"versus-{n}-{g.name}"
    load.connect_all()
    form_s = load.form(wave=100, timeout=max(120.0, n / 20))
    load.steady(time.perf_counter() + warmup)
    c0, q0, w0, l0 = subject.cpu(), cpu_wait_seconds(subject.pid), time.perf_counter(), members.self_cpu()
    load.measuring_from, load.measuring_until = w0, w0 + seconds
    load.steady(load.measuring_until)
    wall = time.perf_counter() - w0
    cpu, queued = subject.cpu() - c0, cpu_wait_seconds(subject.pid) - q0
    generator = load.saturation((members.self_cpu() - l0) / wall)
    if generator["loadgen_saturated"]:
        print(f"  {subject.name} {n} members: the generator was saturated ({generator['loadgen_cores']:.2f} cores, "
              f"requests late by p99 {generator['loadgen_late_p99_ms']:.1f} ms): these figures measure it",
              file=sys.stderr, flush=True)
    load.drain(60)
    good, checked = load.check_offsets()
    load.close()
    hb = sorted(load.latency[members.HEARTBEAT])
    cm = sorted(load.latency[members.COMMIT])
    spurious = sum(load.spurious.values())
    if good != checked or spurious or load.commit_errors:
        print(f"  {subject.name} {n} members: offsets correct {good}/{checked}, spurious rebalances "
              f"{load.spurious}, commit errors {load.commit_errors}", file=sys.stderr, flush=True)
    subject.results.update({
        f"members{n}_form_s": form_s,
        f"members{n}_hb_p50_ms": members.percentile(hb, 0.5) * 1000,
        f"members{n}_hb_p99_ms": members.percentile(hb, 0.99) * 1000,
        f"members{n}_commit_p99_ms": members.percentile(cm, 0.99) * 1000,
        f"members{n}_cores": cpu / wall,
        f"members{n}_cpu_us": cpu / max(load.answers_in_window, 1) * 1e6,
        f"members{n}_cpu_wait": queued / wall,
        f"members{n}_spurious": float(spurious),
        f"members{n}_offsets_wrong": float(checked - good),
        f"members{n}_loadgen_cores": generator["loadgen_cores"],
        f"members{n}_loadgen_late_p99_ms": generator["loadgen_late_p99_ms"],
    })


# ---- the table ---------------------------------------------------------------------------------

# (key, label, unit, True when higher is better)
ROWS: list[tuple[str, str, str, bool]] = [
    ("launch_s", "launch to first answered request", "s", False),
    ("rss_idle_mb", "RSS idle (after startup, 3 topics)", "MB", False),
    ("rss_peak_mb", "RSS peak under the load below", "MB", False),
    ("commit_rps", "OffsetCommit req/s (4 conns x 8 x 4 partitions)", "req/s", True),
    ("commit_p50_ms", "  latency p50 under that load", "ms", False),
    ("commit_p99_ms", "  latency p99 under that load", "ms", False),
    ("commit_broker_cores", "  broker CPU under that load", "cores", False),
    ("commit_cpu_us", "  broker CPU per OffsetCommit", "µs", False),
    ("commit_one_p50_ms", "OffsetCommit p50, one in flight", "ms", False),
    ("commit_one_p99_ms", "OffsetCommit p99, one in flight", "ms", False),
    ("heartbeat_rps", "heartbeats/s, 50 members back to back", "/s", True),
    ("heartbeat_cpu_us", "  broker CPU per heartbeat", "µs", False),
    ("heartbeat_cpu_wait", "  broker threads waiting for a CPU meanwhile", "s/s", False),
    ("form_100_s", "100 members form a classic group (median of 3)", "s", False),
    ("produce_mb_s", "produce, 1 KiB messages (confluent-kafka)", "MB/s", True),
    ("fetch_mb_s", "fetch, the same messages", "MB/s", True),
]


def member_rows(n: int) -> list[tuple[str, str, str, bool]]:
    return [
        (f"members{n}_form_s", f"{n:,} members: all groups formed", "s", False),
        (f"members{n}_hb_p50_ms", f"{n:,} members: heartbeat p50", "ms", False),
        (f"members{n}_hb_p99_ms", f"{n:,} members: heartbeat p99", "ms", False),
        (f"members{n}_commit_p99_ms", f"{n:,} members: commit p99", "ms", False),
        (f"members{n}_cores", f"{n:,} members: broker CPU", "cores", False),
        (f"members{n}_cpu_us", f"{n:,} members: broker CPU per request", "µs", False),
        (f"members{n}_cpu_wait", f"{n:,} members: broker threads waiting for a CPU", "s/s", False),
        (f"members{n}_spurious", f"{n:,} members: spurious rebalances", "", False),
        (f"members{n}_loadgen_cores", f"{n:,} members: the generator's CPU (past 0.9: saturated)", "cores", False),
        (f"members{n}_loadgen_late_p99_ms", f"{n:,} members: requests sent late, p99 (generator)", "ms", False),
    ]


def table(a: Subject, b: Subject, rows: list[tuple[str, str, str, bool]]) -> str:
    def cell(v: float | None) -> str:
        if v is None:
            return "-"
        if v >= 100:
            return f"{v:,.0f}"
        return f"{v:.2f}" if v >= 1 else f"{v:.3f}"

    out = [f"| measure | {a.name} | {b.name} | {a.name}/{b.name} |", "|---|---:|---:|---:|"]
    for key, label, unit, higher in rows:
        x, y = a.results.get(key), b.results.get(key)
        ratio = f"{x / y:.2f}x" if x is not None and y else "-"
        better = " (higher is better)" if higher else ""
        name = f"{label} ({unit}){better}" if unit else label
        out.append(f"| {name} | {cell(x)} | {cell(y)} | {ratio} |")
    return "\n".join(out)


# ---- the run -----------------------------------------------------------------------------------


def spread(values: list[float]) -> float | None:
    """(max - min) / median of one figure's runs, or None when it cannot be told."""
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if len(values) > 1 and mid else None


def spreads(samples: dict[str, list[float]], other: dict[str, list[float]],
            rows: list[tuple[str, str, str, bool]], names: tuple[str, str]) -> str:
    out = [f"| measure | spread {names[0]} | spread {names[1]} |", "|---|---:|---:|"]
    for key, label, _, _ in rows:
        a, b = samples.get(key), other.get(key)
        sa, sb = spread(a) if a else None, spread(b) if b else None
        out.append(f"| {label.strip()} | {'-' if sa is None else f'{sa:.1%}'} | {'-' if sb is None else f'{sb:.1%}'} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the OffsetCommit and heartbeat runs")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="load before the OffsetCommit and heartbeat runs, not counted")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the 100-member formation")
    parser.add_argument("--messages", type=int, default=100_000, help="1 KiB messages produced and fetched")
    parser.add_argument("--members", type=int, default=2000, help="members of the members.py-style run (x10)")
    parser.add_argument("--members-seconds", type=float, default=10.0, help="its measuring window")
    parser.add_argument("--with-5000", action="store_true", help="also run 5,000 members")
    parser.add_argument("--kcoord-flush", choices=["sync", "interval"], default="sync",
                        help="kcoord's log.flush.policy (Kafka does not fsync to acknowledge)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="compare with kcoord of this checkout instead of Apache Kafka")
    parser.add_argument("--repeat", type=int, default=1, help="whole comparisons, medians reported")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()

    libs = None
    if args.baseline is None:
        libs = kafka_libs()
        if libs is None:
            sys.exit("Apache Kafka is not fetched yet: run `bash scripts/kafka.sh` first")
    sizes = [args.members] + ([5000] if args.with_5000 else [])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = max(sizes) * 2 + 512
    if soft < need:
        # The brokers inherit this limit: each needs a descriptor per member.
        resource.setrlimit(resource.RLIMIT_NOFILE, (need if hard == resource.RLIM_INFINITY else min(need, hard), hard))
    started = time.perf_counter()
    samples: list[dict[str, list[float]]] = [{}, {}]
    names = ("kcoord", "Kafka" if args.baseline is None else "kcoord@baseline")
    for run in range(args.repeat):
        if args.repeat > 1:
            print(f"[{time.perf_counter() - started:5.0f}s] comparison {run + 1} of {args.repeat}",
                  file=sys.stderr, flush=True)
        pair = compare(args, libs, sizes, started, first=run % 2)
        for mine, results in zip(samples, pair):
            for key, value in results.items():
                mine.setdefault(key, []).append(value)

    medians = [Subject(name, 0, 0, lambda: None, 0.0, {k: statistics.median(v) for k, v in got.items()})
               for name, got in zip(names, samples)]
    rows = ROWS + [r for n in sizes for r in member_rows(n)]
    load = os.getloadavg()
    against = "Apache Kafka" if args.baseline is None else f"kcoord of {args.baseline}"
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; kcoord log.flush.policy={args.kcoord_flush}; "
          f"against {against}; {args.repeat} comparison(s), medians; "
          f"the whole run took {time.perf_counter() - started:.0f}s")
    print(table(medians[0], medians[1], rows), flush=True)
    if args.repeat > 1:
        print()
        print(spreads(samples[0], samples[1], rows, names), flush=True)
    if args.json:
        print(json.dumps({"kcoord": medians[0].results, "kafka" if args.baseline is None else "baseline":
                          medians[1].results, "runs": {names[0]: samples[0], names[1]: samples[1]}}))


def compare(args: argparse.Namespace, libs: Path | None, sizes: list[int], started: float,
            first: int) -> tuple[dict[str, float], dict[str, float]]:
    """One whole comparison on fresh brokers: (kcoord's figures, the other's)."""
    work = Path(tempfile.mkdtemp(prefix="kcoord-versus-kafka-"))
    subjects: list[Subject] = []
    running: dict[int, Subject] = {}  # as started, for stopping whatever did start
    steps = first

    def step(what: str, measure: Callable[[Subject], None]) -> None:
        # Which broker goes first alternates: neither always runs beside the other's aftermath
        # (a JIT compiling, a collector, sessions expiring).
        nonlocal steps
        steps += 1
        for s in subjects if steps % 2 else subjects[::-1]:
            print(f"[{time.perf_counter() - started:5.0f}s] {what}: {s.name}", file=sys.stderr, flush=True)
            with rss_peak(s):
                measure(s)

    try:
        # Which broker starts first alternates too: in an A/A run (one checkout on both sides) the
        # broker started first measured a lower p99 with one commit in flight (0.7 against 1.9 ms)
        # and a higher one under the pipelined load, run after run, whichever revision it was.
        starts: list[Callable[[], Subject]] = [
            lambda: start_kcoord(work, args.kcoord_flush),
            (lambda: start_kafka(work, libs)) if libs is not None else
            (lambda: start_kcoord(work, args.kcoord_flush, args.baseline.resolve(), "kcoord@baseline"))]
        order = [0, 1] if first == 0 else [1, 0]
        names = ["kcoord", "Apache Kafka" if libs is not None else f"kcoord of {args.baseline}"]
        print(f"starting {names[order[0]]}, then {names[order[1]]}", file=sys.stderr, flush=True)
        for i in order:
            running[i] = starts[i]()
        subjects.extend(running[i] for i in (0, 1))
        for s in subjects:
            prepare(s)
        time.sleep(3)
        for s in subjects:
            s.results["launch_s"] = s.launch_s
            s.results["rss_idle_mb"] = rss_mb(s.pid)
        step("OffsetCommit", lambda s: offset_commits(s, args.seconds, args.warmup))
        step("heartbeats", lambda s: heartbeats(s, args.seconds, args.warmup))
        step("formation of 100 members", lambda s: formation(s, args.rounds))
        step("produce and fetch", lambda s: data_plane(s, args.messages))
        for n in sizes:
            step(f"{n} members", lambda s, n=n: many_members(s, n, args.members_seconds, 3.0))
        for s in subjects:
            s.results["rss_peak_mb"] = s.peak_rss
    finally:
        for s in running.values():
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    return subjects[0].results, subjects[1].results


if __name__ == "__main__":
    main()
