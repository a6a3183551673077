"""Replay speed: write a partition log of small records, then decode every record back with the
struct fast path, as a coordinator does when it loads a shard.

    python -m bench.replay [--records 1000000] [--batch 100] [--dir PATH]

The read side runs in a fresh process so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import ROOT
from protocol.record_batch import decode_records
from storage.config import LogConfig
from storage.partition_log import PartitionLog

CONFIG = LogConfig.offsets_topic()


def write(directory: Path, records: int, per_batch: int, keys: int) -> None:
    log, _ = PartitionLog.open(directory, CONFIG)
    value = b"v" * 60
    started = time.perf_counter()
    ts = 1_700_000_000_000
    for first in range(0, records, per_batch):
        n = min(per_batch, records - first)
        log.append([(b"group-%054d" % ((first + i) % keys), value, ts + first + i) for i in range(n)])
    log.flush()
    seconds = time.perf_counter() - started
    print(f"write:  {records:,} records in {seconds:.2f} s = {records / seconds:,.0f} records/s, "
          f"{log.size_bytes / seconds / 1e6:.1f} MB/s, {log.size_bytes / 1e6:.1f} MB in {log.segment_count} segments")
    log.close()


def read(directory: Path) -> None:
    started = time.perf_counter()
    log, report = PartitionLog.open(directory, CONFIG)
    open_s = time.perf_counter() - started
    print(f"open:   recovery verified {report.scanned_bytes / 1e6:.1f} MB (CRC of every batch) in {open_s:.2f} s")
    started = time.perf_counter()
    count = 0
    for batch in log.batches():
        count += len(decode_records(batch))
    decode_s = time.perf_counter() - started
    started = time.perf_counter()
    state: dict[bytes | None, bytes | None] = {}
    for batch in log.batches():
        for r in decode_records(batch):
            state[r.key] = r.value
    replay_s = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"decode: {count:,} records in {decode_s:.2f} s = {count / decode_s:,.0f} records/s "
          f"({log.size_bytes / decode_s / 1e6:.1f} MB/s)")
    print(f"replay: into a latest-per-key map ({len(state):,} keys) {count / replay_s:,.0f} records/s")
    print(f"peak RSS of the reading process: {peak_mb:.0f} MB")
    log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--read-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read_only:
        read(args.dir)
        return
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.dir or Path(tmp) / "__consumer_offsets-0"
        write(directory, args.records, args.batch, args.keys)
        subprocess.run([sys.executable, "-m", "bench.replay", "--read-only", "--dir", str(directory)], check=True,
                       cwd=ROOT)


if __name__ == "__main__":
    main()
