"""Shared benchmark plumbing: a kcoord process on loopback (testkit's, with a benchmark's
defaults), its CPU and RSS; the nodes of a `kcoord serve --nodes N` and when they have settled."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from kclient.wire_client import WireClient
from protocol.messages import ApiKey
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.metadata import MetadataRequest
from testkit.kcoord import ROOT, BrokerProcess
from testkit.nodes import NodesProcess, running

__all__ = ["CLK_TCK", "ROOT", "Broker", "LaunchedNode", "cpu_seconds", "launch", "leaders", "loop_seconds", "rss_mb", "wait_spread",
           "work_dir"]

CLK_TCK = os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def work_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory for a benchmark's nodes, etcd and logs, removed afterwards; kept (and
    named) when ``KCOORD_BENCH_KEEP`` is set, to read the nodes' logs after a failed run."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield tmp
    finally:
        if os.environ.get("KCOORD_BENCH_KEEP"):
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def with_children(pid: int) -> list[int]:
    """The process and its children: a kcoord node and its send worker, which is part of it."""
    try:
        return [pid, *(int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]
    except OSError:
        return [pid]


def _read_each(pid: int, name: str) -> Iterator[str]:
    """``/proc/<pid>/<name>`` of the process and of each of its children still there."""
    for one in with_children(pid):
        try:
            yield Path(f"/proc/{one}/{name}").read_text()
        except OSError:
            continue  # ended meanwhile


def _cpu_times(stat: str) -> tuple[float, float]:
    """User and system CPU seconds of a ``/proc/.../stat`` (a process's or one thread's)."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def user_system(pid: int) -> tuple[float, float]:
    """User and system CPU seconds so far of the process (all its threads) and its children."""
    user = system = 0.0
    for stat in _read_each(pid, "stat"):
        u, s = _cpu_times(stat)
        user += u
        system += s
    return user, system


def cpu_seconds(pid: int) -> float:
    return sum(user_system(pid))


def loop_seconds(pid: int) -> float:
    """CPU seconds so far of the process's main thread: a kcoord node's event loop, which serves
    every request of the node. Its share of one core says how close the node is to saturation
    (the process's total adds the sync threads and the send worker, which run beside it)."""
    try:
        return sum(_cpu_times(Path(f"/proc/{pid}/task/{pid}/stat").read_text()))
    except OSError:
        return 0.0


def rss_mb(pid: int) -> float:
    """Resident memory of the process and its children."""
    return sum(next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0.0)
               for status in _read_each(pid, "status"))


class Broker(BrokerProcess):
    """A started kcoord with every shard loaded, in a temporary directory removed by ``stop``;
    no metrics listener, warnings only in its log."""

    def __init__(self, seed_dir: Path | None = None, root: Path | None = None, port: int | None = None,
                 **overrides: Any) -> None:
        """``seed_dir``: an existing data dir to serve (e.g. a prepared log) instead of a new one;
        ``root``: the checkout whose kcoord runs (another revision, for A/B comparisons);
        ``overrides``: broker properties with ``_`` for ``.`` (``log_flush_policy="interval"``)."""
        self.tmp = Path(tempfile.mkdtemp(prefix="kcoord-bench-"))
        props = {"metrics.listener": "", "log.level": "WARNING"}
        props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        super().__init__(Path(seed_dir or self.tmp / "data"), props, port=port, root=root,
                         log_path=self.tmp / "log")
        self.start_loaded(wait=120, load=600)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def pids(self) -> list[int]:
        return [self.pid]

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss(self) -> float:
        return rss_mb(self.pid)

    def stop(self, timeout: float = 30.0) -> int:
        try:
            return super().stop(timeout)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


class SpreadNode(Protocol):
    port: int
    node_id: int

    def exited(self) -> bool: ...


class LaunchedNode:
    """One node of a `kcoord serve --nodes N`, found by the PID its launcher logged."""

    def __init__(self, port: int, node_id: int, pid: int) -> None:
        self.port, self.node_id, self.pid = port, node_id, pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def exited(self) -> bool:
        return not running(self.pid)


def launch(data: Path, cid: str, count: int, lease_ms: int,
           overrides: dict[str, str] | None = None) -> tuple[NodesProcess, list[LaunchedNode]]:
    """`kcoord serve --nodes count` on ``data`` with its private etcd, and its nodes once each has
    started (not settled: see ``wait_spread``)."""
    # At the default log level: the launcher logs its nodes' PIDs at INFO.
    launcher = NodesProcess(data, count, {"cluster.id": cid, "broker.session.timeout.ms": str(lease_ms),
                                          "metrics.listener": "", **(overrides or {})},
                            log_path=data.parent / f"{cid}-launcher.log").start()
    deadline = time.monotonic() + 120
    while len({n for role, n, _pid in launcher.started() if role == "node"}) < count:
        if time.monotonic() > deadline or (launcher.proc is not None and launcher.proc.poll() is not None):
            launcher.kill_all()
            raise RuntimeError(f"the launcher did not start {count} nodes:\n{launcher.log()[-3000:]}")
        time.sleep(0.1)
    return launcher, [LaunchedNode(launcher.port + i, i + 1, launcher.pid_of(i + 1)) for i in range(count)]


def leaders(port: int) -> dict[int, int]:
    with WireClient("127.0.0.1", port, timeout=5) as c:
        r = c.call(ApiKey.Metadata, 9, MetadataRequest(topics=[MetadataRequest.Topic(name="__consumer_offsets")],
                                                      allow_auto_topic_creation=False))
    return {p.partition_index: p.leader_id for p in r.topics[0].partitions}


def wait_spread(nodes: Sequence[SpreadNode], timeout: float = 60) -> None:
    """Until every node sees the offsets partitions spread over all of them, the same view, and
    serves group requests."""
    want = {n.node_id for n in nodes}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(n.exited() for n in nodes):
            raise RuntimeError("a node exited; see its log in the bench directory")
        try:
            views = [leaders(n.port) for n in nodes]
            loaded = True
            for n in nodes:
                with WireClient("127.0.0.1", n.port, timeout=5) as c:
                    loaded &= c.call(ApiKey.ListGroups, 0, ListGroupsRequest()).error_code == 0
            if loaded and all(set(v.values()) == want and len(v) == 50 and v == views[0] for v in views):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("ownership did not settle")
