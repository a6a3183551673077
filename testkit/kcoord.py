"""kcoord itself as a child process: `kcoord serve` exactly as a user runs it, on loopback ports
with its own data dir, started and awaited until it answers."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from testkit.ports import api_versions_ok, free_port

ROOT = Path(__file__).resolve().parent.parent
KCOORD = [sys.executable, "-m", "kcoord"]


@functools.cache
def known_properties(root: Path) -> frozenset[str]:
    """The properties kcoord of the checkout ``root`` has, from its own `kcoord config`."""
    listing = subprocess.run([*KCOORD, "config"], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                             capture_output=True, text=True, timeout=120, check=True).stdout
    return frozenset(re.findall(r'^"([^"]+)" = ', listing, re.MULTILINE))


class BrokerProcess:
    """A kcoord broker run exactly as a user runs it, as a child process."""

    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, *, port: int | None = None,
                 root: Path | None = None, log_path: Path | None = None) -> None:
        """``overrides``: broker properties over the test defaults; ``port``: the PLAINTEXT port
        (a free one by default); ``root``: the checkout whose kcoord runs (another revision, for
        A/B comparisons; this one by default); ``log_path``: where its output goes."""
        self.data_dir = data_dir
        self.port = port or free_port()
        self.metrics_port = free_port()
        self.console_port = free_port()
        self.root = root or ROOT
        defaults = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data_dir),
            "metrics.listener": f"http://127.0.0.1:{self.metrics_port}",
            "console.listener": f"http://127.0.0.1:{self.console_port}",
            "group.initial.rebalance.delay.ms": "0",
            # As the reference Kafka runs (testkit.kafka): each change assigned in the heartbeat
            # that brings it, not once a second (KIP-1263; its own tests set the interval).
            "group.consumer.assignment.interval.ms": "0",
            "group.share.assignment.interval.ms": "0",
        }
        if self.root != ROOT:
            # An older checkout refuses a property it does not have: of these test defaults, it
            # gets those it knows (what is asked for explicitly is passed as it is).
            known = known_properties(self.root)
            defaults = {k: v for k, v in defaults.items() if k in known}
        self.overrides = {**defaults, **(overrides or {})}
        self.log_path = log_path or data_dir.parent / f"kcoord-{self.port}.log"
        # Environment variables the broker runs with besides the test process's (KRB5_CONFIG).
        self.env: dict[str, str] = {}
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
        env["PYTHONPATH"] = str(self.root)
        env.update(self.env)
        return args, env

    def run_to_exit(self, timeout: float = 60.0, **popen: Any) -> subprocess.CompletedProcess[str]:
        """Runs the broker in the foreground, for startups expected to fail: exit code, stdout, stderr."""
        args, env = self.command()
        return subprocess.run(args, cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout, **popen)

    def start(self, wait: float = 30.0) -> BrokerProcess:
        args, env = self.command()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, cwd=self.root, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.proc.returncode}:\n{self.log()}")
            if api_versions_ok(self.port):
                return self
            time.sleep(0.02)
        raise RuntimeError(f"kcoord did not answer within {wait}s:\n{self.log()}")

    def wait_loaded(self, timeout: float = 30.0) -> BrokerProcess:
        """Waits until every coordinator shard has loaded: ListGroups (the group coordinator's shards)
        and ListTransactions (the transaction coordinator's) both answer without an error."""
        from kclient.wire_client import WireClient
        from protocol.messages.list_groups import ListGroupsRequest
        from protocol.messages.list_transactions import ListTransactionsRequest

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.proc.returncode}:\n{self.log()}")
            with WireClient("127.0.0.1", self.port) as c:
                if (c.call(16, 0, ListGroupsRequest()).error_code == 0
                        and c.call(66, 0, ListTransactionsRequest(state_filters=[], producer_id_filters=[])).error_code == 0):
                    return self
            time.sleep(0.02)
        raise RuntimeError("shards did not load in time")

    def start_loaded(self, wait: float = 30.0, load: float = 30.0) -> BrokerProcess:
        """Starts the broker and waits until it serves with every shard loaded."""
        return self.start(wait).wait_loaded(load)

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
