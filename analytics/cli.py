"""The ``analyze`` subcommand of ``kcoord``."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from analytics.rules import DEFAULT_WINDOW, parse_duration_ms


def _instant_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it says otherwise)."""
    if text.isdigit():
        return int(text)
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (epoch ms or ISO-8601)") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


def _duration(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "analyze", help="analyse a __consumer_offsets log with Spark (needs the analysis extra)",
        description="Reads the __consumer_offsets segments of a kcoord or Kafka data dir with Spark and writes "
                    "Parquet tables (latest_offsets, commit_activity, partition_status, generation_history, "
                    "membership_timeline, group_inventory), report.html and summary.txt.")
    p.add_argument("--data-dir", required=True,
                   help="data dir, __consumer_offsets-N dir or .log file (local path or any URI pyarrow opens)")
    p.add_argument("--out", required=True, help="directory for the tables and the report")
    p.add_argument("--end-offsets", metavar="FILE",
                   help="end offsets of the consumed topics (JSON or CSV: topic,partition,end_offset[,timestamp_ms]) "
                        "to compute lag and the STALL/WARN statuses")
    p.add_argument("--master", help="Spark master URL (default local[*], or what spark-submit chose)")
    p.add_argument("--as-of", type=_instant_ms, metavar="TIME",
                   help="judge staleness and stopped partitions as of this time (default: now)")
    p.add_argument("--bucket", type=_duration, metavar="DURATION",
                   help="time bucket of commit_activity, e.g. 1m (default: the roundest that fits 60 buckets in the log's span)")
    p.add_argument("--offsets-retention-minutes", type=int, default=10080,
                   help="the cluster's offsets.retention.minutes, for the stale flag (default 10080)")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                   help=f"commits per partition the status rules look at (default {DEFAULT_WINDOW})")
    p.set_defaults(func=_analyze)
    return p


def _analyze(args: argparse.Namespace) -> int:
    from analytics.job import AnalyzeOptions, run

    return run(AnalyzeOptions(data_dir=args.data_dir, out=args.out, end_offsets=args.end_offsets,
                              master=args.master, as_of_ms=args.as_of, bucket_ms=args.bucket,
                              retention_ms=args.offsets_retention_minutes * 60_000, window=args.window))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kcoord")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
