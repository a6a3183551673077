"""Network partitions for the cluster tests: each node runs in a network namespace of its own
(loopback only, no other address), and the test relays TCP between namespaces, so that it can cut
a node off from etcd, or from its clients, and heal it again.

A relay listens on ``127.0.0.1:<port>`` in one namespace and connects to ``127.0.0.1:<port>`` in
another (a socket belongs to the namespace its thread was in when it was created: the thread
enters the namespace with ``setns``, creates the socket and comes back). Cut, a relay closes the
connections it carries and holds new ones open without forwarding a byte (as a network that drops
packets does: the peer waits for its timeout); healed, it forwards again. Needs root (``ip netns``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def netns_available() -> bool:
    """Whether this process may make network namespaces (root, and ``ip`` installed)."""
    name = "kc-probe-" + uuid.uuid4().hex[:6]
    try:
        made = subprocess.run(["ip", "netns", "add", name], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    if made:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10)
    return made


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_HOME = os.open("/proc/self/ns/net", os.O_RDONLY)  # the namespace the test runs in


@contextlib.contextmanager
def inside(ns: str | None) -> Iterator[None]:
    """Runs the block's socket creations in network namespace ``ns`` (None: the test's own)."""
    if ns is None:
        yield
        return
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(fd)
        try:
            yield
        finally:
            _setns(_HOME)
    finally:
        os.close(fd)


class Namespace:
    """A network namespace with its loopback up; ``wrap`` runs a command inside it."""

    def __init__(self) -> None:
        self.name = "kc-" + uuid.uuid4().hex[:8]
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up"], check=True,
                       capture_output=True, timeout=10)

    def wrap(self, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *args]

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True, timeout=10)


class Relay(threading.Thread):
    """Forwards ``127.0.0.1:port`` in namespace ``source`` to ``127.0.0.1:port`` in ``target``."""

    def __init__(self, port: int, source: str | None, target: str | None) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.target = target
        self.cut = False
        self.closed = False
        self.lock = threading.Lock()
        self.live: set[socket.socket] = set()
        self.held: list[socket.socket] = []
        with inside(source):
            self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", port))
        self.server.listen(256)

    def run(self) -> None:
        while not self.closed:
            try:
                client, _addr = self.server.accept()
            except OSError as exc:
                if self.closed:
                    return
                # Out of descriptors, or a connection reset before it was taken: the relay goes on
                # (a relay that stopped accepting would leave its clients' connects unanswered).
                print(f"relay {self.port}: accept failed: {exc!r}", file=sys.stderr, flush=True)
                time.sleep(0.1)
                continue
            with self.lock:
                if self.cut:
                    self.held.append(client)  # never answered, never refused
                    continue
            try:
                threading.Thread(target=self._connect, args=(client,), daemon=True).start()
            except RuntimeError as exc:  # no thread to be had: this connection is refused, not the next
                print(f"relay {self.port}: no thread for a connection: {exc!r}", file=sys.stderr, flush=True)
                client.close()

    def _connect(self, client: socket.socket) -> None:
        with inside(self.target):
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            upstream.connect(("127.0.0.1", self.port))
        except OSError:
            client.close()
            upstream.close()
            return
        with self.lock:
            if self.cut or self.closed:
                client.close()
                upstream.close()
                return
            self.live.update((client, upstream))
        back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        back.start()
        self._pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(1 << 18)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            with self.lock:
                self.live.discard(src)
                self.live.discard(dst)

    def set_cut(self, cut: bool) -> None:
        """Cut: every connection carried is dropped and new ones hang. Healed: forwarding again."""
        with self.lock:
            self.cut = cut
            dropped, self.live = self.live, set()
            held, self.held = self.held, []
        for s in [*dropped, *held] if cut else held:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.closed = True
        self.set_cut(True)
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()
