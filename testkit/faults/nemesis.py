"""The nemesis: a schedule of faults drawn from a seed, printed, and replayed exactly from the same
seed, then applied to the cluster with each fault undone after its duration.

Kinds: ``pause`` (SIGSTOP, then SIGCONT), ``kill`` (SIGKILL, then the node starts again),
``etcd`` (etcd killed, then started again on its data), ``cut-etcd`` and ``cut-clients`` (a node's
network path to etcd, or from its clients, drops everything, then heals; with network namespaces
only), and ``clock`` (the wall clock a node reads stepped ahead or back by seconds to ten minutes,
then set right: what NTP stepping a host's clock, or an operator with ``date -s``, does to it).
Faults on different targets may overlap; a target has at most one fault at a time."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from testkit.faults.history import History

NODE_KINDS = ("pause", "kill")
NET_KINDS = ("cut-etcd", "cut-clients")
KINDS = (*NODE_KINDS, "etcd", *NET_KINDS, "clock")
# How far a clock fault steps a node's wall clock (either way): from less than a lease to well past
# a session timeout and a transaction's timeout.
SKEWS = (2, 15, 60, 600)


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the workload began
    kind: str
    target: str  # "node-<id>" or "etcd"
    duration: float
    skew: float = 0.0  # seconds the node's wall clock is stepped by (``clock`` faults)

    @property
    def node(self) -> int | None:
        return int(self.target.split("-")[1]) if self.target.startswith("node-") else None

    def what(self) -> str:
        skew = f"  ({self.skew:+.0f} s)" if self.kind == "clock" else ""
        return f"{self.kind:<11} {self.target:<7} for {self.duration:4.1f} s{skew}"

    def __str__(self) -> str:
        return f"{self.at:7.1f} s  {self.what()}"


def schedule(seed: int, seconds: float, nodes: int, *, netns: bool, clock: bool = False, lease_s: float = 3.0,
             warmup: float = 5.0) -> list[Fault]:
    """Faults over ``seconds`` from ``seed``: gaps of 1-6 s between starts, durations from a
    blink to about four leases (a pause shorter than the lease must not move anything; a longer one
    must move everything safely), a fault sometimes beginning while another one lasts."""
    rng = random.Random(seed)
    kinds = [*NODE_KINDS, *NODE_KINDS, "etcd", *(NET_KINDS if netns else ()), *(("clock",) if clock else ())]
    busy_until: dict[str, float] = {}
    faults: list[Fault] = []
    t = warmup
    while True:
        t += rng.uniform(1.0, 6.0)
        kind = rng.choice(kinds)
        target = "etcd" if kind == "etcd" else f"node-{rng.randint(1, nodes)}"
        duration = round(rng.choice([rng.uniform(0.2, lease_s * 0.6), rng.uniform(lease_s, lease_s * 4)]), 2)
        if kind == "kill":
            duration = round(rng.uniform(0.5, lease_s * 3), 2)  # down time before the restart
        if kind == "etcd":
            duration = round(rng.uniform(0.5, lease_s * 3), 2)
        skew = 0.0
        if kind == "clock":  # long enough for sessions, transactions and locks to be timed on it
            duration = round(rng.uniform(lease_s * 2, lease_s * 10), 2)
            skew = float(rng.choice((-1, 1)) * rng.choice(SKEWS))
        start = max(t, busy_until.get(target, 0.0) + 0.5)
        if start + duration > seconds:
            break
        faults.append(Fault(round(start, 2), kind, target, duration, skew))
        busy_until[target] = start + duration
        if rng.random() < 0.7:  # most faults are alone; the others overlap the next one
            t = start + duration
    return faults


class Target(Protocol):
    """What the nemesis acts on (FaultCluster)."""

    def pause(self, n: int) -> None: ...
    def resume(self, n: int) -> None: ...
    def kill(self, n: int) -> None: ...
    def restart(self, n: int) -> None: ...
    def etcd_stop(self) -> None: ...
    def etcd_start(self) -> None: ...
    def cut(self, n: int, path: str, cut: bool = True) -> None: ...
    def skew(self, n: int, seconds: float) -> None: ...
    def heal_all(self) -> None: ...


class Nemesis(threading.Thread):
    """Applies ``faults`` on time (times count from ``history.start``), writes ``fault``/``heal``
    ops, and after the last heal a ``quiet`` op. ``leaders`` (optional) tells the partition leaders
    when a fault begins, for the failover figures."""

    def __init__(self, target: Target, faults: list[Fault], history: History,
                 leaders: Callable[[], dict[str, int]] | None = None,
                 log: Callable[[str], None] = print) -> None:
        super().__init__(daemon=True, name="nemesis")
        self.target = target
        self.faults = faults
        self.history = history
        self.leaders = leaders
        self.log = log
        self.stop_flag = threading.Event()
        self.applied: list[tuple[Fault, float, float]] = []  # fault, began, healed (history time)
        self.error: BaseException | None = None

    def _begin(self, f: Fault) -> None:
        n = f.node
        if f.kind == "pause" and n is not None:
            self.target.pause(n)
        elif f.kind == "kill" and n is not None:
            self.target.kill(n)
        elif f.kind == "etcd":
            self.target.etcd_stop()
        elif f.kind in NET_KINDS and n is not None:
            self.target.cut(n, f.kind.removeprefix("cut-"), True)
        elif f.kind == "clock" and n is not None:
            self.target.skew(n, f.skew)

    def _end(self, f: Fault) -> None:
        n = f.node
        if f.kind == "pause" and n is not None:
            self.target.resume(n)
        elif f.kind == "kill" and n is not None:
            self.target.restart(n)
        elif f.kind == "etcd":
            self.target.etcd_start()
        elif f.kind in NET_KINDS and n is not None:
            self.target.cut(n, f.kind.removeprefix("cut-"), False)
        elif f.kind == "clock" and n is not None:
            self.target.skew(n, 0.0)

    def run(self) -> None:
        events: list[tuple[float, int, Fault]] = []
        for f in self.faults:
            events.append((f.at, 1, f))
            events.append((f.at + f.duration, 0, f))  # at equal times, heal first
        events.sort(key=lambda e: (e[0], e[1]))
        began: dict[Fault, float] = {}
        try:
            for at, starting, f in events:
                while not self.stop_flag.is_set() and self.history.now() < at:
                    time.sleep(min(0.05, max(0.0, at - self.history.now())))
                if self.stop_flag.is_set():
                    break
                if starting:
                    leaders = self.leaders() if self.leaders is not None else None
                    began[f] = self.history.add("nemesis", "info", "fault", value=f.kind, target=f.target,
                                                leaders=leaders, skew=f.skew if f.kind == "clock" else None).time
                    self._begin(f)
                    self.log(f"[{self.history.now():7.1f} s] fault {f.what()}")
                else:
                    self._end(f)
                    healed = self.history.add("nemesis", "info", "heal", value=f.kind, target=f.target).time
                    self.applied.append((f, began.get(f, at), healed))
                    self.log(f"[{self.history.now():7.1f} s] healed {f.kind} {f.target}")
        except BaseException as exc:
            self.error = exc
            self.log(f"nemesis failed: {exc!r}")
        finally:
            self.target.heal_all()
            self.history.add("nemesis", "info", "quiet")
