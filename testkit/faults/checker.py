"""The checker: reads the history and a final read-back of every partition (a fresh
read_committed consumer from offset 0) and reports what a Kafka cluster must never do.

Violation kinds:

- ``lost-write``: an acknowledged record (a committed transaction's, too) is not in the read-back
  at its acknowledged offset with its value (``changed`` in the message when another value is there).
- ``phantom``: a value read (read-back or a consumer) that no producer sent.
- ``gap``: an offset below the high watermark missing from the read-back of a partition no
  transaction writes to (there, markers and aborted records leave holes by design).
- ``duplicate``: a value at two offsets, from an idempotent or transactional producer (from a
  plain producer a retry may write it twice: counted, not a violation).
- ``aborted-read``: a record of an aborted transaction in the read-back or read by a consumer.
- ``uncommitted-read``: a consumer read a transaction's record before the producer asked to
  commit it (read_committed never shows an open transaction).
- ``txn-partial``: a transaction whose outcome the producer does not know is in the read-back in
  part only (a transaction is all or nothing).
- ``inconsistent-read``: a consumer read a value at an offset where the read-back has another.
- ``commit-backwards``: a group's committed offset of a partition, as acknowledged commits and
  OffsetFetch answers show it, lower than one acknowledged or answered before the operation began
  (real-time order: operations that overlap may be seen in either order).
- ``stuck-consumer``: after the faults stopped, a consumer still in its group did not reach the
  end of a partition it held, or a partition of the group's topics was held by nobody at the end.
- ``assignment-overlap``: two members held one partition at the same time in the same
  generation (by their own assignment and revocation callbacks; a member of an older generation
  still holding a partition until it learns of the rebalance is what the protocol permits).
- A consumer wedged inside librdkafka (``wedged``: a deadlock in the client library, see
  testkit/faults/processes.py) is no violation: it is counted, and from then on it is a member that
  left its group; the new member that replaces it is checked as every member is.
- ``client-crash``: a client of the workload died (its exception is given): whatever it was
  checking went unchecked from then on, so the run proves less than it claims.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from testkit.faults.history import Op, parse_tp, tp_key


@dataclass
class PartitionRead:
    high: int
    records: dict[int, str]  # offset -> value


ReadBack = dict[str, PartitionRead]  # "topic:partition" -> what a read_committed consumer read


def dump_readback(readback: ReadBack, path: Path) -> None:
    path.write_text(json.dumps({k: {"high": p.high, "records": {str(o): v for o, v in p.records.items()}}
                                for k, p in readback.items()}))


def load_readback(path: Path) -> ReadBack:
    return {k: PartitionRead(int(p["high"]), {int(o): v for o, v in p["records"].items()})
            for k, p in json.loads(path.read_text()).items()}


@dataclass
class Violation:
    kind: str
    message: str
    time: float
    ops: list[int] = field(default_factory=list)  # indices of the operations involved
    key: str | None = None  # "topic:partition" or group, to pick the window
    places: list[tuple[str, int]] = field(default_factory=list)  # ("topic:partition", offset) involved

    def __str__(self) -> str:
        return f"{self.kind} at {self.time:.3f} s: {self.message}"


@dataclass
class Verdict:
    violations: list[Violation]
    counts: dict[str, int]
    faults: dict[str, int]
    failover_write: dict[str, list[float]]  # fault kind -> seconds to the next acknowledged write
    failover_read: dict[str, list[float]]  # fault kind -> seconds to the next record consumed

    @property
    def ok(self) -> bool:
        return not self.violations

    def by_kind(self) -> dict[str, int]:
        return dict(Counter(v.kind for v in self.violations))

    def summary(self) -> str:
        lines = ["counts: " + ", ".join(f"{k} {v}" for k, v in self.counts.items()),
                 "faults: " + (", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none")]
        for label, table in (("next acknowledged write", self.failover_write),
                             ("next consumed record", self.failover_read)):
            parts = [f"{kind} p50 {median(v):.2f} s max {max(v):.2f} s (n={len(v)})"
                     for kind, v in sorted(table.items()) if v]
            lines.append(f"failover to the {label}: " + ("; ".join(parts) or "-"))
        lines.append(f"violations: {len(self.violations)}" +
                     (" (" + ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind().items())) + ")"
                      if self.violations else ""))
        return "\n".join(lines)


def window(ops: list[Op], v: Violation, seconds: float = 2.0, limit: int = 40) -> list[Op]:
    """The operations around a violation: those it names, and within ``seconds`` of it those of the
    same partition or group, the nemesis's and the involved clients'."""
    named = set(v.ops)
    processes = {ops[i].process for i in named if i < len(ops)} | {"nemesis"}
    around = [op for op in ops if op.index in named or (
        abs(op.time - v.time) <= seconds and _related(op, v.key, processes))]
    if len(around) > limit:
        keep = [op for op in around if op.index in named or op.process == "nemesis"]
        rest = [op for op in around if op not in keep]
        rest.sort(key=lambda op: abs(op.time - v.time))
        around = sorted(keep + rest[:max(0, limit - len(keep))], key=lambda op: op.index)
    return around


def _related(op: Op, key: str | None, processes: set[str]) -> bool:
    if op.process in processes:
        return True
    if key is None:
        return False
    if op.group == key:
        return True
    if op.topic is not None and op.partition is not None and tp_key(op.topic, op.partition) == key:
        return True
    if op.assignment is not None and any(tp_key(t, p) == key for t, p in op.assignment):
        return True
    if op.offsets is not None and key in op.offsets:
        return True
    return op.records is not None and any(tp_key(t, p) == key for t, p, _o, _v in op.records)


def report(ops: list[Op], verdict: Verdict, seed: int | None, limit: int = 20) -> str:
    """The verdict and, for each of the first ``limit`` violations, the history around it."""
    out = [verdict.summary()]
    for v in verdict.violations[:limit]:
        out.append(f"\nVIOLATION (seed {seed}) {v}")
        out.extend("    " + op.brief() for op in window(ops, v))
    if len(verdict.violations) > limit:
        out.append(f"\n... and {len(verdict.violations) - limit} more violations")
    return "\n".join(out)


class _Txn:
    __slots__ = ("commit_invoked", "outcome", "process", "sends", "txn")

    def __init__(self, process: str, txn: int) -> None:
        self.process = process
        self.txn = txn
        self.sends: list[Op] = []  # the invokes
        self.commit_invoked: float | None = None
        self.outcome = "unknown"  # committed | aborted | unknown


def check(ops: list[Op], readback: ReadBack, *, drain_timeout: float | None = None) -> Verdict:
    """Every violation of the history ``ops`` against ``readback``."""
    ops = sorted(ops, key=lambda op: op.index)
    violations: list[Violation] = []
    kinds: dict[str, str] = {}  # producer -> idempotent | plain | transactional
    invoked: dict[str, Op] = {}  # value -> its send's invoke
    acked: list[Op] = []
    txns: dict[tuple[str, int], _Txn] = {}
    faults: Counter[str] = Counter()
    quiet = end = None
    for op in ops:
        if op.f == "client" and op.value in ("idempotent", "plain", "transactional"):
            kinds[op.process] = op.value
        elif op.f == "send":
            if op.type == "invoke" and op.value is not None:
                invoked[op.value] = op
                if op.txn is not None:
                    txns.setdefault((op.process, op.txn), _Txn(op.process, op.txn)).sends.append(op)
            elif op.type == "ok":
                acked.append(op)
        elif op.f == "txn" and op.txn is not None:
            t = txns.setdefault((op.process, op.txn), _Txn(op.process, op.txn))
            if op.type == "invoke" and op.value == "commit":
                t.commit_invoked = op.time if t.commit_invoked is None else t.commit_invoked
            elif op.type == "ok":
                t.outcome = "committed" if op.value == "commit" else "aborted"
            elif op.type == "fail" and t.outcome == "unknown" and op.value == "commit":
                t.outcome = "aborted"  # surely not committed; the abort that follows says so
        elif op.f == "fault":
            faults[op.value or "?"] += 1
        elif op.f == "quiet":
            quiet = op.time
        elif op.f == "end":
            end = op.time
    txn_of_value: dict[str, _Txn] = {}
    for t in txns.values():
        for s in t.sends:
            if s.value is not None:
                txn_of_value[s.value] = t
    last_time = ops[-1].time if ops else 0.0

    # Where each value is in the read-back.
    where: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for key, part in readback.items():
        for offset, value in part.records.items():
            where[value].append((key, offset))

    # Acknowledged writes: at their offset with their value (committed transactions only).
    for op in acked:
        if op.topic is None or op.partition is None or op.offset is None or op.value is None:
            continue
        owner = txn_of_value.get(op.value)
        if owner is not None and owner.outcome != "committed":
            continue
        key = tp_key(op.topic, op.partition)
        got = readback.get(key)
        found = None if got is None else got.records.get(op.offset)
        if found != op.value:
            elsewhere = where.get(op.value, [])
            detail = (f"offset {op.offset} holds {found!r}" if found is not None else f"offset {op.offset} is empty") + \
                (f"; the value is at {elsewhere}" if elsewhere else "; the value is nowhere")
            violations.append(Violation("lost-write", f"{op.process} acknowledged {op.value!r} at {key}@{op.offset}, "
                                        f"{'changed' if found is not None else 'lost'}: {detail}", op.time, [op.index], key))

    # Read-back: phantoms, gaps, duplicates, aborted records, partial transactions.
    txn_topics = {s.topic for t in txns.values() for s in t.sends}
    duplicates_allowed = 0
    for key, part in sorted(readback.items()):
        topic, _p = parse_tp(key)
        for offset, value in sorted(part.records.items()):
            src = invoked.get(value)
            if src is None:
                violations.append(Violation("phantom", f"{key}@{offset} holds {value!r}, which no producer sent",
                                            last_time, [], key))
                continue
            owner = txn_of_value.get(value)
            if owner is not None and owner.outcome == "aborted":
                violations.append(Violation("aborted-read", f"the read-back shows {value!r} at {key}@{offset}, of "
                                            f"{owner.process}'s aborted transaction {owner.txn}", src.time,
                                            [src.index], key))
        if topic not in txn_topics:
            present = set(part.records)
            start = min(present) if present else part.high
            missing = [o for o in range(start, part.high) if o not in present]
            if missing:
                violations.append(Violation("gap", f"{key}: offsets {_ranges(missing)} missing below the high "
                                            f"watermark {part.high}", last_time, [], key))
    for value, places in where.items():
        if len(places) < 2 or value not in invoked:
            continue
        src = invoked[value]
        if kinds.get(src.process) == "plain":
            duplicates_allowed += 1
            continue
        violations.append(Violation("duplicate", f"{src.process} ({kinds.get(src.process, '?')}) sent {value!r} once; "
                                    f"the read-back has it at {sorted(places)}", src.time, [src.index],
                                    places[0][0], sorted(places)))
    for t in txns.values():
        if t.outcome != "unknown" or not t.sends:
            continue
        in_readback = [s.value for s in t.sends if s.value in where]
        if in_readback and len(in_readback) != len(t.sends):
            violations.append(Violation("txn-partial", f"{t.process}'s transaction {t.txn} (outcome unknown to it) "
                                        f"is in the read-back in part: {in_readback} of "
                                        f"{[s.value for s in t.sends]}", t.sends[0].time,
                                        [s.index for s in t.sends]))

    # Consumers' reads.
    reads = 0
    for op in ops:
        if op.f != "poll" or op.records is None:
            continue
        for topic, partition, offset, value in op.records:
            reads += 1
            key = tp_key(topic, partition)
            if value not in invoked:
                violations.append(Violation("phantom", f"{op.process} read {value!r} at {key}@{offset}, which no "
                                            "producer sent", op.time, [op.index], key))
                continue
            owner = txn_of_value.get(value)
            if owner is not None:
                if owner.outcome == "aborted":
                    violations.append(Violation("aborted-read", f"{op.process} read {value!r} at {key}@{offset} of "
                                                f"{owner.process}'s aborted transaction {owner.txn}", op.time,
                                                [op.index, invoked[value].index], key))
                    continue
                if owner.commit_invoked is None or owner.commit_invoked > op.time:
                    violations.append(Violation("uncommitted-read", f"{op.process} read {value!r} at {key}@{offset} "
                                                f"of {owner.process}'s transaction {owner.txn} before its commit was "
                                                f"asked (at {owner.commit_invoked})", op.time, [op.index], key))
                    continue
            got = readback.get(key)
            stored = None if got is None else got.records.get(offset)
            if stored != value:
                violations.append(Violation("inconsistent-read", f"{op.process} read {value!r} at {key}@{offset}; the "
                                            f"read-back has {stored!r} there", op.time, [op.index], key))

    # A client of the workload that died left what it was checking unchecked from then on.
    violations += [Violation("client-crash", f"{op.process} died: {op.error}", op.time, [op.index], None)
                   for op in ops if op.f == "crash"]
    violations += _commit_order(ops)
    violations += _overlaps(ops, last_time)
    violations += _progress(ops, readback, quiet, end, drain_timeout)
    write_failover, read_failover = _failovers(ops, invoked)
    counts = {
        "ops": len(ops),
        "sends": sum(1 for op in ops if op.f == "send" and op.type == "invoke"),
        "acked writes": len(acked),
        "unknown writes": sum(1 for op in ops if op.f == "send" and op.type == "info"),
        "transactions committed": sum(1 for t in txns.values() if t.outcome == "committed"),
        "transactions aborted": sum(1 for t in txns.values() if t.outcome == "aborted"),
        "transactions unknown": sum(1 for t in txns.values() if t.outcome == "unknown"),
        "reads": reads,
        "commits": sum(1 for op in ops if op.f == "commit" and op.type == "ok"),
        "offset fetches": sum(1 for op in ops if op.f == "fetch-offsets" and op.type == "ok"),
        "rebalances seen": sum(1 for op in ops if op.f == "assign"),
        "read-back records": sum(len(p.records) for p in readback.values()),
        "plain duplicates": duplicates_allowed,
        "consumers wedged in librdkafka (replaced)": sum(1 for op in ops if op.f == "wedged"),
    }
    violations.sort(key=lambda v: v.time)
    return Verdict(violations, counts, dict(faults), write_failover, read_failover)


def _ranges(offsets: list[int]) -> str:
    spans: list[list[int]] = []
    for o in offsets:
        if spans and o == spans[-1][1] + 1:
            spans[-1][1] = o
        else:
            spans.append([o, o])
    text = [str(a) if a == b else f"{a}-{b}" for a, b in spans]
    return ", ".join(text[:10]) + (f" (+{len(text) - 10} ranges)" if len(text) > 10 else "")


def _commit_order(ops: list[Op]) -> list[Violation]:
    """A group's committed offsets as a register that only grows: every acknowledged commit and
    every OffsetFetch answer is an observation spanning its invoke and its completion; one that
    began after another completed must not be lower."""
    invokes: dict[tuple[str, str], Op] = {}
    obs: dict[tuple[str, str], list[tuple[float, float, int, Op]]] = defaultdict(list)  # (group, tp) -> ...
    for op in ops:
        if op.f not in ("commit", "fetch-offsets") or op.group is None:
            continue
        if op.type == "invoke":
            invokes[(op.process, op.f)] = op
            continue
        begun = invokes.pop((op.process, op.f), None)
        if op.type != "ok" or begun is None or not op.offsets:
            continue
        for key, offset in op.offsets.items():
            obs[(op.group, key)].append((begun.time, op.time, offset, op))
    out: list[Violation] = []
    for (group, key), items in obs.items():
        by_end = sorted(items, key=lambda x: x[1])
        highest: tuple[int, Op] | None = None
        i = 0
        for start, _done, offset, op in sorted(items, key=lambda x: x[0]):
            while i < len(by_end) and by_end[i][1] < start:
                if highest is None or by_end[i][2] > highest[0]:
                    highest = (by_end[i][2], by_end[i][3])
                i += 1
            if highest is not None and offset < highest[0]:
                out.append(Violation("commit-backwards", f"group {group} {key}: {op.process}'s {op.f} saw {offset} "
                                     f"after {highest[1].process}'s {highest[1].f} (#{highest[1].index}) saw "
                                     f"{highest[0]}", op.time, [highest[1].index, op.index], key))
    return out


def _holdings(ops: list[Op], last_time: float) -> dict[str, list[tuple[str, str, int | None, float, float, Op]]]:
    """Per group: (member process, partition, generation, from, to, assign op) for every holding."""
    open_: dict[tuple[str, str], tuple[int | None, float, Op]] = {}  # (process, tp) -> ...
    out: dict[str, list[tuple[str, str, int | None, float, float, Op]]] = defaultdict(list)
    group_of: dict[str, str] = {}
    for op in ops:
        if op.f == "assign" and op.assignment is not None and op.group is not None:
            group_of[op.process] = op.group
            for t, p in op.assignment:
                open_[(op.process, tp_key(t, p))] = (op.generation, op.time, op)
        elif op.f == "revoke" and op.assignment is not None:
            for t, p in op.assignment:
                held = open_.pop((op.process, tp_key(t, p)), None)
                if held is not None:
                    out[group_of[op.process]].append((op.process, tp_key(t, p), held[0], held[1], op.time, held[2]))
        elif op.f in ("closed", "wedged"):
            for (process, key), held in list(open_.items()):
                if process == op.process:
                    del open_[(process, key)]
                    out[group_of[process]].append((process, key, held[0], held[1], op.time, held[2]))
    for (process, key), held in open_.items():
        out[group_of[process]].append((process, key, held[0], held[1], last_time, held[2]))
    return out


def _overlaps(ops: list[Op], last_time: float) -> list[Violation]:
    out: list[Violation] = []
    for group, holdings in _holdings(ops, last_time).items():
        by_tp: dict[tuple[str, int | None], list[tuple[str, str, int | None, float, float, Op]]] = defaultdict(list)
        for h in holdings:
            if h[2] is not None and h[2] >= 0:
                by_tp[(h[1], h[2])].append(h)
        for (key, generation), hs in by_tp.items():
            hs.sort(key=lambda h: h[3])
            for i, a in enumerate(hs):
                for b in hs[i + 1:]:
                    if b[3] >= a[4]:
                        break
                    if a[0] != b[0]:
                        out.append(Violation("assignment-overlap", f"group {group} generation {generation}: {key} held "
                                             f"by {a[0]} ({a[3]:.3f}-{a[4]:.3f} s) and {b[0]} "
                                             f"({b[3]:.3f}-{b[4]:.3f} s) at once", b[3], [a[5].index, b[5].index],
                                             key))
    return out


def _progress(ops: list[Op], readback: ReadBack, quiet: float | None, end: float | None,
              drain_timeout: float | None) -> list[Violation]:
    """After the faults, every consumer still in its group reaches the end of what it holds, and
    every partition of its group's topics is held by a member."""
    if quiet is None or end is None:
        return []
    ends = {key: (max(p.records) + 1 if p.records else 0) for key, p in readback.items()}
    members: dict[str, tuple[str, list[str]]] = {}  # process -> group, held
    positions: dict[str, dict[str, tuple[int, float]]] = defaultdict(dict)
    subscribed: dict[str, set[str]] = defaultdict(set)  # group -> topics its members were given
    closed_before_end: set[str] = set()
    for op in ops:
        if op.time > end:
            break
        if op.f == "assign" and op.group is not None and op.assignment is not None:
            members[op.process] = (op.group, [tp_key(t, p) for t, p in op.assignment])
            subscribed[op.group].update(t for t, _p in op.assignment)
        elif op.f == "revoke" and op.process in members:
            members[op.process] = (members[op.process][0], [])
        elif op.f == "position" and op.offsets is not None:
            for key, offset in op.offsets.items():
                positions[op.process][key] = (offset, op.time)
        elif op.f in ("closed", "crash", "wedged"):
            closed_before_end.add(op.process)
    out: list[Violation] = []
    held_by_group: dict[str, set[str]] = defaultdict(set)
    limit = f" within {drain_timeout:.0f} s" if drain_timeout is not None else ""
    for process, (group, held) in sorted(members.items()):
        if process in closed_before_end:
            continue
        held_by_group[group].update(held)
        for key in held:
            want = ends.get(key, 0)
            got = positions[process].get(key)
            if got is None or got[0] < want:
                out.append(Violation("stuck-consumer", f"{process} of group {group} holds {key} but reached "
                                     f"{got[0] if got else 'no position'} of its end {want} by the end of the "
                                     f"run ({end - quiet:.1f} s after the faults stopped{limit})", end, [], key))
    for group, topics in subscribed.items():
        for key in sorted(k for k in readback if parse_tp(k)[0] in topics):
            if key not in held_by_group[group] and any(members[p][0] == group and p not in closed_before_end
                                                       for p in members):
                out.append(Violation("stuck-consumer", f"group {group}: {key} held by no member at the end "
                                     f"({end - quiet:.1f} s after the faults stopped)", end, [], group))
    return out


def _failovers(ops: list[Op], invoked: dict[str, Op]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per node fault: from its start to the first record written after it and acknowledged, and
    to the first such record read by a consumer, on the partitions the node led; the slowest of
    those partitions counts."""
    acks: dict[str, list[tuple[float, float]]] = defaultdict(list)  # tp -> (invoke time, ack time)
    consumed: dict[str, list[tuple[float, float]]] = defaultdict(list)  # tp -> (send invoke time, read time)
    for op in ops:
        if op.f == "send" and op.type == "ok" and op.topic is not None and op.value in invoked:
            acks[tp_key(op.topic, op.partition or 0)].append((invoked[op.value].time, op.time))
        elif op.f == "poll" and op.records:
            for t, p, _o, v in op.records:
                src = invoked.get(v)
                if src is not None:
                    consumed[tp_key(t, p)].append((src.time, op.time))
    write: dict[str, list[float]] = defaultdict(list)
    read: dict[str, list[float]] = defaultdict(list)
    for op in ops:
        if op.f != "fault" or not op.leaders or op.target is None or not op.target.startswith("node-"):
            continue
        node = int(op.target.split("-")[1])
        led = [k for k, leader in op.leaders.items() if leader == node]
        for table, out in ((acks, write), (consumed, read)):
            firsts = [min((done for begun, done in table[k] if begun > op.time), default=None) for k in led]
            if led and all(f is not None for f in firsts):
                out[op.value or "?"].append(max(f for f in firsts if f is not None) - op.time)
    return dict(write), dict(read)
