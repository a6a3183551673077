"""The fault checker against a kcoord cluster: a real etcd and 2-3 `kcoord serve` nodes on one
shared data dir, producers (two idempotent, one plain, one transactional committing and aborting),
two consumer groups and offset observers writing an operation history, while a seeded nemesis
pauses, kills and restarts nodes, stops etcd and (as root, with network namespaces) cuts a node off
from etcd or from its clients, and (with libfaketime) steps a node's wall clock. Then the checker's verdict on the history and a read-back of every
partition.

    python -m bench.faults --seconds 1800 --seed N [--nodes 3] [--lease-ms 3000] [--no-netns]
                           [--no-clock] [--history PATH]

The schedule is printed first; the same seed gives the same schedule (replay with ``--seed``).
Exit code 0 when the checker finds no violation, 1 otherwise.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
from pathlib import Path

from bench.harness import work_dir
from testkit.etcd import ETCD_BINARY
from testkit.faults.checker import check, dump_readback, load_readback, report
from testkit.faults.cluster import faketime_library
from testkit.faults.history import History
from testkit.faults.nemesis import schedule
from testkit.faults.runner import run


def _netns_available() -> bool:
    from tests.integration.netns import netns_available

    return netns_available()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300, help="how long faults are injected")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--nodes", type=int, default=3, choices=(2, 3))
    parser.add_argument("--lease-ms", type=int, default=3000, help="broker.session.timeout.ms")
    parser.add_argument("--no-netns", action="store_true", help="no network faults even as root")
    parser.add_argument("--no-clock", action="store_true", help="no clock faults even with libfaketime installed")
    parser.add_argument("--schedule-only", action="store_true", help="print the schedule and exit")
    parser.add_argument("--drain-timeout", type=float, default=90, help="seconds consumers get to reach the end")
    parser.add_argument("--history", type=Path, help="write the history here (JSON lines), and the read-back "
                        "beside it (PATH.readback.json)")
    parser.add_argument("--check", type=Path, help="only check a history written with --history before")
    args = parser.parse_args()
    if args.check is not None:
        ops = History.load(args.check).snapshot()
        verdict = check(ops, load_readback(Path(f"{args.check}.readback.json")), drain_timeout=args.drain_timeout)
        print(report(ops, verdict, args.seed))
        return 0 if verdict.ok else 1
    netns = not args.no_netns and _netns_available()
    clock = not args.no_clock and faketime_library() is not None
    if args.schedule_only:
        for f in schedule(args.seed, args.seconds, args.nodes, netns=netns, clock=clock, lease_s=args.lease_ms / 1000):
            print(f)
        return 0
    if not os.path.exists(ETCD_BINARY):
        print("etcd is not installed (Debian package etcd-server)", file=sys.stderr)
        return 2
    # SIGTERM (a caller's deadline) stops the run as Ctrl-C does: the cluster and its namespaces go.
    signal.signal(signal.SIGTERM, _interrupt)
    # SIGUSR1 prints where every thread is (a caller about to stop an overdue run asks first); it
    # prints even while a thread holds the interpreter in a call that does not return.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    with work_dir("kcoord-faults-") as tmp:
        result = run(args.seed, args.seconds, tmp, nodes=args.nodes, netns=netns, clock=clock, lease_ms=args.lease_ms,
                     drain_timeout=args.drain_timeout, log=lambda line: print(line, flush=True))
        if args.history is not None:
            result.history.dump(args.history)
            dump_readback(result.readback, Path(f"{args.history}.readback.json"))
            print(f"history: {args.history}")
        print(f"\n== seed {args.seed}: {'PASS' if result.verdict.ok else 'FAIL'}")
        print(result.report)
        return 0 if result.verdict.ok else 1


def _interrupt(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the clean-up short
    raise KeyboardInterrupt


if __name__ == "__main__":
    code = main()
    # The clients' threads may still be inside librdkafka calls to nodes that are gone (a handle's
    # destruction waits for them); nothing is left to do, so the process does not wait on them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
