"""Shared benchmark plumbing: a kcoord process on loopback (testkit's, with a benchmark's
defaults), its CPU and RSS."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from testkit.kcoord import ROOT, BrokerProcess

__all__ = ["CLK_TCK", "ROOT", "Broker", "cpu_seconds", "rss_mb", "work_dir"]

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


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


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

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss(self) -> float:
        return rss_mb(self.pid)

    def stop(self, timeout: float = 30.0) -> int:
        try:
            return super().stop(timeout)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
