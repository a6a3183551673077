"""The single-member etcd `kcoord serve --nodes N` runs when no etcd.endpoints is given: Debian's
``etcd-server`` binary, on loopback only, its data under the data directory (``<log.dirs>/etcd``,
which is no partition directory: partitions are named ``<topic>-<n>``), syncing its log as etcd
does by default, on ports chosen free once and kept for the launcher's life (a restarted etcd must
be where the nodes already look for it)."""

from __future__ import annotations

import json
import shutil
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# Where Debian's etcd-server installs it, when it is not on PATH (a service environment).
DEBIAN_ETCD = "/usr/bin/etcd"


class EtcdMissing(RuntimeError):
    """No etcd binary to run: the message says what to install or set instead."""


def find_etcd() -> str:
    """The etcd binary on PATH, or Debian's; EtcdMissing when neither is there."""
    found = shutil.which("etcd") or (DEBIAN_ETCD if Path(DEBIAN_ETCD).is_file() else None)
    if found is None:
        raise EtcdMissing("--nodes without etcd.endpoints runs a private etcd, and no etcd binary was found "
                          "(Debian: apt install etcd-server); or give etcd.endpoints of an etcd of your own")
    return found


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class PrivateEtcd:
    binary: str
    data_dir: Path
    client_port: int
    peer_port: int

    @classmethod
    def under(cls, log_dir: Path, binary: str) -> PrivateEtcd:
        return cls(binary, log_dir / "etcd", _free_loopback_port(), _free_loopback_port())

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def log_path(self) -> Path:
        """etcd's own (verbose, JSON) output, beside its data rather than among the nodes' lines."""
        return self.data_dir / "etcd.log"

    def argv(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [self.binary, "--name", "kcoord", "--data-dir", str(self.data_dir / "data"),
                "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"kcoord={peer}"]


def healthy(endpoint: str) -> bool:
    """Whether etcd answers its health check with a leader (blocking; run in a thread)."""
    try:
        with urllib.request.urlopen(f"{endpoint}/health", timeout=1) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")
    except (OSError, ValueError, urllib.error.URLError):
        return False
