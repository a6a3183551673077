"""Loading a shard: how long a __consumer_offsets partition of 1,000,000 offset commits takes to
load, replaying the whole log (A) versus from its replay snapshot (B), and a broker restart.

    python -m bench.load [--records 1000000] [--groups 1000] [--partitions 100] [--runs 5]

Writes one partition of OffsetCommit records (100 per batch, Kafka's key/value schemas; by default
1000 groups x 100 partitions = 100,000 keys, each committed 10 times), then loads it, each load in
a fresh process exactly as the broker does at startup (recovery scan, snapshot check, replay), in
three ways taking turns, so that the machine's load weighs on all of them alike:

* ``full``: no snapshot file, the whole log is replayed (what every load did before snapshots);
* ``snapshot+tail``: the snapshot covers the log but for its last ``--tail`` records (a broker
  killed just before its next periodic snapshot);
* ``snapshot``: the snapshot covers the whole log (what a graceful shutdown leaves).

``--baseline DIR`` adds ``before``: the same full load by the code in DIR (a checkout of the
previous release), in the same rotation. Prints the median and spread of each (wall clock and
CPU time of the load), the A/B ratios and each loading process's peak RSS. With
``--restart`` it also starts ``kcoord serve`` on the data dir and times it from launch to every
shard loaded (ListGroups answering), without and with the snapshot.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.records import OffsetCommitRecord, encode_record
from broker.coordinators.group.service.coordinator import GroupCoordinatorService
from broker.log_runtime.runtime import LogRuntime
from protocol.messages.offsets_log import OffsetCommitValue
from storage.config import LogConfig
from storage.partition_log import PartitionLog

ROOT = Path(__file__).resolve().parent.parent
PARTITION = "__consumer_offsets-0"


class AllTopics:
    def partition_count(self, topic: str) -> int | None:
        return 1 << 20


def write(log: PartitionLog, first: int, count: int, groups: int, partitions: int) -> None:
    now = int(time.time() * 1000)
    batch = []
    for i in range(first, first + count):
        value = OffsetCommitValue(offset=i, leader_epoch=-1, metadata="", commit_timestamp=now, expire_timestamp=-1)
        rec = OffsetCommitRecord(f"group-{i % groups}", "events", (i // groups) % partitions, value)
        key, val = encode_record(rec)
        batch.append((key, val, now))
        if len(batch) == 100:
            log.append(batch)
            batch = []
    if batch:
        log.append(batch)
    log.flush()


def snapshot_now(log: PartitionLog, into: Path) -> None:
    from broker.coordinators.group.service import replay_snapshot

    snapshot = replay_snapshot.build(log, 0, None)
    assert snapshot is not None
    replay_snapshot.write(log, snapshot)
    os.replace(replay_snapshot.path_of(log), into)


def load(data_dir: Path) -> None:
    """One load, as the broker's shard runtime does it; prints a JSON line."""
    runtime = LogRuntime(data_dir, LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None)
    manager = GroupCoordinatorService(runtime, 1, CoordinatorConfig(num_partitions=1), AllTopics(), LogConfig.offsets_topic(),
                           on_transition=lambda t: None)
    shard = manager.runtimes[0]
    started, cpu = time.perf_counter(), time.process_time()
    shard._open_and_replay()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    # Where the counts of the last load are kept: the coordinator, or (before the coordinator
    # runtime) the shard runtime itself, as a --baseline checkout may have them.
    loads = getattr(manager, "loads", None)
    loaded: object = loads[0] if loads is not None else shard
    print(json.dumps({"seconds": seconds, "cpu": cpu, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "snapshot_records": getattr(loaded, "snapshot_records", 0),
                      "log_records": getattr(loaded, "log_records", 0),
                      "offsets": shard.shard.state.offsets.count()}))


def restart_seconds(data_dir: Path) -> float:
    """Launch of ``kcoord serve`` to ListGroups answering (every shard loaded); then SIGTERM."""
    from testkit.kcoord import BrokerProcess

    broker = BrokerProcess(data_dir, {"metrics.listener": "", "log.cleaner.enable": "false", "log.level": "WARNING"},
                           log_path=data_dir.parent / "restart.log")
    started = time.perf_counter()
    try:
        broker.start_loaded(wait=120, load=120)
        return time.perf_counter() - started
    finally:
        broker.stop(60)


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--tail", type=int, default=50_000, help="records after the snapshot in snapshot+tail")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--restart", action="store_true", help="also time `kcoord serve` restarts")
    parser.add_argument("--baseline", type=Path,
                        help="a checkout of the previous release: its full replay runs as mode 'before'")
    parser.add_argument("--load", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        load(Path(args.load))
        return
    from broker.coordinators.group.service import replay_snapshot
    with tempfile.TemporaryDirectory(prefix="kcoord-load-") as tmp:
        data = Path(tmp) / "data"
        started = time.perf_counter()
        log, _ = PartitionLog.open(data / PARTITION, LogConfig.offsets_topic())
        head = args.records - args.tail
        write(log, 0, head, args.groups, args.partitions)
        snapshot_now(log, Path(tmp) / "at-tail")
        write(log, head, args.tail, args.groups, args.partitions)
        snapshot_now(log, Path(tmp) / "at-end")
        size = log.size_bytes
        log.close()
        print(f"wrote {args.records:,} records ({size / 1e6:.0f} MB, {args.groups * args.partitions:,} keys) and "
              f"their snapshots ({(Path(tmp) / 'at-end').stat().st_size / 1e6:.1f} MB) in "
              f"{time.perf_counter() - started:.1f} s")
        target = data / PARTITION / replay_snapshot.FILE_NAME
        modes: dict[str, Path | None] = {"full": None, "snapshot+tail": Path(tmp) / "at-tail",
                                         "snapshot": Path(tmp) / "at-end"}
        if args.baseline:
            modes = {"before": None, **modes}
        results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        for _ in range(args.runs):
            for mode, source in modes.items():
                target.unlink(missing_ok=True)
                if source is not None:
                    shutil.copyfile(source, target)
                # This file run by path, its ``broker`` from PYTHONPATH: the baseline's for "before".
                code = args.baseline.resolve() if mode == "before" else ROOT
                env = dict(os.environ, PYTHONPATH=str(code))
                out = subprocess.run([sys.executable, __file__, "--load", str(data)], check=True,
                                     capture_output=True, text=True, env=env).stdout
                results[mode].append(json.loads(out.strip().splitlines()[-1]))
        for mode, runs in results.items():
            r = runs[0]
            print(f"{mode:>14}: {summary([x['seconds'] for x in runs])}, CPU median "
                  f"{statistics.median(x['cpu'] for x in runs):.3f} s; read {r['snapshot_records']:,.0f} "
                  f"snapshot + {r['log_records']:,.0f} log records; {r['offsets']:,.0f} offsets; "
                  f"peak RSS {statistics.median(x['rss_mb'] for x in runs):.0f} MB")
        for base in ("before", "full"):
            if base not in results:
                continue
            wall = statistics.median(x["seconds"] for x in results[base])
            cpu = statistics.median(x["cpu"] for x in results[base])
            for mode in [m for m in results if m != base and m != "before"]:
                print(f"A/B {base} / {mode}: {wall / statistics.median(x['seconds'] for x in results[mode]):.1f}x "
                      f"wall, {cpu / statistics.median(x['cpu'] for x in results[mode]):.1f}x CPU")
        if args.restart:
            times: dict[str, list[float]] = {"without snapshot": [], "with snapshot": []}
            for _ in range(max(1, args.runs // 2)):
                for mode in times:
                    target.unlink(missing_ok=True)
                    if mode == "with snapshot":
                        shutil.copyfile(Path(tmp) / "at-end", target)
                    times[mode].append(restart_seconds(data))
            for mode, values in times.items():
                print(f"restart {mode:>17}: {summary(values)} (launch to every shard loaded)")


if __name__ == "__main__":
    main()
