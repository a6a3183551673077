"""`kcoord serve --nodes N` as a child process, exactly as a user runs it: the launcher, the node
processes it supervises and its private etcd, each found by the PID the launcher logs."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

from testkit.kcoord import KCOORD, ROOT
from testkit.ports import free_port

_STARTED = re.compile(r" launcher\.(node|etcd)_started (?:node=(\d+) )?.*?pid=(\d+)")


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that nothing listens on now."""
    while True:
        first = free_port()
        if first + count - 1 > 65535:
            continue
        sockets: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()


class NodesProcess:
    """The launcher of ``count`` nodes on loopback: node i listens on ``port + i`` and serves its
    metrics on ``metrics_port + i``; no console."""

    def __init__(self, data_dir: Path, count: int, overrides: dict[str, str] | None = None,
                 log_path: Path | None = None) -> None:
        self.data_dir = data_dir
        self.count = count
        self.port = free_ports(count)
        self.metrics_port = free_ports(count)
        props = {"log.dirs": str(data_dir), "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                 "metrics.listener": f"http://127.0.0.1:{self.metrics_port}",
                 "group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        if _has_console():
            props.setdefault("console.listener", "")
        self.argv = [*KCOORD, "serve", "--nodes", str(count),
                     *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))]
        self.log_path = log_path or data_dir.parent / "launcher.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def ports(self) -> list[int]:
        return [self.port + i for i in range(self.count)]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self) -> NodesProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
        env["PYTHONPATH"] = str(ROOT)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def started(self) -> list[tuple[str, int, int]]:
        """(role, node id or 0 for etcd, pid) of every process the launcher started, in order."""
        return [(m[1], int(m[2] or 0), int(m[3])) for m in _STARTED.finditer(self.log())]

    def pid_of(self, node_id: int) -> int:
        """The PID of the node's latest process."""
        return [pid for role, node, pid in self.started() if role == "node" and node == node_id][-1]

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM to the launcher, and its exit status once it has exited."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill_all(self) -> None:
        """Leaves nothing running: the launcher and every process it started (a failed test)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for _role, _node, pid in self.started():
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _has_console() -> bool:
    from broker.configs.node_config import PROPERTIES

    return any(p.name == "console.listener" for p in PROPERTIES)
