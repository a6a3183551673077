"""A kcoord cluster on this machine: throughput of one node against two, and failover time.

    python -m bench.cluster [--seconds 5] [--rounds 3] [--failovers 5] [--lease-ms 9000] [--baseline DIR]

Starts a real etcd (Debian's etcd-server) and kcoord nodes on one shared data dir, then:

1. OffsetCommit requests/s and heartbeats/s from the same load generator (two processes, each
   with 4 connections x 8 requests in flight, pre-encoded requests, responses only framed) against
   a one-node cluster and against a two-node cluster, the groups spread so that each connection
   talks to the node coordinating its group;
2. failover after kill -9: three nodes, a committer per moved group; the time from the kill to the
   first acknowledged commit of every moved group, --failovers times (a node is killed, then
   restarted, then the next is killed).

Prints every run and the medians. ``--baseline DIR`` (a checkout of the previous release) runs the
throughput rounds with its nodes too, taking turns with this checkout's, and prints the ratios.
``--launcher`` starts the two-node cluster as a user does on one host, `kcoord serve --nodes 2` with
its private etcd, instead of two `kcoord serve` processes on the bench's etcd.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from bench.commits import Committer, commit_frames, generate, join_member
from bench.harness import LaunchedNode, cpu_seconds, launch, wait_spread
from kclient.wire_client import WireClient
from protocol.frames import RequestHeader, frame_request
from protocol.messages import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.heartbeat import HeartbeatRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from testkit.etcd import ETCD_BINARY, EtcdProcess
from testkit.kcoord import BrokerProcess
from testkit.nodes import NodesProcess


class Node(BrokerProcess):
    """One cluster node, started (not awaited: the cluster settles as a whole)."""

    def __init__(self, etcd: EtcdProcess, data_dir: Path, cluster_id: str, node_id: int, lease_ms: int,
                 root: Path | None = None) -> None:
        props = {"node.id": node_id, "cluster.id": cluster_id, "etcd.endpoints": etcd.endpoint,
                 "broker.session.timeout.ms": lease_ms, "metrics.listener": "", "log.level": "WARNING"}
        data_dir.mkdir(parents=True, exist_ok=True)
        super().__init__(data_dir, {k: str(v) for k, v in props.items()},
                         root=root, log_path=data_dir.parent / f"node{node_id}.log")
        self.node_id = node_id
        self.start(wait=120)

    @property
    def process(self) -> subprocess.Popen[bytes]:
        assert self.proc is not None
        return self.proc

    def cpu(self) -> float:
        return cpu_seconds(self.process.pid)

    def exited(self) -> bool:
        return self.process.poll() is not None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(60)


def coordinator(port: int, group: str) -> int:
    with WireClient("127.0.0.1", port, timeout=5) as c:
        r = c.call(ApiKey.FindCoordinator, 3, FindCoordinatorRequest(key=group, key_type=0))
    return int(r.node_id) if r.error_code == 0 else -1


def groups_on(port: int, node_id: int, count: int, prefix: str) -> list[str]:
    out: list[str] = []
    i = 0
    while len(out) < count:
        if coordinator(port, f"{prefix}-{i}") == node_id:
            out.append(f"{prefix}-{i}")
        i += 1
    return out


def create_topic(port: int, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def heartbeat_frames(committer: Committer, conn: int) -> list[bytes]:
    group, generation, member = committer
    body = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member)
    return [frame_request(RequestHeader(ApiKey.Heartbeat, 4, k, "bench"), HeartbeatRequest.encode(body, 4), True)
            for k in range(64)]


def _child(port: int, frames: list[list[bytes]], seconds: float, out: Any) -> None:
    out.put(generate(port, [("", 0, "")] * len(frames), 8, seconds, lambda _c, i: frames[i]))


def load(targets: list[tuple[int, list[list[bytes]]]], seconds: float,
         nodes: Sequence[Node | LaunchedNode]) -> tuple[float, float]:
    """Runs one generator process per target (port, frames per connection); (requests/s, node cores)."""
    ctx = multiprocessing.get_context("fork")
    queue: Any = ctx.Queue()
    children = [ctx.Process(target=_child, args=(port, frames, seconds, queue)) for port, frames in targets]
    c0, t0 = sum(n.cpu() for n in nodes), time.perf_counter()
    for child in children:
        child.start()
    done = sum(queue.get()[0] for _ in children)
    wall = time.perf_counter() - t0
    for child in children:
        child.join()
    return done / seconds, (sum(n.cpu() for n in nodes) - c0) / wall


def throughput(etcd: EtcdProcess, tmp: Path, count: int, seconds: float, lease_ms: int,
               root: Path | None = None, launcher: bool = False) -> dict[str, tuple[float, float]]:
    cid = "bench" + uuid.uuid4().hex[:8]
    data = tmp / cid
    started: NodesProcess | None = None
    nodes: Sequence[Node | LaunchedNode]
    if launcher and count > 1:
        data.mkdir(parents=True)
        started, nodes = launch(data, cid, count, lease_ms)
    else:
        nodes = [Node(etcd, data, cid, n, lease_ms, root) for n in range(1, count + 1)]
    try:
        time.sleep(1)
        wait_spread(nodes)
        create_topic(nodes[0].port, "bench", 16)
        # Two generator processes, 4 connections each; with two nodes each process loads one node.
        targets_commit: list[tuple[int, list[list[bytes]]]] = []
        targets_hb: list[tuple[int, list[list[bytes]]]] = []
        for g in range(2):
            node = nodes[g % count]
            groups = groups_on(node.port, node.node_id, 4, f"bench-{g}")
            targets_commit.append((node.port, [commit_frames((grp, -1, ""), i) for i, grp in enumerate(groups)]))

            async def join_all(port: int, gs: list[str]) -> list[Committer]:
                joined = []
                for grp in gs:
                    client, generation, member = await join_member(port, grp)
                    await client.stream.aclose()
                    joined.append((grp, generation, member))
                return joined

            members = trio.run(join_all, node.port, groups_on(node.port, node.node_id, 4, f"hb-{g}"))
            targets_hb.append((node.port, [heartbeat_frames(m, i) for i, m in enumerate(members)]))
        return {"OffsetCommit": load(targets_commit, seconds, nodes), "Heartbeat": load(targets_hb, seconds, nodes)}
    finally:
        if started is not None:
            started.stop()
        for n in nodes:
            if isinstance(n, Node):
                n.kill(signal.SIGTERM)


def failovers(etcd: EtcdProcess, tmp: Path, rounds: int, lease_ms: int) -> list[float]:
    data = tmp / "data-failover"
    cid = "bench" + uuid.uuid4().hex[:8]
    nodes = {n: Node(etcd, data, cid, n, lease_ms) for n in (1, 2, 3)}
    times: list[float] = []
    try:
        time.sleep(1)
        wait_spread(list(nodes.values()))
        create_topic(nodes[1].port, "storm", 1)
        for r in range(rounds):
            victim = 1 + r % 3
            other = nodes[1 + (victim % 3)]
            moved = groups_on(other.port, victim, 3, f"fo-{r}")
            commit = {g: OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.Topic(name="storm", partitions=[
                    OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=1)])]) for g in moved}
            with WireClient("127.0.0.1", nodes[victim].port) as c:
                for g in moved:
                    assert c.call(ApiKey.OffsetCommit, 2, commit[g]).topics[0].partitions[0].error_code == 0
            killed = time.monotonic()
            nodes[victim].kill()
            pending = set(moved)
            while pending:
                for g in list(pending):
                    node = coordinator(other.port, g)
                    if node not in nodes or node == victim:
                        continue
                    try:
                        with WireClient("127.0.0.1", nodes[node].port, timeout=5) as c:
                            r2 = c.call(ApiKey.OffsetCommit, 2, commit[g])
                        if r2.topics[0].partitions[0].error_code == 0:
                            pending.discard(g)
                    except OSError:
                        pass
                time.sleep(0.02)
                if time.monotonic() - killed > 120:
                    raise RuntimeError("failover did not complete")
            took = time.monotonic() - killed
            times.append(took)
            print(f"failover {r + 1}: node {victim} killed, its groups committing again after {took:.2f} s",
                  flush=True)
            nodes[victim] = Node(etcd, data, cid, victim, lease_ms)
            wait_spread(list(nodes.values()), timeout=120)
    finally:
        for n in nodes.values():
            n.kill(signal.SIGTERM)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--lease-ms", type=int, default=9000)
    parser.add_argument("--baseline", type=Path, help="a checkout of the previous release, measured in turns with this one")
    parser.add_argument("--launcher", action="store_true",
                        help="two nodes from one `kcoord serve --nodes 2` (with its private etcd)")
    args = parser.parse_args()
    if args.launcher and args.baseline is not None:
        parser.error("--launcher runs this checkout's launcher only; leave out --baseline")
    if not os.path.exists(ETCD_BINARY):
        raise SystemExit("needs etcd (Debian package etcd-server)")
    tmp = Path(tempfile.mkdtemp(prefix="kcoord-cluster-bench-"))
    etcd = EtcdProcess(tmp / "etcd", fsync=True).start()
    try:
        results: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
        checkouts: list[tuple[str, Path | None]] = [("now", None)]
        if args.baseline is not None:
            checkouts.append(("before", args.baseline))
        for round_no in range(args.rounds):
            for count in (1, 2):
                # Taking turns: each checkout goes first in every other round.
                for label, root in checkouts[::-1] if round_no % 2 else checkouts:
                    for api, figures in throughput(etcd, tmp, count, args.seconds, args.lease_ms, root,
                                                          args.launcher).items():
                        results.setdefault((label, count, api), []).append(figures)
                        print(f"{label:6} {count} node(s) {api:12} {figures[0]:9,.0f} req/s  nodes "
                              f"{figures[1]:.2f} cores  {figures[1] / figures[0] * 1e6:5.0f} us of node CPU per "
                              f"request", flush=True)
        medians: dict[tuple[str, int, str], float] = {k: statistics.median(r[0] for r in v) for k, v in results.items()}
        for label, _ in checkouts:
            for api in ("OffsetCommit", "Heartbeat"):
                one, two = medians[(label, 1, api)], medians[(label, 2, api)]
                print(f"{label:6} median {api:12} one node {one:9,.0f} req/s  two nodes {two:9,.0f} req/s  "
                      f"ratio {two / one:.2f}")
        if args.baseline is not None:
            for count in (1, 2):
                for api in ("OffsetCommit", "Heartbeat"):
                    print(f"now / before, {count} node(s) {api:12} "
                          f"{medians[('now', count, api)] / medians[('before', count, api)]:.3f}")
        if args.failovers:
            times = failovers(etcd, tmp, args.failovers, args.lease_ms)
            print(f"failover after kill -9 (lease {args.lease_ms} ms): p50 {statistics.median(times):.2f} s, "
                  f"max {max(times):.2f} s over {len(times)}")
    finally:
        etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
