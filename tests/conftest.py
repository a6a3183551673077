"""Shared fixtures: real `kcoord serve` processes on loopback with their own data dirs."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
KCOORD = [sys.executable, "-m", "kcoord"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def api_versions_ok(port: int, timeout: float = 1.0) -> bool:
    """Sends ApiVersions v0 and expects an answer with the same correlation id."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            body = b"\x00\x12\x00\x00\x00\x00\x00\x07\x00\x04ping"
            s.sendall(len(body).to_bytes(4, "big") + body)
            head = s.recv(8)
            return len(head) == 8 and head[4:8] == b"\x00\x00\x00\x07"
    except OSError:
        return False


class BrokerProcess:
    """A kcoord broker run exactly as a user runs it, as a child process."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.metrics_port = free_port()
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data_dir),
            "metrics.listener": f"http://127.0.0.1:{self.metrics_port}",
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        self.log_path = data_dir.parent / f"kcoord-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> tuple[list[str], dict[str, str]]:
        """The `kcoord serve` argv and environment this broker runs with."""
        args = [*KCOORD, "serve"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
        env["PYTHONPATH"] = str(ROOT)
        return args, env

    def run_to_exit(self, timeout: float = 60.0, **popen: Any) -> subprocess.CompletedProcess[str]:
        """Runs the broker in the foreground, for startups expected to fail: exit code, stdout, stderr."""
        args, env = self.command()
        return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, **popen)

    def start(self, wait: float = 30.0) -> BrokerProcess:
        args, env = self.command()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.proc.returncode}:\n{self.log()}")
            if api_versions_ok(self.port):
                return self
            time.sleep(0.05)
        raise RuntimeError(f"kcoord did not answer within {wait}s:\n{self.log()}")

    def wait_loaded(self, timeout: float = 30.0) -> None:
        from broker.tools.wire_client import WireClient
        from protocol.messages.list_groups import ListGroupsRequest

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with WireClient("127.0.0.1", self.port) as c:
                if c.call(16, 0, ListGroupsRequest()).error_code == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("shards did not load in time")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def _librdkafka_consumers() -> list[Any]:
    try:
        from confluent_kafka import Consumer
    except ImportError:
        return []
    # type(), not isinstance(): a dead weak proxy among the objects raises on any attribute read.
    return [o for o in gc.get_objects() if issubclass(type(o), Consumer)]


@pytest.fixture(autouse=True)
def _no_client_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """A librdkafka consumer a test leaves behind (a failure before its `close`, a polling thread
    never stopped) keeps reconnecting to a broker that has stopped, for the rest of the session,
    taking CPU from every later test. After each integration test: stop the polling threads it
    started, and close the consumers it created that are still alive."""
    if "integration" not in request.node.path.parts:
        yield
        return
    threads_before = set(threading.enumerate())
    consumers_before = {id(c) for c in _librdkafka_consumers()}
    yield
    for thread in set(threading.enumerate()) - threads_before:
        owner = getattr(getattr(thread, "_target", None), "__self__", thread)
        stop_flag = getattr(owner, "stop_flag", None)
        if isinstance(stop_flag, threading.Event):
            stop_flag.set()
            thread.join(15)
    gc.collect()  # consumers in reference cycles (callbacks that point back at their owner)
    for consumer in _librdkafka_consumers():
        if id(consumer) not in consumers_before:
            consumer.close()  # idempotent; quick even when its broker is gone


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[object]:
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, data_dir: Path | None = None,
             start: bool = True) -> BrokerProcess:
        b = BrokerProcess(data_dir or tmp_path / f"data{len(started)}", overrides)
        started.append(b)
        if start:
            b.start()
            b.wait_loaded()
        return b

    yield make
    for b in started:
        b.kill()


@pytest.fixture
def broker(broker_factory: object) -> BrokerProcess:
    return broker_factory()  # type: ignore[operator, no-any-return]


ETCD_BINARY = "/usr/bin/etcd"


class EtcdProcess:
    """A real etcd (Debian's etcd-server) on loopback ports with a throwaway data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.client_port = free_port()
        self.peer_port = free_port()
        self.data_dir = data_dir
        self.log_path = data_dir.parent / "etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def start(self) -> EtcdProcess:
        client, peer = f"http://127.0.0.1:{self.client_port}", f"http://127.0.0.1:{self.peer_port}"
        args = [ETCD_BINARY, "--name", "kcoord-test", "--data-dir", str(self.data_dir),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"kcoord-test={peer}", "--unsafe-no-fsync"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        import urllib.request

        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited: {self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=1) as answer:
                    if b'"true"' in answer.read():
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("etcd did not become healthy in 30 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdProcess]:
    """One etcd for the whole session; each cluster test uses its own key space (cluster.id)."""
    if not os.path.exists(ETCD_BINARY):
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    server = EtcdProcess(tmp_path_factory.mktemp("etcd") / "data").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """Apache Kafka's jars (broker, tools, Java clients, Streams), fetched by scripts/kafka.sh.
    scripts/test.sh fetches them and sets KCOORD_REQUIRE_KAFKA=1: there, their absence fails."""
    from testkit.kafka import java
    from testkit.kafka import kafka_libs as find_libs

    libs = find_libs()
    if libs is None or java() is None:
        message = "Apache Kafka is not fetched (bash scripts/kafka.sh) or java is missing"
        if os.environ.get("KCOORD_REQUIRE_KAFKA") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return libs


@pytest.fixture(scope="session")
def kafka(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real Apache Kafka broker for the whole session, the reference of the differential tests."""
    from testkit.kafka import KafkaProcess

    server = KafkaProcess(kafka_libs, tmp_path_factory.mktemp("apache-kafka")).start()
    yield server
    server.stop()
