"""Startup replay: how fast a shard rebuilds its state from a __consumer_offsets partition.

    python bench/load.py [--records 1000000] [--groups 1000] [--partitions 100]

Writes one partition of OffsetCommit records (100 per batch, Kafka's key/value schemas), then, in a
fresh process, opens and replays it exactly as the broker does at startup (recovery scan, batch
decode, record decode, coordinator replay). Prints records/s and the replaying process's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.coordinator.context import CoordinatorConfig
from broker.coordinator.records import OffsetCommitRecord, encode_record
from broker.groups.shards import ShardManager
from broker.log_runtime.runtime import LogRuntime
from protocol.messages.offsets_log import OffsetCommitValue
from storage.config import LogConfig
from storage.partition_log import PartitionLog


class AllTopics:
    def partition_count(self, topic: str) -> int | None:
        return 1 << 20


def write(data_dir: Path, records: int, groups: int, partitions: int) -> None:
    log, _ = PartitionLog.open(data_dir / "__consumer_offsets-0", LogConfig.offsets_topic())
    now = int(time.time() * 1000)
    batch = []
    for i in range(records):
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
    log.close()


def replay(data_dir: Path) -> None:
    runtime = LogRuntime(data_dir, LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None)
    manager = ShardManager(runtime, 1, CoordinatorConfig(num_partitions=1), AllTopics(), LogConfig.offsets_topic(),
                           on_transition=lambda t: None)
    started = time.perf_counter()
    _part, count = manager.runtimes[0]._open_and_replay()
    seconds = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    offsets = manager.runtimes[0].shard.state.offsets.count()
    print(f"replayed {count:,} records in {seconds:.2f} s = {count / seconds:,.0f} records/s; "
          f"{offsets:,} offsets held; peak RSS {rss:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--replay", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay:
        replay(Path(args.replay))
        return
    with tempfile.TemporaryDirectory(prefix="kcoord-load-") as tmp:
        started = time.perf_counter()
        write(Path(tmp), args.records, args.groups, args.partitions)
        size = sum(f.stat().st_size for f in Path(tmp).rglob("*.log"))
        print(f"wrote {args.records:,} records ({size / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s")
        for _ in range(3):
            subprocess.run([sys.executable, __file__, "--replay", tmp], check=True)


if __name__ == "__main__":
    main()
