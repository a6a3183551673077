"""The judgement calls of the analysis, as plain functions over plain values.

Partition status follows Burrow's evaluator: over the last few commits of a partition,
REWIND (the committed offset went back), STOP (no commit for longer than the window spans),
STALL (commits that do not move while there is lag) and WARN (offsets move but the lag never
shrinks). STALL and WARN need lag, so they are judged only when end offsets are given; from
the log alone only OK, STOP and REWIND can be told apart.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

OK, WARN, STALL, STOP, REWIND = "OK", "WARN", "STALL", "STOP", "REWIND"
_SEVERITY = {OK: 0, WARN: 1, STALL: 2, STOP: 2, REWIND: 2}
DEFAULT_WINDOW = 10  # commits per partition, Burrow's default number of intervals


@dataclass(frozen=True)
class Commit:
    offset: int
    timestamp_ms: int
    lag: int | None = None  # end offset at the time of the commit minus the offset, if known


def partition_status(window: Sequence[Commit], current_lag: int | None, now_ms: int) -> tuple[str, str]:
    """(status, why) of one partition from its last commits, oldest first."""
    if not window:
        return OK, "no commits"
    if current_lag is not None:
        if current_lag <= 0:
            return OK, "no lag"
        if any(c.lag is not None and c.lag <= 0 for c in window):
            return OK, "lag was zero within the window"
    for prev, cur in pairwise(window):
        if cur.offset < prev.offset:
            return REWIND, f"offset went back from {prev.offset} to {cur.offset}"
    first, last = window[0].timestamp_ms, window[-1].timestamp_ms
    idle = now_ms - last
    if idle > last - first:
        return STOP, f"no commit for {format_duration(idle)}, longer than the window spans ({format_duration(last - first)})"
    if current_lag is None:
        return OK, "committing"
    if all(c.offset == window[0].offset for c in window):
        return STALL, f"offset stuck at {window[0].offset} with lag {current_lag}"
    lags = [c.lag for c in window if c.lag is not None]
    if len(lags) == len(window) and all(b >= a for a, b in pairwise(lags)):
        return WARN, f"lag not decreasing ({lags[0]} -> {lags[-1]})"
    return OK, "consuming"


def group_status(statuses: Iterable[str]) -> str:
    """Burrow's group status: ERR if any partition is in error, WARN if any warns, else OK."""
    worst = max((_SEVERITY.get(s, 0) for s in statuses), default=0)
    return "ERR" if worst >= 2 else WARN if worst == 1 else OK


def group_state(has_group_record: bool, deleted: bool, member_count: int) -> str:
    """The state kafka-consumer-groups.sh --state shows, as far as the log can tell.

    The log holds only completed rebalances, so a group mid-rebalance reads as Stable with
    its previous members; a group that only ever committed offsets (no membership) is Empty.
    """
    if deleted:
        return "Dead"
    if not has_group_record or member_count == 0:
        return "Empty"
    return "Stable"


def is_stale(state: str, last_commit_ms: int | None, state_change_ms: int | None, now_ms: int,
             retention_ms: int) -> bool:
    """Offsets that Kafka's KIP-211 rules would expire: the group has no members and nothing
    happened to it (commit or state change) for the offsets retention period."""
    if state not in ("Empty",):
        return False
    last = max((t for t in (last_commit_ms, state_change_ms) if t is not None and t >= 0), default=None)
    return last is not None and now_ms - last > retention_ms


_BUCKETS_MS = [1000, 5000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000, 6 * 3_600_000, 86_400_000,
               7 * 86_400_000]


def pick_bucket_ms(span_ms: int, max_buckets: int = 60) -> int:
    """The smallest round bucket that cuts ``span_ms`` into at most ``max_buckets`` pieces."""
    for b in _BUCKETS_MS:
        if span_ms / b <= max_buckets:
            return b
    return _BUCKETS_MS[-1]


def parse_duration_ms(text: str) -> int:
    """"90s", "5m", "2h", "7d" or plain milliseconds."""
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    t = text.strip().lower()
    for suffix in ("ms", "s", "m", "h", "d"):
        if t.endswith(suffix) and t[: -len(suffix)].strip().isdigit():
            return int(t[: -len(suffix)]) * units[suffix]
    if t.isdigit():
        return int(t)
    raise ValueError(f"not a duration: {text!r} (try 30s, 5m, 1h, 7d)")


def format_duration(ms: int | float) -> str:
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s" if s < 10 else f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m" if s % 60 < 1 else f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 86400:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"


@dataclass(frozen=True)
class EndOffset:
    topic: str
    partition: int
    end_offset: int
    sampled_at_ms: int | None = None


def parse_end_offsets(text: str) -> list[EndOffset]:
    """End offsets (high watermarks) of the consumed topics, as JSON or CSV.

    JSON: ``{"topic": {"0": 120, "1": 99}}`` or a list of ``{"topic", "partition",
    "end_offset"[, "timestamp"]}``. CSV: ``topic,partition,end_offset[,timestamp]``, header
    optional. Timestamps (ms) let lag be known at each commit (needed for WARN); without
    them the samples are taken as current.
    """
    stripped = text.strip()
    if not stripped:
        return []
    out: list[EndOffset] = []
    if stripped[0] in "[{":
        data = json.loads(stripped)
        if isinstance(data, dict):
            for topic, parts in data.items():
                for p, end in parts.items():
                    out.append(EndOffset(topic, int(p), int(end)))
        else:
            for row in data:
                ts = row.get("timestamp", row.get("sampled_at_ms"))
                out.append(EndOffset(row["topic"], int(row["partition"]),
                                     int(row.get("end_offset", row.get("offset"))),
                                     int(ts) if ts is not None else None))
        return out
    for i, row in enumerate(csv.reader(io.StringIO(stripped))):
        if not row or row[0].startswith("#"):
            continue
        if i == 0 and not row[1].strip().lstrip("-").isdigit():
            continue  # header
        ts = int(row[3]) if len(row) > 3 and row[3].strip() else None
        out.append(EndOffset(row[0].strip(), int(row[1]), int(row[2]), ts))
    return out
