"""A real etcd (Debian's etcd-server) as a child process, for kcoord's cluster mode."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from testkit.ports import free_port

ETCD_BINARY = "/usr/bin/etcd"


class EtcdProcess:
    """A real etcd (Debian's etcd-server) on loopback ports with a throwaway data dir."""

    def __init__(self, data_dir: Path, fsync: bool = False) -> None:
        """``fsync``: whether etcd syncs its log (off for tests: faster, and their data is thrown away)."""
        self.fsync = fsync
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
                "--initial-cluster", f"kcoord-test={peer}", *([] if self.fsync else ["--unsafe-no-fsync"])]
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
