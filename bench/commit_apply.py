"""What applying an offset commit costs the coordinator: OffsetCommit records replayed into a
shard (the step every commit takes live, and every record at load), plain only and with
transactional commits of the same group open beside them.

    python -m bench.commit_apply [--records 200000] [--runs 5] [--against CHECKOUT]

Each measurement runs in a fresh process. ``--against`` runs the same measurement, alternating,
with another checkout's code (A/B); medians are printed for both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(records: int) -> dict[str, float]:
    from broker.coordinators.group.core.base.context import CoordinatorConfig
    from broker.coordinators.group.core.base.records import OffsetCommitRecord
    from broker.coordinators.group.core.shard import GroupCoordinatorShard
    from protocol.messages.offsets_log import OffsetCommitValue

    class Topics:
        def partition_count(self, topic: str) -> int | None:
            return 64

        def topic_names(self) -> list[str]:
            return ["t"]

    def commits(group: str) -> list[OffsetCommitRecord]:
        return [OffsetCommitRecord(group, "t", i % 64, OffsetCommitValue(
            offset=i, leader_epoch=-1, metadata="", commit_timestamp=i, expire_timestamp=-1)) for i in range(records)]

    out = {}
    recs = commits("g")
    for case in ("plain", "with-open-transactions"):
        shard = GroupCoordinatorShard(0, CoordinatorConfig(), Topics(), lambda p: p)  # type: ignore[arg-type]
        if case != "plain":
            for pid in range(4):  # four producers each with pending offsets of every partition of the group
                for rec in recs[:64]:
                    shard.replay_txn_offset(rec, pid)
        started = time.perf_counter()
        for rec in recs:
            shard.replay(rec)
        out[case] = records / (time.perf_counter() - started)
    return out


def run(checkout: Path, records: int) -> dict[str, float]:
    """One measurement in a fresh process whose ``broker`` is the one of ``checkout``: this file run
    by path (its own folder first on the path, not the checkout root), the checkout on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run([sys.executable, __file__, "--measure", str(records)], capture_output=True, text=True,
                          check=True, cwd=checkout, env=env)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, default=None, help="another checkout, for an A/B comparison")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    variants = [("this", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    for i in range(args.runs):
        order = variants if i % 2 == 0 else variants[::-1]
        for name, checkout in order:
            results[name].append(run(checkout, args.records))
    med = {name: {case: statistics.median(r[case] for r in rs) for case in rs[0]} for name, rs in results.items()}
    for name, cases in med.items():
        print(f"{name:8s} " + "  ".join(f"{case}: {rate:,.0f} records/s" for case, rate in cases.items()))
    if "against" in med:
        print("this / against: " + "  ".join(f"{case}: {med['this'][case] / med['against'][case]:.3f}"
                                            for case in med["this"]))


if __name__ == "__main__":
    main()
