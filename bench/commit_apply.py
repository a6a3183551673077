"""What applying an offset commit costs the coordinator: OffsetCommit records replayed into a
shard (the step every commit takes live, and every record at load), plain only and with
transactional commits of the same group open beside them.

    python bench/commit_apply.py [--records 200000] [--runs 5] [--against CHECKOUT]

Each measurement runs in a fresh process. ``--against`` runs the same measurement, alternating,
with another checkout's code (A/B); medians are printed for both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(records: int) -> dict[str, float]:
    from broker.coordinator.context import CoordinatorConfig
    from broker.coordinator.records import OffsetCommitRecord
    from broker.coordinator.shard import GroupCoordinatorShard
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
    code = f"import sys; sys.path.insert(0, {str(checkout)!r}); sys.path.insert(1, {str(ROOT / 'bench')!r}); " \
           f"import json, commit_apply; print(json.dumps(commit_apply.measure({records})))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=checkout)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, default=None, help="another checkout, for an A/B comparison")
    args = parser.parse_args()
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
