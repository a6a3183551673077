"""The Python work a request costs the broker, counted rather than timed: function calls per
request on the event loop's thread (cProfile), for a heartbeat, an OffsetCommit with one request in
flight, and OffsetCommits pipelined 4 connections x 8 deep.

    python -m bench.request_cost [--seconds 3] [--baseline DIR] [--cluster]

CPU time per request swings by 10-20 % between runs of the same code on a shared 2-core machine;
the number of calls does not, so a change to the request path shows in it at once. ``--baseline
DIR`` (a checkout of the previous release) runs the same load against its broker and prints the
ratios. ``--cluster`` runs each broker as a one-node cluster on a real etcd (cluster mode's request
path: ownership checks, fenced logs). Wall-clock figures under the profiler are inflated and only
comparable with each other.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import tempfile
import time
from pathlib import Path

import trio

from bench.commits import create_commit_topic, run_case
from bench.groups import heartbeat_rate
from bench.harness import ROOT, Broker
from testkit.etcd import EtcdProcess

LOADS = ("heartbeat", "commit, one in flight", "commit, 4 x 8 in flight")


class ProfiledBroker(Broker):
    """A bench broker running under bench/profiled_serve.py."""

    profile_out = ""

    def command(self) -> tuple[list[str], dict[str, str]]:
        args, env = super().command()
        env["BENCH_PROFILE_OUT"] = self.profile_out
        # [python, -m, kcoord, serve, ...] -> [python, profiled_serve.py, serve, ...]
        return [args[0], str(ROOT / "bench" / "profiled_serve.py"), *args[3:]], env


def measure(root: Path | None, load: str, seconds: float, out: Path,
            etcd: EtcdProcess | None = None) -> tuple[float, pstats.Stats]:
    """(requests served, the profile) of ``load`` against a broker of ``root`` (with ``etcd``: a
    one-node cluster of its own)."""
    broker = ProfiledBroker.__new__(ProfiledBroker)
    broker.profile_out = str(out)
    cluster = {} if etcd is None else {"node_id": 1, "cluster_id": f"cost{out.stem.replace('-', '')}",
                                       "etcd_endpoints": etcd.endpoint}
    Broker.__init__(broker, root=root, log_flush_policy="sync", **cluster)
    try:
        create_commit_topic(broker.port)
        run_case(broker, [("warm-up", -1, "")], 1, 1)
        os.kill(broker.pid, signal.SIGUSR2)
        time.sleep(0.2)
        if load == "heartbeat":
            rate, _, _ = trio.run(heartbeat_rate, broker.port, 50, seconds, "cost", broker.cpu)
        elif load == "commit, one in flight":
            rate = run_case(broker, [("cost", -1, "")], 1, seconds)["req/s"]
        else:
            rate = run_case(broker, [(f"cost-{i}", -1, "") for i in range(4)], 8, seconds)["req/s"]
        time.sleep(0.2)
        os.kill(broker.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # the file is written whole before the next read
    finally:
        broker.stop()
    return rate * seconds, pstats.Stats(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--baseline", type=Path, help="a checkout of the previous release")
    parser.add_argument("--cluster", action="store_true", help="each broker a one-node cluster on a real etcd")
    args = parser.parse_args()
    checkouts: list[tuple[str, Path | None]] = [("now", None)]
    if args.baseline is not None:
        checkouts.insert(0, ("before", args.baseline))
    with tempfile.TemporaryDirectory(prefix="kcoord-cost-") as tmp:
        etcd = EtcdProcess(Path(tmp) / "etcd").start() if args.cluster else None
        try:
            report(checkouts, args.seconds, Path(tmp), etcd)
        finally:
            if etcd is not None:
                etcd.stop()


def report(checkouts: list[tuple[str, Path | None]], seconds: float, tmp: Path, etcd: EtcdProcess | None) -> None:
    calls: dict[tuple[str, str], float] = {}
    for load in LOADS:
        for label, root in checkouts:
            served, stats = measure(root, load, seconds, tmp / f"{label}-{len(calls)}.prof", etcd)
            total_calls = getattr(stats, "total_calls", 0)
            calls[(label, load)] = total_calls / served
            print(f"{label:6} {load:26} {served:9,.0f} requests  {total_calls / served:7.1f} calls/request", flush=True)
    if len(checkouts) > 1:
        for load in LOADS:
            print(f"now / before, {load:26} {calls[('now', load)] / calls[('before', load)]:.3f}")


if __name__ == "__main__":
    main()
