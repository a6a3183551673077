"""Apache Kafka's own programs as the tests run them: its command-line tools (a tool's main class on
the jars' classpath) against kcoord or against the reference Kafka, their tables parsed, and its
system-test clients (VerifiableProducer/VerifiableConsumer, JSON lines on stdout) as processes."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from testkit.kafka import java_command, run_tool

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"
ACLS = "org.apache.kafka.tools.AclCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"

# Lines the tools print on stderr or stdout that say nothing about the broker.
_NOISE = ("Option --property is deprecated", "Warning: --property is deprecated",
          "The consumer rebalance protocol (KIP-848) is production-ready")


class Tools:
    """Kafka's command-line tools pointed at one broker."""

    def __init__(self, libs: Path, bootstrap: str) -> None:
        self.libs = libs
        self.bootstrap = bootstrap

    def run(self, main: str, *args: str, input: str | None = None, timeout: float = 60.0,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        done = run_tool(self.libs, main, "--bootstrap-server", self.bootstrap, *args, input=input, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{main.rsplit('.', 1)[1]} {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    def out(self, main: str, *args: str, input: str | None = None) -> str:
        """The tool's stdout, without the lines of deprecation and advertising."""
        text = self.run(main, *args, input=input).stdout
        return "\n".join(line for line in text.splitlines() if not line.startswith(_NOISE))


def on_both(first: Tools, second: Tools, call: Callable[[Tools], Any]) -> tuple[Any, Any]:
    """The same tool call against two brokers at once (each call starts a JVM: ~1-2 s)."""
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(call, first), pool.submit(call, second)
        return a.result(), b.result()


def table(text: str, header: str, rest: bool = False) -> list[dict[str, str]]:
    """The rows of the whitespace-aligned table(s) whose header line starts with `header`
    (kafka-consumer-groups prints one per group), as dictionaries by column name; with ``rest``
    the last column takes the rest of the line (kafka-streams-groups' assignments hold spaces)."""
    rows: list[dict[str, str]] = []
    columns: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            columns = None
            continue
        fields = line.split()
        if fields[0] == header:
            columns = fields
            continue
        if rest and columns is not None:
            fields = line.split(maxsplit=len(columns) - 1)
        if columns is not None and len(fields) == len(columns):
            rows.append(dict(zip(columns, fields)))
    return rows


def tab_table(text: str) -> list[dict[str, str]]:
    """kafka-transactions' tab-separated tables, as dictionaries by column name."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    columns = [c.strip() for c in lines[0].split("\t") if c.strip()]
    return [dict(zip(columns, [c.strip() for c in line.split("\t")])) for line in lines[1:]]


class JsonProcess:
    """One of Kafka's Verifiable* clients, its JSON lines collected as they come."""

    def __init__(self, libs: Path, main: str, *args: str) -> None:
        self.command = java_command(libs, main, *args, heap="-Xmx192m")
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.readers = [threading.Thread(target=self._read_stdout, daemon=True),
                        threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self.readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                with self.lock:
                    self.events.append(event)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def named(self, *names: str) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["name"] in names]

    def wait_for(self, predicate: Callable[[JsonProcess], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            if self.proc.poll() is not None and not predicate(self):
                raise AssertionError(f"{what}: the process exited {self.proc.returncode}:\n{''.join(self.stderr)[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout}s; last events {self.events[-5:]}\n"
                                     f"{''.join(self.stderr)[-3000:]}")
            time.sleep(0.1)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: the clients' shutdown hook closes them cleanly (a consumer leaves its group)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        for reader in self.readers:
            reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def assigned_now(consumer: JsonProcess) -> set[tuple[str, int]]:
    """What a VerifiableConsumer holds after its last (eager) assignment event."""
    held: set[tuple[str, int]] = set()
    for event in consumer.named("partitions_assigned", "partitions_revoked"):
        parts = {(p["topic"], p["partition"]) for p in event["partitions"]}
        held = held | parts if event["name"] == "partitions_assigned" else held - parts
    return held


def consumed_offsets(consumers: Iterable[JsonProcess]) -> dict[tuple[str, int], list[int]]:
    """Every offset the consumers' `records_consumed` events cover, per partition, with repeats."""
    seen: dict[tuple[str, int], list[int]] = {}
    for consumer in consumers:
        for event in consumer.named("records_consumed"):
            for p in event["partitions"]:
                seen.setdefault((p["topic"], p["partition"]), []).extend(range(p["minOffset"], p["maxOffset"] + 1))
    return seen
