"""The rebalance journal beside ``__consumer_offsets``: its events, the ``rebalances`` and
``doctor`` tables built from them, and the report's per-group timeline of stalls.

The journal (``__kcoord_group_events-<p>`` in the data dir: one partition from a single broker,
one per ``__consumer_offsets`` partition from a cluster) holds a few records per rebalance, so
the driver reads every partition of it whole (local paths or any URI pyarrow opens, like the segments) and Spark gets
the rows; the doctor's rules are the broker's own (``doctor``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from analytics.segments import (
    SegmentHealth,
    _is_local,
    _local,
    _remote,
    _walk,
    iter_batches,
    log_segment_base,
    open_bytes,
)
from doctor import diagnose
from protocol.group_events import EVENTS_TOPIC, decode_event
from protocol.record_batch import decode_records
from storage.layout import parse_partition_dir

REBALANCE_COLUMNS = [
    ("group", "string"), ("group_type", "string"), ("generation", "long"), ("cause", "string"),
    ("trigger", "string"), ("client_reason", "string"), ("cause_member", "string"), ("started_ms", "long"),
    ("ended_ms", "long"), ("outcome", "string"), ("stall_ms", "long"), ("join_phase_ms", "long"),
    ("sync_phase_ms", "long"), ("max_no_partitions_ms", "long"), ("members_before", "long"),
    ("members_after", "long"), ("moved_count", "long"), ("protocol", "string"), ("waited_for", "string"),
    ("moved", "string"),
]
DOCTOR_COLUMNS = [
    ("group", "string"), ("rule", "string"), ("count", "long"), ("evidence", "string"),
    ("recommendation", "string"), ("first_ms", "long"), ("last_ms", "long"), ("members", "string"),
]


def journal_dirs(data_dir: str) -> list[str]:
    """The journal's partition directories directly under ``data_dir`` (``<topic>-<n>``), in
    partition order; none when it has no journal."""
    base = data_dir.rstrip("/")
    if _is_local(base):
        local = _local(base)
        names = os.listdir(local) if os.path.isdir(local) else []
        found = [(n, f"{base}/{n}") for n in names if os.path.isdir(os.path.join(local, n))]
    else:
        from pyarrow import fs

        filesystem, inner, prefix = _remote(base)
        try:
            infos = filesystem.get_file_info(fs.FileSelector(inner, allow_not_found=True))
        except (ValueError, OSError):
            return []
        found = [(i.base_name, prefix + i.path) for i in infos if i.type == fs.FileType.Directory]
    chosen = [(parsed[1], path) for name, path in found
              if (parsed := parse_partition_dir(name)) is not None and parsed[0] == EVENTS_TOPIC]
    return [path for _, path in sorted(chosen)]


def read_events(data_dir: str) -> list[dict[str, Any]]:
    """Every event in the journal under ``data_dir`` (none when it has no journal), every
    partition of it, oldest first."""
    events: list[dict[str, Any]] = []
    for directory in journal_dirs(data_dir):
        walked = _walk(directory)
        if walked is None:
            continue
        for path, _size in sorted(walked[1]):
            if log_segment_base(path.rsplit("/", 1)[-1]) is None:
                continue
            for batch in iter_batches(open_bytes(path), SegmentHealth()):
                for record in decode_records(batch):
                    event = decode_event(record.value)
                    if event is not None:
                        events.append(event)
    events.sort(key=lambda e: int(e.get("timestamp", 0)))
    return events


def rebalance_rows(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for e in events:
        if e.get("kind") != "rebalance":
            continue
        cause = e.get("cause_detail") or {}
        waited = e.get("waited_for") or []
        rows.append({
            "group": e["group"], "group_type": e.get("group_type"), "generation": e.get("generation"),
            "cause": e.get("cause"), "trigger": cause.get("trigger"), "client_reason": cause.get("client_reason"),
            "cause_member": cause.get("member_id"), "started_ms": e.get("rebalance_start"),
            "ended_ms": e.get("timestamp"), "outcome": e.get("outcome"), "stall_ms": e.get("stall_ms"),
            "join_phase_ms": e.get("join_phase_ms"), "sync_phase_ms": e.get("sync_phase_ms"),
            "max_no_partitions_ms": e.get("max_no_partitions_ms"), "members_before": e.get("members_before"),
            "members_after": e.get("members_after"), "moved_count": e.get("moved_count"),
            "protocol": e.get("protocol"),
            "waited_for": ", ".join(f"{w['member_id']} (+{w['join_delay_ms']} ms)" for w in waited),
            "moved": json.dumps(e.get("moved") or []),
        })
    return rows


def doctor_rows(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for f in diagnose(events):
        doc = f.to_json()
        rows.append({"group": f.group, "rule": f.rule, "count": f.count, "evidence": f.evidence,
                     "recommendation": f.recommendation, "first_ms": doc["first"], "last_ms": doc["last"],
                     "members": ", ".join(f.members)})
    return rows


def to_frame(spark: Any, rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> Any:
    schema = ", ".join(f"`{name}` {kind}" for name, kind in columns)
    return spark.createDataFrame([tuple(r.get(name) for name, _ in columns) for r in rows], schema)
