"""Compaction speed: write a log with many updates per key over several segments, then run the
cleaner once and report MB/s of log cleaned.

    python -m bench.compaction [--records 1000000] [--keys 10000] [--segment-mb 16]

Two shapes by default: few keys (most records removed) and all-distinct keys (nothing removed,
every batch copied through), the cleaner's best and worst cases per byte.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from storage.cleaner import clean
from storage.config import LogConfig
from storage.partition_log import PartitionLog


def run(records: int, keys: int, segment_mb: int, per_batch: int) -> None:
    cfg = LogConfig(segment_bytes=segment_mb << 20, cleanup_policy="compact")
    with tempfile.TemporaryDirectory() as tmp:
        log, _ = PartitionLog.open(Path(tmp) / "t-0", cfg, clock=lambda: 2_000_000_000_000)
        value = b"v" * 60
        for first in range(0, records, per_batch):
            log.append([(b"group-%054d" % ((first + i) % keys), value, 1_700_000_000_000 + first + i)
                        for i in range(min(per_batch, records - first))])
        log.roll()
        log.flush()
        started = time.perf_counter()
        stats = clean(log, force=True)
        seconds = time.perf_counter() - started
        assert stats is not None
        mb = stats.bytes_before / 1e6
        print(f"{keys:>9,} keys: cleaned {mb:.1f} MB ({stats.segments_before} segments) -> "
              f"{stats.bytes_after / 1e6:.1f} MB ({stats.segments_after}) in {seconds:.2f} s = {mb / seconds:.1f} MB/s, "
              f"{stats.records_before / seconds:,.0f} records/s, removed {stats.records_removed:,} records")
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, action="append")
    parser.add_argument("--segment-mb", type=int, default=16)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    for keys in args.keys or [10_000, args.records]:
        run(args.records, keys, args.segment_mb, args.batch)


if __name__ == "__main__":
    main()
