"""The operation history: what every client asked (invoke) and what it was answered (ok, fail,
info: outcome unknown), with the client's id and a monotonic time, as Jepsen records it.

Functions (``f``) written by the workload and the nemesis:

- ``send`` (producers): invoke with topic, partition, value (and ``txn`` for a transactional
  producer); ok with the offset; info when the delivery failed (the record may or may not be
  written).
- ``txn`` (transactional producer): invoke with ``value`` "commit" or "abort" (what it asks);
  ok when the coordinator answered, fail when it surely did not happen, info when unknown.
- ``poll`` (consumers): ok with ``records``, a list of (topic, partition, offset, value).
- ``commit`` (consumers): invoke and ok/fail/info with ``offsets`` and the group's ``generation``.
- ``fetch-offsets`` (observers and consumers after an assignment): invoke, ok with ``offsets``.
- ``assign``, ``revoke`` (consumers' rebalance callbacks): ok with ``assignment`` and ``generation``.
- ``position`` (consumers): ok with ``offsets``, the next offset of every partition held.
- ``fault``, ``heal`` (nemesis): info with ``value`` the fault kind and ``target``; ``leaders``
  (partition of the workload topics -> node) as seen when the fault began.
- ``quiet`` (nemesis): every fault healed, none follows; ``end``: the workload stopped.
- ``wedged`` (runner): a consumer whose librdkafka handle stopped (no statistics for a minute: a
  deadlock inside the client library) was stopped and replaced by a new member; ``closed``: a
  consumer left its group.

Each client runs in a process of its own and stamps its operations with the machine's monotonic
clock (one clock for every process); a snapshot orders them by that time, so indices follow real
time whichever process wrote an operation first.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

Record = tuple[str, int, int, str]  # topic, partition, offset, value


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def parse_tp(key: str) -> tuple[str, int]:
    topic, partition = key.rsplit(":", 1)
    return topic, int(partition)


@dataclass(slots=True)
class Op:
    index: int
    time: float  # seconds since the history began (monotonic clock)
    process: str  # the client (or "nemesis")
    type: str  # invoke | ok | fail | info
    f: str
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    value: str | None = None
    group: str | None = None
    generation: int | None = None
    member: str | None = None
    txn: int | None = None
    target: str | None = None
    error: str | None = None
    assignment: list[tuple[str, int]] | None = None
    offsets: dict[str, int] | None = None  # "topic:partition" -> offset
    records: list[Record] | None = None
    leaders: dict[str, int] | None = None  # "topic:partition" -> node id
    skew: float | None = None  # a clock fault's step, seconds

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Op:
        d = dict(d)
        if d.get("assignment") is not None:
            d["assignment"] = [(t, int(p)) for t, p in d["assignment"]]
        if d.get("records") is not None:
            d["records"] = [(t, int(p), int(o), v) for t, p, o, v in d["records"]]
        return Op(**d)

    def brief(self) -> str:
        """One line for a report."""
        parts = [f"#{self.index}", f"{self.time:9.3f}", self.process, self.type, self.f]
        for name in ("topic", "partition", "offset", "value", "group", "generation", "txn", "target", "error"):
            v = getattr(self, name)
            if v is not None:
                parts.append(f"{name}={v}")
        if self.assignment is not None:
            parts.append("assignment=" + ",".join(tp_key(t, p) for t, p in sorted(self.assignment)))
        if self.offsets is not None:
            parts.append(f"offsets={dict(sorted(self.offsets.items()))}")
        if self.records is not None:
            shown = ", ".join(f"{t}:{p}@{o}={v}" for t, p, o, v in self.records[:6])
            more = f" +{len(self.records) - 6}" if len(self.records) > 6 else ""
            parts.append(f"records=[{shown}{more}]")
        return " ".join(parts)


@dataclass
class History:
    """Ops appended by many threads, each stamped with the monotonic time it happened (given by
    the process that saw it, or now); a snapshot is in time order, indexed in that order."""

    ops: list[Op] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def now(self) -> float:
        return time.monotonic() - self.start

    def add(self, process: str, type_: str, f: str, *, at: float | None = None, **fields: Any) -> Op:
        """Appends an op that happened at monotonic time ``at`` (now when not given)."""
        with self.lock:
            op = Op(len(self.ops), (time.monotonic() if at is None else at) - self.start, process, type_, f, **fields)
            self.ops.append(op)
            return op

    def snapshot(self) -> list[Op]:
        """The ops in time order (a stable sort: ops of one instant keep the order they arrived in),
        indexed in that order."""
        with self.lock:
            ops = sorted(self.ops, key=lambda op: op.time)
        return [op if op.index == i else replace(op, index=i) for i, op in enumerate(ops)]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.snapshot())

    def __len__(self) -> int:
        return len(self.ops)

    def dump(self, path: Path) -> None:
        with open(path, "w") as out:
            for op in self.snapshot():
                out.write(json.dumps(op.to_json()) + "\n")

    @staticmethod
    def load(path: Path) -> History:
        return History.of(Op.from_json(json.loads(line)) for line in path.read_text().splitlines() if line)

    @staticmethod
    def of(ops: Iterable[Op]) -> History:
        h = History()
        h.ops = list(ops)
        return h
