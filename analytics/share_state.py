"""The share coordinator's log (``__share_group_state``) decoded into rows, and the rows of one
share partition folded into its progress over time.

Every record names a share partition (group, topic id, partition). A ShareSnapshot holds its
whole durable state: state epoch, leader epoch, start offset and the state batches above it
(first and last offset, delivery state 0 available / 2 acknowledged / 4 archived, delivery
count). A ShareUpdate holds only the batches a write changed. ``fold`` rebuilds the state record
by record as the share coordinator does at load (with the same
``protocol.share_state_batches.combine``): a snapshot replaces the state; an update applies on
top of the state so far, its batches overlaying the older ones offset by offset, the start offset
never moving back and nothing below it kept; an update with no state before it (its key was
deleted) is ignored; a tombstone deletes the state.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from analytics.segments import SegmentHealth, iter_batches
from protocol.errors import DecodeError
from protocol.payloads import share_state_records
from protocol.record_batch import decode_records
from protocol.share_state_batches import StateBatch, combine
from storage.checkpoints import topic_id_to_str

SHARE_STATE = "share_state"
SNAPSHOT = "ShareSnapshot"
UPDATE = "ShareUpdate"
AVAILABLE = 0
ACKNOWLEDGED = 2
ARCHIVED = 4


@dataclass
class ShareStateRow:
    """One ``__share_group_state`` record; ``state_epoch``, ``create_timestamp`` and
    ``write_timestamp`` are a snapshot's only. A batch is ``{"first_offset", "last_offset",
    "delivery_state", "delivery_count"}``."""

    log_offset: int
    timestamp: int
    group: str
    topic_id: str
    partition: int
    record_type: str  # SNAPSHOT or UPDATE
    tombstone: bool
    snapshot_epoch: int | None = None
    state_epoch: int | None = None
    leader_epoch: int | None = None
    start_offset: int | None = None
    delivery_complete_count: int | None = None
    create_timestamp: int | None = None
    write_timestamp: int | None = None
    state_batches: list[dict[str, int]] | None = None


@dataclass
class ShareStateChunk:
    rows: list[ShareStateRow] = field(default_factory=list)
    skipped: int = 0  # record types this reader does not know
    undecodable: int = 0


def _row(offset: int, ts: int, key: bytes, value: bytes | None) -> ShareStateRow | None:
    rec = share_state_records.decode(key, value)
    if rec is None:
        return None
    kind = SNAPSHOT if rec.record_type == share_state_records.SNAPSHOT else UPDATE
    row = ShareStateRow(offset, ts, rec.group, topic_id_to_str(rec.topic_id), rec.partition, kind, rec.value is None)
    v = rec.value
    if v is None:
        return row
    row.snapshot_epoch, row.leader_epoch, row.start_offset = v.snapshot_epoch, v.leader_epoch, v.start_offset
    row.delivery_complete_count = v.delivery_complete_count
    if kind == SNAPSHOT:
        row.state_epoch, row.create_timestamp, row.write_timestamp = (
            v.state_epoch, v.create_timestamp, v.write_timestamp)
    row.state_batches = [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                          "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
                         for b in v.state_batches]
    return row


def decode_share_state_segment(data: bytes, health: SegmentHealth | None = None, chunk_rows: int = 65536,
                               verify_crc: bool = True) -> Iterator[ShareStateChunk]:
    """One segment's records in chunks of about ``chunk_rows``; a record that does not decode is
    counted (and reported in ``health``), not fatal."""
    health = health if health is not None else SegmentHealth()
    out = ShareStateChunk()
    undecodable = 0
    for batch in iter_batches(data, health, verify_crc):
        if batch.is_control:
            continue
        try:
            records = decode_records(batch)
        except (ValueError, DecodeError, OSError) as exc:
            health.problems.append(f"batch at offset {batch.base_offset} (position {batch.position}): {exc}")
            continue
        for r in records:
            if r.key is None:
                out.undecodable += 1
                continue
            try:
                row = _row(batch.base_offset + r.offset_delta, batch.base_timestamp + r.timestamp_delta, r.key,
                           r.value)
            except (DecodeError, struct.error, IndexError, UnicodeDecodeError, ValueError):
                out.undecodable += 1
                continue
            if row is None:
                out.skipped += 1
            else:
                out.rows.append(row)
        if len(out.rows) >= chunk_rows:
            undecodable += out.undecodable
            yield out
            out = ShareStateChunk()
    undecodable += out.undecodable
    if undecodable:
        health.problems.append(f"{undecodable} records could not be decoded and were skipped")
    yield out


# ---- folding one share partition's records ------------------------------------------------------


class Ranges:
    """A set of offsets as sorted, disjoint, non-adjacent inclusive ranges."""

    def __init__(self) -> None:
        self.firsts: list[int] = []
        self.lasts: list[int] = []

    def add(self, first: int, last: int) -> None:
        i = bisect.bisect_left(self.lasts, first - 1)  # the first range that ends at or after first - 1
        j = i
        while j < len(self.firsts) and self.firsts[j] <= last + 1:
            first, last = min(first, self.firsts[j]), max(last, self.lasts[j])
            j += 1
        self.firsts[i:j] = [first]
        self.lasts[i:j] = [last]

    def __len__(self) -> int:
        return sum(b - a + 1 for a, b in zip(self.firsts, self.lasts, strict=True))


@dataclass
class _State:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


def _batches(rec: dict[str, Any]) -> list[StateBatch]:
    return [StateBatch(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in rec.get("state_batches") or []]


def _apply(state: _State | None, rec: dict[str, Any]) -> _State | None:
    """The state after one record, as the share coordinator replays it."""
    if rec["tombstone"]:
        return None
    if rec["record_type"] == SNAPSHOT:
        start = rec["start_offset"]
        return _State(rec["state_epoch"], rec["leader_epoch"], start, combine((), _batches(rec), start))
    if state is None:
        return None  # an update of a key deleted before it
    start = max(state.start_offset, rec["start_offset"])
    leader = rec["leader_epoch"] if rec["leader_epoch"] >= 0 else state.leader_epoch
    return _State(state.state_epoch, leader, start, combine(state.batches, _batches(rec), start))


# Columns of one ``fold`` row, in order (the Spark table's struct, analytics.tables.SHARE_PROGRESS).
PROGRESS_FIELDS = ("bucket_ms_start", "records", "snapshots", "updates", "deleted", "state_epoch", "leader_epoch",
                   "start_offset", "effective_start_offset", "start_offset_advance", "end_offset", "in_flight_records",
                   "acknowledged_records", "available_records", "archived_records", "redelivered_total",
                   "archived_total", "max_delivery_count", "last_write_ms")


def effective_start(start: int, batches: Sequence[StateBatch]) -> int:
    """The start offset moved past the acknowledged and archived batches right above it: where
    the share partition will move it (Kafka writes an acknowledgement at the start offset as a
    batch and moves the start offset on a later write; kcoord moves it at once)."""
    for b in batches:  # sorted, and none below ``start``
        if b.first > start or b.state not in (ACKNOWLEDGED, ARCHIVED):
            break
        start = b.last + 1
    return start


def fold(records: Sequence[dict[str, Any]], bucket_ms: int) -> list[tuple[Any, ...]]:
    """One share partition's records, in log order, as one row per time bucket with a record
    (``PROGRESS_FIELDS``): the state after the bucket's last record, and counts since the start.

    Of the state: the start offset as written and the effective one (``effective_start``;
    everything below it is acknowledged or archived), how far the effective one moved since the
    previous bucket (from the first start offset written, for the first bucket), the end of the
    last state batch, and the records between the start offset and that end by delivery state; ``in_flight_records`` are those not yet acknowledged or archived
    (available again, or held by a consumer). Since the first record: ``redelivered_total``
    distinct records shown redelivered, ``archived_total`` distinct records shown archived, and
    the highest delivery count shown. A deleted state has nulls.

    A record is redelivered when a batch shows it delivered more than once, or delivered and
    available again (released, or its lock expired): the share partition writes a record's state
    when it changes, so one accepted on its second delivery goes straight below the start offset
    and its delivery count of 2 is never written; its release before was.
    """
    out: list[tuple[Any, ...]] = []
    state: _State | None = None
    redelivered, archived = Ranges(), Ranges()
    max_count = 0
    prev_start: int | None = None
    i = 0
    while i < len(records):
        bucket = records[i]["at_ms"] // bucket_ms * bucket_ms
        snapshots = updates = 0
        first_start: int | None = None
        j = i
        while j < len(records) and records[j]["at_ms"] // bucket_ms * bucket_ms == bucket:
            rec = records[j]
            state = _apply(state, rec)
            if not rec["tombstone"]:
                snapshots += rec["record_type"] == SNAPSHOT
                updates += rec["record_type"] == UPDATE
            for b in _batches(rec):
                if b.deliveries > 1 or (b.state == AVAILABLE and b.deliveries > 0):
                    redelivered.add(b.first, b.last)
                if b.state == ARCHIVED:
                    archived.add(b.first, b.last)
                max_count = max(max_count, b.deliveries)
            if first_start is None and state is not None and state.start_offset >= 0:
                first_start = state.start_offset  # -1: not initialized yet (Kafka's first snapshot)
            j += 1
        last_ms = records[j - 1]["at_ms"]
        if state is None:
            out.append((bucket, j - i, snapshots, updates, True, None, None, None, None, None, None, None, None,
                        None, None, len(redelivered), len(archived), max_count, last_ms))
            prev_start = None
        else:
            start = state.start_offset
            effective = effective_start(start, state.batches)
            end = max((b.last + 1 for b in state.batches), default=start)
            by_state = {ACKNOWLEDGED: 0, ARCHIVED: 0, AVAILABLE: 0}
            for b in state.batches:
                by_state[b.state] = by_state.get(b.state, 0) + b.last - b.first + 1
            base = prev_start if prev_start is not None else first_start
            advance = effective - base if base is not None and effective >= 0 else None
            out.append((bucket, j - i, snapshots, updates, False, state.state_epoch, state.leader_epoch, start,
                        effective, advance, end, max(0, end - start - by_state[ACKNOWLEDGED] - by_state[ARCHIVED]),
                        by_state[ACKNOWLEDGED], by_state[AVAILABLE], by_state[ARCHIVED], len(redelivered),
                        len(archived), max_count, last_ms))
            prev_start = effective if effective >= 0 else None
        i = j
    return out
