"""A real etcd (Debian's etcd-server) as a child process, for kcoord's cluster mode: plain HTTP on
loopback by default, or (``tls``) HTTPS requiring client certificates of a CA, with etcd's auth
turned on by ``enable_auth`` through etcdctl (Debian's etcd-client) as an operator does it."""

from __future__ import annotations

import signal
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from testkit.ports import free_port

ETCD_BINARY = "/usr/bin/etcd"
ETCDCTL_BINARY = "/usr/bin/etcdctl"


@dataclass(frozen=True)
class EtcdTls:
    """PEM files: the CA that signs etcd's certificate and the client certificates etcd accepts,
    etcd's own certificate and key, and an administrator's client certificate and key (for the
    health check and etcdctl; without a Common Name, which etcd's JSON gateway refuses)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


class EtcdProcess:
    """A real etcd (Debian's etcd-server) on loopback ports with a throwaway data dir."""

    def __init__(self, data_dir: Path, fsync: bool = False, *, tls: EtcdTls | None = None) -> None:
        """``fsync``: whether etcd syncs its log (off for tests: faster, and their data is thrown away);
        ``tls``: serve clients over HTTPS only, to certificates of ``tls.ca`` (``--client-cert-auth``)."""
        self.fsync = fsync
        self.tls = tls
        self.client_port = free_port()
        self.peer_port = free_port()
        self.data_dir = data_dir
        self.log_path = data_dir.parent / "etcd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.root_password: str | None = None

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    def _client_context(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        ctx = ssl.create_default_context(cafile=str(self.tls.ca))
        ctx.load_cert_chain(str(self.tls.client_cert), str(self.tls.client_key))
        return ctx

    def start(self) -> EtcdProcess:
        client, peer = self.endpoint, f"http://127.0.0.1:{self.peer_port}"
        args = [ETCD_BINARY, "--name", "kcoord-test", "--data-dir", str(self.data_dir),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"kcoord-test={peer}", *([] if self.fsync else ["--unsafe-no-fsync"])]
        if self.tls is not None:
            args += ["--client-cert-auth", "--trusted-ca-file", str(self.tls.ca),
                     "--cert-file", str(self.tls.server_cert), "--key-file", str(self.tls.server_key)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        context = self._client_context()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited: {self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=1, context=context) as answer:
                    if b'"true"' in answer.read():
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("etcd did not become healthy in 30 s")

    def etcdctl(self, *args: str, stdin: str | None = None) -> str:
        """Runs ``etcdctl`` against this etcd (as root once auth is on); its output, or RuntimeError."""
        command = [ETCDCTL_BINARY, f"--endpoints={self.endpoint}"]
        if self.tls is not None:
            command += [f"--cacert={self.tls.ca}", f"--cert={self.tls.client_cert}", f"--key={self.tls.client_key}"]
        if self.root_password is not None:
            command.append(f"--user=root:{self.root_password}")
        done = subprocess.run([*command, *args], input=stdin, capture_output=True, text=True, timeout=60,
                              env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"})
        if done.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def add_user(self, name: str, password: str, prefix: str) -> None:
        """An etcd user ``name`` with a role of the same name that may read and write the keys under
        ``prefix`` and nothing else: the commands docs/cluster.md gives operators."""
        self.etcdctl("role", "add", name)
        self.etcdctl("role", "grant-permission", name, "readwrite", "--prefix=true", prefix)
        self.etcdctl("user", "add", f"{name}:{password}")
        self.etcdctl("user", "grant-role", name, name)

    def enable_auth(self, root_password: str) -> None:
        """Turns etcd's auth on (a root user first, as etcd requires); etcdctl runs as root after."""
        self.etcdctl("user", "add", f"root:{root_password}")
        self.etcdctl("user", "grant-role", "root", "root")
        self.etcdctl("auth", "enable")
        self.root_password = root_password

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
