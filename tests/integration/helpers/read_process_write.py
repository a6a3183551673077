"""An exactly-once read-process-write application of confluent-kafka, run in a process of its own
(testkit/child_process.py) and driven a step at a time by the test: a transactional call that
librdkafka never returns from (it has blocked in ``send_offsets_to_transaction`` past its timeout
while a coordinator failed over) becomes the test's failure with the application's Python and
native stacks, at a deadline, instead of a test that hangs in C until its worker is ended.

    python -m tests.integration.helpers.read_process_write '<spec as JSON>'   (RemoteReadProcessWrite starts it)

The child reads one command a line on its stdin, ``{"do": <command>, ...its arguments}``, and
answers each with one line: ``{"done": <command>, "result": ..., "counts": {...}}``, or
``{"failed": <command>, "error": <traceback>}``.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from testkit.child_process import ChildProcess, LineWriter, Message, child_setup
from tests.integration.helpers.transactions import consumer, txn_producer

TXN_TIMEOUT_MS = 15000
# The longest a command may take before the application is taken for wedged: a step's librdkafka
# calls are each bounded at 30 s (send the offsets, commit; on an error abort, rewind, or a new
# producer's init_transactions), so a command past this has a call that outlived its own timeout.
COMMAND_DEADLINE_S = 180.0


class Spec(TypedDict):
    bootstrap: str
    txn_id: str
    group: str
    src: str
    dst: str
    partitions: int


def _producer(bootstrap: str, txn_id: str) -> Producer:
    return txn_producer(bootstrap, txn_id, **{"linger.ms": 5, "transaction.timeout.ms": TXN_TIMEOUT_MS})


class ReadProcessWrite:
    """The application: reads ``src`` (read_committed), writes each record's value to ``dst`` and
    commits the consumer's offsets in the same transaction. On an abortable error it aborts and
    rewinds to the committed offsets; on a fatal one (fenced) it starts a new producer with the
    same transactional id, whose init_transactions finishes what the old one left."""

    def __init__(self, spec: Spec) -> None:
        self.bootstrap = spec["bootstrap"]
        self.txn_id = spec["txn_id"]
        self.dst = spec["dst"]
        self.consumer: Consumer = consumer(self.bootstrap, spec["group"])
        self.tps = [TopicPartition(spec["src"], p) for p in range(spec["partitions"])]
        self.consumer.assign(self.tps)
        self.producer = _producer(self.bootstrap, self.txn_id)
        self.retired: list[Producer] = []
        self.committed_txns = 0
        self.aborted_txns = 0
        self.new_producers = 0

    def counts(self) -> dict[str, int]:
        return {"committed": self.committed_txns, "aborted": self.aborted_txns, "new producers": self.new_producers}

    def batch(self, want: int) -> list[Any]:
        """Up to ``want`` records, or what arrives in 5 s: an empty batch is how the application
        sees the end of its input."""
        out: list[Any] = []
        deadline = time.monotonic() + 5
        while len(out) < want and time.monotonic() < deadline:
            m = self.consumer.poll(0.1)
            if m is not None and not m.error():
                out.append(m)
        return out

    def rewind(self) -> None:
        for tp in self.consumer.committed(self.tps, 30):
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    def begin(self, msgs: list[Any]) -> None:
        self.producer.begin_transaction()
        for m in msgs:
            self.producer.produce(self.dst, key=m.key(), value=m.value())
        nxt = {(m.topic(), m.partition()): m.offset() + 1 for m in msgs}
        self.producer.send_offsets_to_transaction([TopicPartition(t, p, o) for (t, p), o in nxt.items()],
                                                  self.consumer.consumer_group_metadata(), 30)

    def finish(self, action: Callable[[], object]) -> None:
        """Runs ``action`` (the rest of the transaction), handling errors as an application must."""
        try:
            action()
            self.committed_txns += 1
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.txn_requires_abort():
                self.producer.abort_transaction(30)
                self.aborted_txns += 1
            else:
                # Fenced: what the old producer still holds is dropped (destroying a producer with
                # records left waits for their delivery timeout) and a new one takes over.
                with contextlib.suppress(KafkaException):
                    self.producer.purge()
                self.retired.append(self.producer)
                self.producer = _producer(self.bootstrap, self.txn_id)
                self.new_producers += 1
            self.rewind()

    def step(self, want: int = 10) -> int:
        msgs = self.batch(want)
        if msgs:
            self.finish(lambda: (self.begin(msgs), self.producer.commit_transaction(30)))
        return len(msgs)

    # ---- the commands ----

    def do_step(self, want: int = 10) -> int:
        return self.step(want)

    def do_abort_one(self, want: int) -> int:
        """A transaction written and aborted, the input rewound: the same records move again."""
        msgs = self.batch(want)
        self.begin(msgs)
        assert self.producer.flush(15) == 0
        self.producer.abort_transaction(30)
        self.rewind()
        return len(msgs)

    def do_open(self, want: int) -> int:
        """A transaction left open: records written (flushed) and offsets sent, no commit yet."""
        msgs = self.batch(want)
        assert msgs
        self.begin(msgs)
        assert self.producer.flush(15) == 0
        return len(msgs)

    def do_commit(self, timeout: float) -> None:
        self.finish(lambda: self.producer.commit_transaction(timeout))

    def do_drain(self, seconds: float, want: int) -> bool:
        """Steps until the input is drained (True) or ``seconds`` have passed (False)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.step(want) == 0:
                return True
        return False

    def do_close(self) -> None:
        self.consumer.close()
        self.producer.flush(5)
        self.producer.purge()


def child_main(argv: list[str]) -> int:
    child_setup()
    out = LineWriter()
    app = ReadProcessWrite(json.loads(argv[0]))
    for line in sys.stdin:
        command = json.loads(line)
        name = command.pop("do")
        try:
            result = getattr(app, f"do_{name}")(**command)
        except Exception:
            out.write({"failed": name, "error": traceback.format_exc()})
            continue
        out.write({"done": name, "result": result, "counts": app.counts()})
        if name == "close":
            break
    return 0


class RemoteReadProcessWrite:
    """The test's handle on the application's process. Each command waits for its answer at most
    its deadline; past it the application's stacks are taken (Python, written to ``log``, and
    native, with gdb) and the process is killed, and the command fails with them."""

    def __init__(self, spec: Spec, log: Path) -> None:
        self.spec = spec
        self.log = log
        self.answers: queue.Queue[Message] = queue.Queue()
        self.counts: dict[str, int] = {}
        self.stderr = log.open("ab")
        self.child = ChildProcess("tests.integration.helpers.read_process_write", [json.dumps(spec)],
                                  self.answers.put, self._ended, stderr=self.stderr, name="read-process-write")
        self.child.start()

    def _ended(self, code: int) -> None:
        self.answers.put({"failed": "(its process)", "error": f"the application's process ended with {code}"})

    def call(self, do: str, deadline_s: float = COMMAND_DEADLINE_S, **args: Any) -> Any:
        self.child.send(json.dumps({"do": do, **args}))
        try:
            answer = self.answers.get(timeout=deadline_s)
        except queue.Empty:
            raise AssertionError(f"the application did not end {do!r} in {deadline_s:.0f} s:\n"
                                 f"{self.wedged()}") from None
        if "failed" in answer:
            raise AssertionError(f"{do!r} failed in the application: {answer['error']}")
        self.counts = answer["counts"]
        return answer["result"]

    def wedged(self) -> str:
        """The stacks of the application's threads, and its process killed."""
        self.stderr.flush()
        before = self.log.stat().st_size
        native = self.child.stacks()
        self.child.kill()
        return f"Python stacks and librdkafka's last lines ({self.log}):\n{self._log_tail(before)}\n" \
               f"native stacks:\n{native}"

    def _log_tail(self, since: int, limit: int = 30000) -> str:
        with self.log.open("rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")[-limit:]

    def close(self) -> None:
        """Closes the application's clients; kills it when it does not end."""
        if self.child.is_alive():
            with contextlib.suppress(AssertionError):
                self.call("close", deadline_s=60)
            self.child.close_stdin()
            self.child.join(30)
        self.child.kill()
        self.stderr.close()


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
