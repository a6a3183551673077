"""End-to-end analysis benchmark: 1,000,000 offset-commit records, every table and the report.

    python -m bench.analyze [--commits 1000000] [--master local[2]] [--runs 3]

Prints the Spark start-up time once, then for each run the split between decoding (reading
the segments and the first sort of the commits) and the queries (tables written as Parquet)
and the report. The first run warms the Python workers; the best of the later ones is the
warm figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from analytics.job import AnalyzeOptions, analyze, build_session
from analytics.synthetic import write_synthetic_log


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data-dir", help="reuse this synthetic data dir (made if missing, kept afterwards)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="kcoord-bench-analyze-")
    data_dir = args.data_dir or os.path.join(work, "data")
    if not os.path.isdir(data_dir):
        t = time.perf_counter()
        stats = write_synthetic_log(data_dir, args.commits)
        print(f"wrote {stats['commits']:,} commits, {stats['group_records']} group records in "
              f"{stats['segments']} segments ({time.perf_counter() - t:.1f}s, not timed below)")

    t = time.perf_counter()
    spark = build_session(args.master, "kcoord-bench-analyze",
                          {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
    print(f"spark start-up: {time.perf_counter() - t:.1f}s ({args.master})")

    from analytics.source import NAME

    totals = []
    for run in range(1, args.runs + 1):
        t = time.perf_counter()
        n = spark.read.format(NAME).option("kinds", "offset_commit").load(data_dir).count()
        read_only = time.perf_counter() - t
        out = os.path.join(work, f"out{run}")
        t = time.perf_counter()
        result = analyze(spark, AnalyzeOptions(data_dir=data_dir, out=out, as_of_ms=1_700_000_000_000 + 86_400_000))
        total = time.perf_counter() - t
        totals.append(total)
        split = ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.items())
        print(f"run {run}: end to end {total:.2f}s ({split}); decode alone (count of {n:,} rows) {read_only:.2f}s")
        print("    " + ", ".join(f"{k} {v:.2f}s" for k, v in result.detail.items()))
    warm = min(totals[1:]) if len(totals) > 1 else totals[0]
    print(f"warm end to end: {warm:.2f}s for {args.commits:,} commits "
          f"({'under' if warm < 10 else 'OVER'} the 10 s budget)")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
