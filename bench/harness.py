"""Shared benchmark plumbing: a kcoord process on loopback, its CPU and RSS, raw async clients."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from protocol.frames import RequestHeader, frame_request  # noqa: E402
from protocol.messages import REQUESTS, RESPONSES  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Broker:
    def __init__(self, seed_dir: Path | None = None, root: Path | None = None, **overrides: Any) -> None:
        """``seed_dir``: an existing data dir to serve (e.g. a prepared log) instead of a new one;
        ``root``: the checkout whose kcoord runs (another revision, for A/B comparisons)."""
        self.tmp = tempfile.mkdtemp(prefix="kcoord-bench-")
        self.port = free_port()
        data_dir = seed_dir or f"{self.tmp}/data"
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": str(data_dir),
                 "metrics.listener": "", "group.initial.rebalance.delay.ms": "0", "log.level": "WARNING"}
        props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        args = [sys.executable, "-m", "kcoord", "serve"]
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        with open(f"{self.tmp}/log", "w") as log:
            self.proc = subprocess.Popen(args, cwd=root or ROOT, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        subprocess.run([sys.executable, "-m", "kcoord", "health", "--bootstrap", f"127.0.0.1:{self.port}"],
                       cwd=ROOT, check=False, capture_output=True)
        while subprocess.run([sys.executable, "-m", "kcoord", "health", "--bootstrap",
                              f"127.0.0.1:{self.port}"], cwd=ROOT, capture_output=True).returncode:
            time.sleep(0.1)

    def log(self) -> str:
        return Path(f"{self.tmp}/log").read_text(errors="replace")

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss(self) -> float:
        return rss_mb(self.proc.pid)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        shutil.rmtree(self.tmp, ignore_errors=True)


class AsyncClient:
    """One connection; send() pipelines, recv() returns responses in order."""

    def __init__(self, stream: trio.SocketStream, client_id: str = "bench") -> None:
        self.stream = stream
        self.client_id = client_id
        self.corr = 0
        self.buf = bytearray()

    @classmethod
    async def connect(cls, port: int, client_id: str = "bench") -> AsyncClient:
        return cls(await trio.open_tcp_stream("127.0.0.1", port), client_id)

    def encode(self, api_key: int, version: int, body: Any) -> bytes:
        self.corr += 1
        req = REQUESTS[api_key]
        flexible = req.is_flexible(version)
        return frame_request(RequestHeader(api_key, version, self.corr, self.client_id),
                             req.encode(body, version), flexible)

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def recv_frame(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack_from(">i", self.buf, 0)
                if len(self.buf) >= 4 + size:
                    frame = bytes(self.buf[4 : 4 + size])
                    del self.buf[: 4 + size]
                    return frame
            data = await self.stream.receive_some(1 << 16)
            if not data:
                raise ConnectionError("closed")
            self.buf += data

    async def call(self, api_key: int, version: int, body: Any) -> Any:
        await self.stream.send_all(self.encode(api_key, version, body))
        frame = await self.recv_frame()
        resp = RESPONSES[api_key]
        pos = 4 + (1 if resp.is_flexible(version) and api_key != 18 else 0)
        return resp.decode(frame[pos:], version)
