"""Compaction inside a running broker: MB/s of the cleaner and the commit latency it causes.

    python -m bench.compaction_under_load [--mb 400]

Writes a __consumer_offsets partition of --mb megabytes where a few keys are committed over and over
(what a long-lived consumer group leaves behind), starts kcoord on it with the cleaner due at once,
and measures commit latency (p50/p99, one connection, 8 in flight) on another shard while the
cleaner runs and again after it has finished.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
import time
from pathlib import Path

from bench.commits import create_commit_topic, generate
from bench.harness import Broker
from bench.load import PARTITION, write
from broker.coordinators.group.core.base.partitioning import partition_for
from storage.config import LogConfig
from storage.partition_log import PartitionLog


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=400)
    args = parser.parse_args()
    records = args.mb * 1_000_000 // 57  # ~57 bytes a record in 100-record batches
    seed = Path(tempfile.mkdtemp(prefix="kcoord-compaction-"))
    started = time.perf_counter()
    log, _ = PartitionLog.open(seed / PARTITION, LogConfig.offsets_topic())
    write(log, 0, records, groups=50, partitions=10)
    log.close()
    print(f"wrote {records:,} records ({args.mb} MB) in {time.perf_counter() - started:.1f} s")
    broker = Broker(seed, log_cleaner_backoff_ms=500, log_cleaner_min_cleanable_ratio=0.1, log_level="INFO")
    try:
        create_commit_topic(broker.port)
        assert partition_for("bench-simple-0") != 0, "the measured group must live on another shard"
        during: list[float] = []
        rounds = 0
        while "log.compacted partition=0" not in broker.log() and rounds < 120:
            _done, lat, _cpu = generate(broker.port, [("bench-simple-0", -1, "")], 8, 1.0)
            during.extend(lat)
            rounds += 1
        match = re.search(r"log.compacted partition=0 bytes_before=(\d+) bytes_after=(\d+) .*seconds=([\d.]+)",
                          broker.log())
        if match:
            before, after, seconds = int(match[1]), int(match[2]), float(match[3])
            print(f"cleaner: {before / 1e6:.0f} MB -> {after / 1e6:.1f} MB in {seconds:.1f} s = "
                  f"{before / 1e6 / seconds:.0f} MB/s")
        _done, after_lat, _cpu = generate(broker.port, [("bench-simple-0", -1, "")], 8, 3.0)
        print(f"commits while compacting: p50 {percentile(during, 0.5):.2f} ms  p99 {percentile(during, 0.99):.2f} ms"
              f"  ({len(during):,} commits)")
        print(f"commits afterwards:       p50 {percentile(after_lat, 0.5):.2f} ms  p99 "
              f"{percentile(after_lat, 0.99):.2f} ms  ({len(after_lat):,} commits)")
    finally:
        broker.stop()
        shutil.rmtree(seed, ignore_errors=True)


if __name__ == "__main__":
    main()
