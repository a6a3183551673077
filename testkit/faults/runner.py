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
from testkit.faults.workload import GroupConsumer, OffsetObserver, SendingProducer, TransactionalProducer

PLAIN_TOPIC = "fault-log"  # idempotent and plain producers; offsets must be gapless
TXN_TOPIC = "fault-txn"  # the transactional producer
PLAIN_PARTITIONS = 4
TXN_PARTITIONS = 2


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


def _drained(history: History, readback: ReadBack, consumers: list[GroupConsumer]) -> bool:
    ends = _ends(readback)
    groups: dict[str, set[str]] = {}
    for c in consumers:
        if not c.is_alive():
            continue
        with c.lock:
            held, positions = set(c.assignment), dict(c.positions)
        keys = {tp_key(t, p) for t, p in held}
        groups.setdefault(c.group, set()).update(keys)
        if any(positions.get(k, -1) < ends.get(k, 0) for k in keys):
            return False
    for c in consumers:
        wanted = {k for k in readback if k.split(":")[0] in c.topics}
        if c.group in groups and not wanted <= groups[c.group]:
            return False
    return True


def behind(readback: ReadBack, consumers: list[GroupConsumer]) -> str:
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
    clients: list[Any] = []
    history = History()
    try:
        cluster.start()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for name, count in ((PLAIN_TOPIC, PLAIN_PARTITIONS), (TXN_TOPIC, TXN_PARTITIONS)):
            admin.create_topics([NewTopic(name, count, 1)])[name].result(30)
        cluster.wait_leaders([PLAIN_TOPIC, TXN_TOPIC], PLAIN_PARTITIONS + TXN_PARTITIONS, 60)
        bootstrap = cluster.bootstrap
        producers: list[Any] = [
            SendingProducer("idem-1", history, bootstrap, PLAIN_TOPIC, PLAIN_PARTITIONS, idempotent=True),
            SendingProducer("idem-2", history, bootstrap, PLAIN_TOPIC, PLAIN_PARTITIONS, idempotent=True),
            SendingProducer("plain-1", history, bootstrap, PLAIN_TOPIC, PLAIN_PARTITIONS, idempotent=False),
            TransactionalProducer("txn-1", history, bootstrap, TXN_TOPIC, TXN_PARTITIONS, seed),
        ]
        consumers = [
            GroupConsumer("a-1", history, bootstrap, "fault-group-a", [PLAIN_TOPIC]),
            GroupConsumer("a-2", history, bootstrap, "fault-group-a", [PLAIN_TOPIC]),
            GroupConsumer("b-1", history, bootstrap, "fault-group-b", [PLAIN_TOPIC, TXN_TOPIC]),
            GroupConsumer("b-2", history, bootstrap, "fault-group-b", [PLAIN_TOPIC, TXN_TOPIC]),
        ]
        all_tps = [(PLAIN_TOPIC, p) for p in range(PLAIN_PARTITIONS)] + [(TXN_TOPIC, p) for p in range(TXN_PARTITIONS)]
        observers = [OffsetObserver("obs-a", history, bootstrap, "fault-group-a", all_tps[:PLAIN_PARTITIONS]),
                     OffsetObserver("obs-b", history, bootstrap, "fault-group-b", all_tps)]
        clients = [*producers, *consumers, *observers]
        history.start = time.monotonic()
        for c in clients:
            c.start()
        nemesis = Nemesis(cluster, faults, history, leaders=lambda: cluster.leaders([PLAIN_TOPIC, TXN_TOPIC]),
                          log=log)
        nemesis.start()
        last = 0.0
        while nemesis.is_alive():
            nemesis.join(1.0)
            if history.now() - last >= 10:
                last = history.now()
                log(f"[{last:7.1f} s] ops {len(history)}, acked {sum(p.acked for p in producers[:3])}, "
                    f"transactions {producers[3].outcomes}, reads {sum(c.reads for c in consumers)}, "
                    f"commits {sum(c.commits for c in consumers)}"
                    + "".join(f"; {c.client_name} DIED: {c.error!r}" for c in clients if c.error is not None))
            if history.now() > seconds + 600:
                nemesis.stop_flag.set()
        if nemesis.error is not None:
            raise RuntimeError(f"the nemesis failed: {nemesis.error!r}")
        # Writes go on a little after the last heal, then the writers stop and flush.
        resumed = history.now()
        while history.now() - resumed < 5:
            time.sleep(0.2)
        log(f"[{history.now():7.1f} s] faults healed; stopping the producers")
        for p in producers:
            p.stop_flag.set()
        # One deadline for all the producers' final flushes, one for the whole read-back: a cluster
        # that stopped answering ends the run in minutes, with its report, not after each client's.
        stopped_by = time.monotonic() + 180
        for p in producers:
            p.join(max(1.0, stopped_by - time.monotonic()))
        for p in producers:
            if p.is_alive():
                log(f"[{history.now():7.1f} s] {p.client_name} still flushing after 180 s")
        log(f"[{history.now():7.1f} s] reading back every partition")
        read_by = time.monotonic() + readback_timeout
        readback = {tp_key(t, p): read_back(bootstrap, t, p, max(5.0, read_by - time.monotonic()))
                    for t, p in all_tps}
        drain_deadline = time.monotonic() + drain_timeout
        while not _drained(history, readback, consumers) and time.monotonic() < drain_deadline:
            time.sleep(0.2)
        history.add("runner", "info", "end")
        if not _drained(history, readback, consumers):
            log(behind(readback, consumers))
        log(f"[{history.now():7.1f} s] consumers {'reached the end' if _drained(history, readback, consumers) else 'did NOT reach the end'}; stopping them")
        for c in [*consumers, *observers]:
            c.stop_flag.set()
        for c in [*consumers, *observers]:
            c.join(60)
        ops = history.snapshot()
        verdict = check(ops, readback, drain_timeout=drain_timeout)
        text = report(ops, verdict, seed)
        places = describe_places(cluster.data_dir, verdict)
        if places:
            text += "\n\nwhere the copies stand in the segment files:\n" + places
        return Run(seed, faults, history, readback, verdict, text)
    finally:
        for c in clients:
            c.stop_flag.set()
        for c in clients:
            c.join(30)
        cluster.stop()
