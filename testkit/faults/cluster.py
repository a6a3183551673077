"""The system under test: a real etcd and 2-3 `kcoord serve` nodes on one shared data dir, which
the nemesis pauses, kills, restarts, and (with network namespaces) cuts off from etcd or from
their clients. Each node then runs in a network namespace of its own with only its loopback; the
process relays TCP into it from clients, out of it to etcd, and between nodes (the transaction
coordinator writes markers through the partitions' owners).

With ``clock``, every node runs under libfaketime (Debian's ``libfaketime``) reading its wall-clock
offset from a file of its own, which the nemesis rewrites to step that node's clock. Only the wall
clock moves (``CLOCK_REALTIME``); the monotonic and boot-time clocks a node times its lease with
are left alone, as a clock step by NTP or ``date -s`` leaves them."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from testkit.etcd import EtcdProcess
from testkit.kcoord import BrokerProcess
from testkit.ports import free_port

CUT_PATHS = ("etcd", "clients")


def faketime_library() -> str | None:
    """libfaketime's preload library, when installed."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    return found[0] if found else None


class _Node(BrokerProcess):
    """A node run under a command prefix (``ip netns exec <ns>``) and with extra environment."""

    def __init__(self, prefix: list[str], extra_env: dict[str, str], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prefix = prefix
        self.extra_env = extra_env

    def command(self) -> tuple[list[str], dict[str, str]]:
        args, env = super().command()
        return [*self.prefix, *args], {**env, **self.extra_env}


class FaultCluster:
    def __init__(self, tmp: Path, nodes: int = 3, *, netns: bool = False, clock: bool = False,
                 lease_ms: int = 3000, overrides: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.node_ids = list(range(1, nodes + 1))
        self.netns = netns
        self.faketime = faketime_library() if clock else None
        if clock and self.faketime is None:
            raise RuntimeError("clock faults need libfaketime (Debian package libfaketime)")
        self.lease_ms = lease_ms
        self.overrides = overrides or {}
        self.cluster_id = "f" + uuid.uuid4().hex[:12]
        self.data_dir = tmp / "shared"
        (tmp / "etcd").mkdir(parents=True, exist_ok=True)
        self.etcd = EtcdProcess(tmp / "etcd" / "data")
        self.ports = {n: free_port() for n in self.node_ids}
        self.nodes: dict[int, BrokerProcess] = {}
        self.paused: set[int] = set()
        self.namespaces: dict[int, Any] = {}  # node -> tests.integration.netns.Namespace
        self.relays: dict[int, dict[str, list[Any]]] = {}  # node -> path -> relays

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in self.node_ids)

    def start(self) -> None:
        self.etcd.start()
        if self.netns:
            self._make_namespaces()
        for n in self.node_ids:
            self.start_node(n)

    def _make_namespaces(self) -> None:
        from tests.integration.netns import Namespace, Relay

        for n in self.node_ids:
            self.namespaces[n] = Namespace()
        for n in self.node_ids:
            ns = self.namespaces[n].name
            self.relays[n] = {
                "clients": [Relay(self.ports[n], None, ns)],
                "etcd": [Relay(self.etcd.client_port, ns, None)],
                # This node's connections to the other nodes (transaction markers, KIP-890 checks).
                "peers": [Relay(self.ports[m], ns, self.namespaces[m].name) for m in self.node_ids if m != n],
            }
            for relays in self.relays[n].values():
                for relay in relays:
                    relay.start()

    def start_node(self, n: int, wait: float = 60.0) -> BrokerProcess:
        overrides = {"node.id": str(n), "etcd.endpoints": self.etcd.endpoint, "cluster.id": self.cluster_id,
                     "broker.session.timeout.ms": str(self.lease_ms), "log.level": "WARNING",
                     "listeners": f"PLAINTEXT://127.0.0.1:{self.ports[n]}",
                     "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.ports[n]}", **self.overrides}
        prefix = self.namespaces[n].wrap([]) if n in self.namespaces else []
        b = _Node(prefix, self._clock_env(n), self.data_dir, overrides, port=self.ports[n],
                  log_path=self.tmp / f"node{n}.log")
        self.nodes[n] = b
        self.paused.discard(n)
        b.start(wait)
        return b

    def _clock_file(self, n: int) -> Path:
        return self.tmp / f"node{n}.clock"

    def _clock_env(self, n: int) -> dict[str, str]:
        if self.faketime is None:
            return {}
        if not self._clock_file(n).exists():
            self.skew(n, 0.0)
        # Re-read every second; the monotonic clocks stay true (libfaketime fakes only the wall
        # clock with this set; both spellings, as versions differ).
        return {"LD_PRELOAD": self.faketime, "FAKETIME_TIMESTAMP_FILE": str(self._clock_file(n)),
                "FAKETIME_CACHE_DURATION": "1", "DONT_FAKE_MONOTONIC": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

    def skew(self, n: int, seconds: float) -> None:
        """Steps node ``n``'s wall clock to ``seconds`` from the true time (0 sets it right)."""
        path = self._clock_file(n)
        path.with_suffix(".tmp").write_text(f"{round(seconds):+d}\n")
        path.with_suffix(".tmp").replace(path)

    def _pid(self, n: int) -> int | None:
        proc = self.nodes[n].proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def pause(self, n: int) -> None:
        pid = self._pid(n)
        if pid is not None:
            os.kill(pid, signal.SIGSTOP)
            self.paused.add(n)

    def resume(self, n: int) -> None:
        pid = self._pid(n)
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        self.paused.discard(n)

    def kill(self, n: int) -> None:
        pid = self._pid(n)
        if pid is not None:
            os.kill(pid, signal.SIGCONT)  # a paused node dies at once too
        self.nodes[n].kill()
        self.paused.discard(n)

    def restart(self, n: int) -> None:
        """Starts a node that is not running; one that starts but does not answer yet (etcd is
        away, say) is left to come up on its own."""
        if self._pid(n) is None:
            try:
                self.start_node(n, wait=20.0)
            except RuntimeError:
                if self._pid(n) is None:
                    raise

    def etcd_stop(self) -> None:
        self.etcd.stop()

    def etcd_start(self) -> None:
        if self.etcd.proc is None or self.etcd.proc.poll() is not None:
            self.etcd.start()

    def cut(self, n: int, path: str, cut: bool = True) -> None:
        for relay in self.relays[n][path]:
            relay.set_cut(cut)

    def heal_all(self) -> None:
        """Every fault undone: etcd up, every node running, unpaused and connected."""
        self.etcd_start()
        for n in self.node_ids:
            if self.faketime is not None:
                self.skew(n, 0.0)
            for path in CUT_PATHS:
                if n in self.relays:
                    self.cut(n, path, False)
            if n in self.paused:
                self.resume(n)
            self.restart(n)

    def leaders(self, topics: list[str], timeout: float = 3.0) -> dict[str, int]:
        """"topic:partition" -> leader node as Metadata tells it now (-1 without one); empty when
        no node answers."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 2000})
        out: dict[str, int] = {}
        with contextlib.suppress(Exception):
            md = admin.list_topics(timeout=timeout)
            for topic in topics:
                t = md.topics.get(topic)
                if t is None:
                    continue
                for p in t.partitions.values():
                    out[f"{topic}:{p.id}"] = p.leader
        return out

    def wait_leaders(self, topics: list[str], partitions: int, timeout: float) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while True:
            leaders = self.leaders(topics)
            if len(leaders) == partitions and all(v in self.node_ids for v in leaders.values()):
                return leaders
            if time.monotonic() > deadline:
                raise AssertionError(f"no leader for every partition of {topics} in {timeout:.0f} s: {leaders}")
            time.sleep(0.2)

    def stop(self) -> None:
        for n in list(self.nodes):
            pid = self._pid(n)
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
            self.nodes[n].kill()
        self.etcd.stop()
        for relays in self.relays.values():
            for group in relays.values():
                for relay in group:
                    relay.close()
        for ns in self.namespaces.values():
            ns.delete()
        self.relays.clear()
        self.namespaces.clear()
