"""One run of the fault checker: a cluster, the workload, the nemesis's schedule for a seed, then
the faults healed, the writers stopped, every partition read back, the consumers given time to
reach the end, and the checker's verdict."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.record_batch import HEADER, HEADER_SIZE, LOG_OVERHEAD
from testkit.faults.checker import PartitionRead, ReadBack, Verdict, check, report
from testkit.faults.cluster import FaultCluster
from testkit.faults.history import History, tp_key
from testkit.faults.nemesis import Fault, Nemesis, schedule
from testkit.faults.processes import ClientProcess, Spec

PLAIN_TOPIC = "fault-log"  # idempotent and plain producers; offsets must be gapless
TXN_TOPIC = "fault-txn"  # the transactional producer
PLAIN_PARTITIONS = 4
TXN_PARTITIONS = 2
# A consumer whose librdkafka sent no statistics for this long is wedged inside the library (its
# statistics come once a second from a consume loop that waits at most 0.2 s, and its longest
# call, a synchronous commit, gives up within seconds); it is stopped and a new member replaces it.
WEDGED_AFTER = 60.0


@dataclass
class Run:
    seed: int
    faults: list[Fault]
    history: History
    readback: ReadBack
    verdict: Verdict
    report: str


def read_back(bootstrap: str, topic: str, partition: int, timeout: float) -> PartitionRead:
    """Every record of the partition from offset 0, as a fresh read_committed consumer reads it,
    and its high watermark; waits for a leader (a client per attempt: librdkafka keeps a partition
    without a leader as a lasting error) and for the end, until ``timeout``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    deadline = time.monotonic() + timeout
    while True:
        reader: Any = Consumer({"bootstrap.servers": bootstrap, "group.id": "readback-" + uuid.uuid4().hex[:8],
                                "enable.auto.commit": False, "isolation.level": "read_committed",
                                "fetch.max.bytes": 8 << 20})
        try:
            _low, high = reader.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)
            break
        except KafkaException as exc:
            reader.close()
            if time.monotonic() > deadline:
                raise AssertionError(f"no watermarks of {topic}-{partition} in {timeout:.0f} s: {exc}") from exc
            time.sleep(0.5)
    try:
        reader.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: dict[int, str] = {}
        while True:
            for msg in reader.consume(1000, 0.5):
                if msg.error() is None:
                    records[msg.offset()] = msg.value().decode()
            position = reader.position([TopicPartition(topic, partition)])[0].offset
            if position >= high or (records and max(records) >= high - 1):
                return PartitionRead(high, records)
            if time.monotonic() > deadline:
                raise AssertionError(f"read-back of {topic}-{partition} reached {position} of {high} "
                                     f"({len(records)} records) in {timeout:.0f} s")
    finally:
        reader.close()


def batch_at(partition_dir: Path, offset: int) -> str:
    """The header of the batch that holds ``offset``, read from the partition's segment files as
    the nodes left them: the claim that wrote it (its partition leader epoch is the owner epoch),
    and the producer id, epoch and sequences, which tell a retry appended twice (one sequence) from
    a record sent again under a new sequence."""
    for log in sorted(partition_dir.glob("*.log"), reverse=True):
        if int(log.stem) > offset:
            continue
        data = log.read_bytes()
        pos = 0
        while pos + HEADER_SIZE <= len(data):
            (base, length, leader_epoch, _magic, _crc, _attrs, last_delta, _ts, max_ts, pid, epoch, seq,
             _count) = HEADER.unpack_from(data, pos)
            if base <= offset <= base + last_delta:
                return (f"batch {base}-{base + last_delta} at byte {pos} of {log.name}: owner epoch {leader_epoch}, "
                        f"producer {pid} epoch {epoch} sequences {seq}-{seq + last_delta}, max timestamp {max_ts}")
            pos += LOG_OVERHEAD + length
        break
    return f"offset {offset}: no batch in {partition_dir.name}"


def describe_places(data_dir: Path, verdict: Verdict) -> str:
    """For each duplicate, the batch each copy is in (testkit/faults/checker.py finds them)."""
    lines = []
    for v in verdict.violations:
        if v.kind == "duplicate":
            lines.append(f"duplicate {v.message}")
            for key, offset in v.places:
                topic, partition = key.rsplit(":", 1)
                lines.append(f"    {key}@{offset}: {batch_at(data_dir / f'{topic}-{partition}', offset)}")
    return "\n".join(lines)


def _ends(readback: ReadBack) -> dict[str, int]:
    """The offset after each partition's last record read back."""
    return {k: (max(p.records) + 1 if p.records else 0) for k, p in readback.items()}


def _drained(readback: ReadBack, consumers: list[ClientProcess]) -> bool:
    ends = _ends(readback)
    groups: dict[str, set[str]] = {}
    for c in consumers:
        if not c.is_alive():
            continue
        with c.lock:
            held, positions = set(c.assignment), dict(c.positions)
        keys = {tp_key(t, p) for t, p in held}
        groups.setdefault(c.group or "", set()).update(keys)
        if any(positions.get(k, -1) < ends.get(k, 0) for k in keys):
            return False
    for c in consumers:
        wanted = {k for k in readback if k.split(":")[0] in c.topics}
        if c.group is not None and c.group in groups and not wanted <= groups[c.group]:
            return False
    return True


def behind(readback: ReadBack, consumers: list[ClientProcess]) -> str:
    """Each live member's partitions short of the end, with librdkafka's last word on them (its
    fetch state, the leader it fetches from and that connection's state, its offsets)."""
    ends = _ends(readback)
    lines = ["members short of the end:"]
    for c in consumers:
        if not c.is_alive():
            continue
        with c.lock:
            held, positions, states = sorted(c.assignment), dict(c.positions), dict(c.fetch_states)
        for t, p in held:
            key = tp_key(t, p)
            if positions.get(key, -1) < ends.get(key, 0):
                lines.append(f"  {c.client_name} ({c.group}) {key} at {positions.get(key)} of {ends.get(key)}: "
                             f"{states.get(key, 'no statistics')}")
    return "\n".join(lines)


class Workload:
    """The clients, each in a process of its own (testkit/faults/processes.py), and the
    replacement of a consumer wedged inside librdkafka by a new member of its group."""

    def __init__(self, history: History, bootstrap: str, seed: int, log: Callable[[str], None], *,
                 wedged_after: float = WEDGED_AFTER) -> None:
        self.history = history
        self.log = log
        self.wedged_after = wedged_after
        self.replaced: dict[str, int] = {}  # first name -> replacements

        def spec(kind: str, name: str, **fields: Any) -> Spec:
            return Spec(kind=kind, name=name, bootstrap=bootstrap, **fields)  # type: ignore[typeddict-item]

        all_tps = [[PLAIN_TOPIC, p] for p in range(PLAIN_PARTITIONS)] + [[TXN_TOPIC, p] for p in range(TXN_PARTITIONS)]
        self.producers = [ClientProcess(s, history) for s in (
            spec("producer", "idem-1", topic=PLAIN_TOPIC, partitions=PLAIN_PARTITIONS, idempotent=True),
            spec("producer", "idem-2", topic=PLAIN_TOPIC, partitions=PLAIN_PARTITIONS, idempotent=True),
            spec("producer", "plain-1", topic=PLAIN_TOPIC, partitions=PLAIN_PARTITIONS, idempotent=False))]
        self.transactional = ClientProcess(spec("transactional", "txn-1", topic=TXN_TOPIC, partitions=TXN_PARTITIONS,
                                                seed=seed), history)
        self.consumers = [ClientProcess(s, history) for s in (
            spec("consumer", "a-1", group="fault-group-a", topics=[PLAIN_TOPIC]),
            spec("consumer", "a-2", group="fault-group-a", topics=[PLAIN_TOPIC]),
            spec("consumer", "b-1", group="fault-group-b", topics=[PLAIN_TOPIC, TXN_TOPIC]),
            spec("consumer", "b-2", group="fault-group-b", topics=[PLAIN_TOPIC, TXN_TOPIC]))]
        self.observers = [ClientProcess(s, history) for s in (
            spec("observer", "obs-a", group="fault-group-a", partitions=all_tps[:PLAIN_PARTITIONS]),
            spec("observer", "obs-b", group="fault-group-b", partitions=all_tps))]

    @property
    def writers(self) -> list[ClientProcess]:
        return [*self.producers, self.transactional]

    @property
    def readers(self) -> list[ClientProcess]:
        return [*self.consumers, *self.observers]

    def start(self) -> None:
        for c in [*self.writers, *self.readers]:
            c.start()

    def status(self) -> str:
        everyone = [*self.writers, *self.readers]
        return (f"ops {len(self.history)}, acked {sum(p.acked for p in self.producers)}, "
                f"transactions {self.transactional.outcomes}, reads {sum(c.reads for c in self.consumers)}, "
                f"commits {sum(c.commits for c in self.consumers)}"
                + "".join(f"; {c.client_name} DIED: {c.error}" for c in everyone if c.error is not None))

    def supervise(self) -> None:
        """Replaces every consumer wedged inside librdkafka (see ``WEDGED_AFTER``) by a new member
        of its group, after printing where its threads are."""
        for i, c in enumerate(self.consumers):
            if not c.is_alive() or c.stopping or c.silent_for() < self.wedged_after:
                continue
            silent = c.silent_for()
            self.log(f"[{self.history.now():7.1f} s] {c.client_name} wedged: no statistics from librdkafka for "
                     f"{silent:.0f} s; its stacks, then a new member in its place")
            native = c.stacks()
            if native:
                self.log(f"{c.client_name}'s native stacks:\n{native}")
            c.kill()
            self.history.add(c.client_name, "info", "wedged", group=c.group,
                             error=f"no statistics from librdkafka for {silent:.0f} s")
            first = c.spec["name"].split(".")[0]
            self.replaced[first] = self.replaced.get(first, 0) + 1
            successor = ClientProcess(Spec(**{**c.spec, "name": f"{first}.{self.replaced[first]}"}), self.history)
            successor.start()
            self.consumers[i] = successor

    def wait(self, until: Callable[[], bool], deadline: float, step: float = 0.2) -> bool:
        """Supervises until ``until()`` or the monotonic ``deadline``; whether ``until()`` came."""
        while not until():
            if time.monotonic() >= deadline:
                return False
            self.supervise()
            time.sleep(step)
        return True

    def stop(self, clients: list[ClientProcess], deadline: float) -> list[ClientProcess]:
        """Asks ``clients`` to stop and waits for them until the monotonic ``deadline``; returns
        those still running."""
        for c in clients:
            c.stop()
        self.wait(lambda: not any(c.is_alive() for c in clients), deadline)
        return [c for c in clients if c.is_alive()]

    def kill(self) -> None:
        for c in [*self.writers, *self.readers]:
            c.kill()


def run(seed: int, seconds: float, tmp: Path, *, nodes: int = 3, netns: bool = False, clock: bool = False,
        lease_ms: int = 3000,
        drain_timeout: float = 90.0, readback_timeout: float = 180.0,
        log: Callable[[str], None] = print) -> Run:
    """Runs ``seconds`` of faults drawn from ``seed`` against a fresh cluster under ``tmp``."""
    faults = schedule(seed, seconds, nodes, netns=netns, clock=clock, lease_s=lease_ms / 1000)
    log(f"seed {seed}: {len(faults)} faults over {seconds:.0f} s, {nodes} nodes, lease {lease_ms} ms, "
        f"network faults {'on' if netns else 'off'}, clock faults {'on' if clock else 'off'}")
    for f in faults:
        log(f"  {f}")
    cluster = FaultCluster(tmp, nodes, netns=netns, clock=clock, lease_ms=lease_ms, overrides={
        "log.segment.bytes": "262144", "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"})
    history = History()
    workload: Workload | None = None
    try:
        cluster.start()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for name, count in ((PLAIN_TOPIC, PLAIN_PARTITIONS), (TXN_TOPIC, TXN_PARTITIONS)):
            admin.create_topics([NewTopic(name, count, 1)])[name].result(30)
        cluster.wait_leaders([PLAIN_TOPIC, TXN_TOPIC], PLAIN_PARTITIONS + TXN_PARTITIONS, 60)
        bootstrap = cluster.bootstrap
        all_tps = [(PLAIN_TOPIC, p) for p in range(PLAIN_PARTITIONS)] + [(TXN_TOPIC, p) for p in range(TXN_PARTITIONS)]
        workload = Workload(history, bootstrap, seed, log)
        history.start = time.monotonic()
        workload.start()
        nemesis = Nemesis(cluster, faults, history, leaders=lambda: cluster.leaders([PLAIN_TOPIC, TXN_TOPIC]),
                          log=log)
        nemesis.start()
        last = 0.0
        while nemesis.is_alive():
            nemesis.join(1.0)
            workload.supervise()
            if history.now() - last >= 10:
                last = history.now()
                log(f"[{last:7.1f} s] {workload.status()}")
            if history.now() > seconds + 600:
                nemesis.stop_flag.set()
        if nemesis.error is not None:
            raise RuntimeError(f"the nemesis failed: {nemesis.error!r}")
        # Writes go on a little after the last heal, then the writers stop and flush.
        workload.wait(lambda: False, time.monotonic() + 5)
        log(f"[{history.now():7.1f} s] faults healed; stopping the producers")
        # One deadline for all the producers' final flushes, one for the whole read-back: a cluster
        # that stopped answering ends the run in minutes, with its report, not after each client's.
        for p in workload.stop(workload.writers, time.monotonic() + 180):
            log(f"[{history.now():7.1f} s] {p.client_name} still flushing after 180 s")
        log(f"[{history.now():7.1f} s] reading back every partition")
        read_by = time.monotonic() + readback_timeout
        readback = {tp_key(t, p): read_back(bootstrap, t, p, max(5.0, read_by - time.monotonic()))
                    for t, p in all_tps}
        drained = workload.wait(lambda: _drained(readback, workload.consumers), time.monotonic() + drain_timeout)
        history.add("runner", "info", "end")
        if not drained:
            log(behind(readback, workload.consumers))
        log(f"[{history.now():7.1f} s] consumers {'reached the end' if drained else 'did NOT reach the end'}; "
            "stopping them")
        for c in workload.stop(workload.readers, time.monotonic() + 60):
            log(f"[{history.now():7.1f} s] {c.client_name} did not close in 60 s")
        ops = history.snapshot()
        verdict = check(ops, readback, drain_timeout=drain_timeout)
        text = report(ops, verdict, seed)
        places = describe_places(cluster.data_dir, verdict)
        if places:
            text += "\n\nwhere the copies stand in the segment files:\n" + places
        return Run(seed, faults, history, readback, verdict, text)
    finally:
        if workload is not None:
            workload.kill()
        cluster.stop()
