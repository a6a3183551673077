"""Each client of the workload in a process of its own: the child's entry, and the runner's handle
on it.

Why processes (testkit/child_process.py): a librdkafka handle can deadlock inside the library (a
lock-order inversion between the handle's lock and a partition's when a broker goes away with an
OffsetForLeaderEpoch in flight, confluentinc/librdkafka#5476). With every client a thread of one
process, one such handle froze every thread of the run (the nemesis, the runner, the relays that
carry the clients' connections) until its deadline. In a process of its own, a client that
deadlocks stops only itself: the runner sees a consumer that sent no statistics for a minute, takes
its stacks, stops it and lets a new member take its place (``wedged`` in the history).

The pipe: the child writes JSON lines on its stdout, ``{"t": <monotonic>, "op": {...}}`` for an
operation of the history and ``{"t": ..., "stats": {...}}`` for librdkafka's view of the partitions
it fetches (once a second); it reads ``stop`` (or the end of its stdin) as its stop flag. Its stderr
is the run's: librdkafka's log lines, and its Python stacks on SIGUSR1.

    python -m testkit.faults.processes '<spec as JSON>'   (the runner starts it)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import IO, Any, TypedDict

from testkit.child_process import ChildProcess, LineWriter, Message, child_setup
from testkit.faults.history import History
from testkit.faults.workload import (
    Client,
    GroupConsumer,
    OffsetObserver,
    SendingProducer,
    TransactionalProducer,
)


class Spec(TypedDict, total=False):
    """What a client is: ``kind`` (producer, transactional, consumer, observer), its ``name`` (the
    history's process) and what its kind takes."""

    kind: str
    name: str
    bootstrap: str
    topic: str
    partitions: int | list[list[Any]]
    idempotent: bool
    seed: int
    group: str
    topics: list[str]


def build(spec: Spec, sink: Any) -> Client:
    kind, name, bootstrap = spec["kind"], spec["name"], spec["bootstrap"]
    if kind == "producer":
        return SendingProducer(name, sink, bootstrap, spec["topic"], int(spec["partitions"]),  # type: ignore[arg-type]
                               idempotent=spec["idempotent"])
    if kind == "transactional":
        return TransactionalProducer(name, sink, bootstrap, spec["topic"], int(spec["partitions"]),  # type: ignore[arg-type]
                                     spec["seed"])
    if kind == "consumer":
        return GroupConsumer(name, sink, bootstrap, spec["group"], spec["topics"])
    if kind == "observer":
        parts = [(str(t), int(p)) for t, p in spec["partitions"]]  # type: ignore[union-attr]
        return OffsetObserver(name, sink, bootstrap, spec["group"], parts)
    raise ValueError(f"no client kind {kind!r}")


# ---- the child ---------------------------------------------------------------------------------


class LineSink:
    """The child's end of the pipe as the workload's clients write to it: one line per operation or
    statistics, stamped with the monotonic clock when it happened."""

    def __init__(self, out: IO[bytes]) -> None:
        self.writer = LineWriter(out)

    def add(self, process: str, type_: str, f: str, **fields: Any) -> None:
        self.writer.write({"t": time.monotonic(), "op": {"process": process, "type": type_, "f": f, **fields}})

    def statistics(self, process: str, states: dict[str, dict[str, Any]]) -> None:
        self.writer.write({"t": time.monotonic(), "stats": states})


def _await_stop(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()


def child_main(argv: list[str]) -> int:
    spec: Spec = json.loads(argv[0])
    child_setup()
    client = build(spec, LineSink(sys.stdout.buffer))
    threading.Thread(target=_await_stop, args=(client.stop_flag,), daemon=True).start()
    client.run()
    sys.stdout.flush()
    sys.stderr.flush()
    # librdkafka's handles may still wait on brokers that are gone; nothing is left to say.
    os._exit(0)


# ---- the runner's handle -----------------------------------------------------------------------


class ClientProcess:
    """A client running in its own process, as the runner sees it: its operations go into the
    history as they arrive (stamped with the child's clock), and what the runner reports (records
    acknowledged and read, commits, a consumer's assignment and positions, librdkafka's fetch
    states) is kept from them."""

    def __init__(self, spec: Spec, history: History) -> None:
        self.spec = spec
        self.client_name = spec["name"]
        self.group = spec.get("group")
        self.topics = list(spec.get("topics", []))
        self.history = history
        self.lock = threading.Lock()
        self.assignment: set[tuple[str, int]] = set()
        self.positions: dict[str, int] = {}
        self.fetch_states: dict[str, dict[str, Any]] = {}
        self.acked = self.reads = self.commits = 0
        self.outcomes: dict[str, int] = {}
        self.error: str | None = None
        self.child = ChildProcess("testkit.faults.processes", [json.dumps(spec)], self.receive, self._ended,
                                  name=self.client_name)
        self.stopping = False
        self.heard = 0.0  # monotonic time of the last statistics (or of the start)

    def start(self) -> None:
        self.heard = time.monotonic()
        self.child.start()

    def _ended(self, code: int) -> None:
        if not self.stopping and code != 0:
            self.error = f"its process ended with {code}"
            self.history.add(self.client_name, "info", "crash", error=self.error)

    def receive(self, message: Message) -> None:
        """One line from the child: an op into the history, or statistics."""
        at = float(message["t"])
        if "stats" in message:
            with self.lock:
                self.fetch_states = message["stats"]
                self.heard = max(self.heard, at)
            return
        fields = dict(message["op"])
        process, type_, f = fields.pop("process"), fields.pop("type"), fields.pop("f")
        if fields.get("assignment") is not None:
            fields["assignment"] = [(t, int(p)) for t, p in fields["assignment"]]
        if fields.get("records") is not None:
            fields["records"] = [(t, int(p), int(o), v) for t, p, o, v in fields["records"]]
        self.history.add(process, type_, f, at=at, **fields)
        with self.lock:
            if f == "send" and type_ == "ok" and fields.get("txn") is None:
                self.acked += 1
            elif f == "txn" and type_ == "ok":
                self.outcomes[fields["value"]] = self.outcomes.get(fields["value"], 0) + 1
            elif f == "poll":
                self.reads += len(fields.get("records") or [])
            elif f == "commit" and type_ == "ok":
                self.commits += 1
            elif f == "assign":
                self.assignment, self.positions = set(fields.get("assignment") or []), {}
            elif f == "revoke":
                self.assignment, self.positions = set(), {}
            elif f == "position":
                self.positions = dict(fields.get("offsets") or {})
            elif f == "crash":
                self.error = fields.get("error")

    def silent_for(self) -> float:
        """Seconds since the client's librdkafka last reported its statistics."""
        with self.lock:
            return time.monotonic() - self.heard

    def is_alive(self) -> bool:
        return self.child.is_alive()

    def stop(self) -> None:
        """Asks the client to stop (it closes its handle, as a client that is shut down does)."""
        self.stopping = True
        self.child.send("stop")
        self.child.close_stdin()

    def join(self, timeout: float) -> None:
        self.child.join(timeout)

    def kill(self) -> None:
        self.stopping = True
        self.child.kill()

    def stacks(self) -> str:
        """Where the client's threads are: its Python stacks on the run's stderr, its native ones
        (gdb) returned."""
        return self.child.stacks()


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
