"""ListOffsets: earliest (-2), latest (-1), the record with the largest timestamp (-3, v7+), and
the first record at or after a timestamp (through the time index). Earliest-local (-4) is the
earliest, since no segment is tiered; the tiered-storage specials (-5, -6) find nothing.

v0 keeps its old meaning (Kafka before 4.0): up to ``max_num_offsets`` offsets, newest first, taken
from the segments' base offsets and the log end, for a timestamp compared with the time each
segment file was last written; nothing above the high watermark is shown to a consumer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import trio

from broker.network.router import Request
from broker.topics.catalog import TopicCatalog
from broker.topics.partitions import TopicLogs
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.record_batch import decode_records
from storage.errors import StorageError
from storage.layout import LOG
from storage.partition_log import PartitionLog

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
TIERED_ONLY = (-5, -6)


def epoch_of(log: PartitionLog, offset: int, latest: bool) -> int:
    """The leader epoch given with an offset, as Kafka's log gives it: the latest epoch for the log
    end, else the epoch the offset was written in (the latest starting at or before it); the epoch
    the log is written at while it has none. Clients check a position with this epoch after a
    leader change (OffsetForLeaderEpoch): on a single broker it is 0, in a cluster the owner's."""
    entries = log.epochs.entries
    if not entries:
        return log.leader_epoch
    if latest:
        return entries[-1][0]
    found = [e for e, start in entries if start <= offset]
    return found[-1] if found else entries[0][0]


def max_timestamp_offset(log: PartitionLog, high_watermark: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record holding the largest timestamp below the high
    watermark, or None for an empty log."""
    segments = [s for s in log.segments() if s.size and s.base_offset < high_watermark]
    if not segments:
        return None
    # Only the first segment holding the largest timestamp needs reading.
    seg = max(segments, key=lambda s: (s.max_timestamp, -s.base_offset))
    best_ts = -1
    best_batch = None
    for batch in log.batches(seg.base_offset):
        if batch.base_offset >= min(high_watermark, seg.next_offset):
            break
        if batch.max_timestamp > best_ts:
            best_ts = batch.max_timestamp
            best_batch = batch
    if best_batch is None:
        return None
    if best_batch.log_append_time:
        return best_batch.base_offset, best_ts
    for r in decode_records(best_batch):
        if best_batch.base_timestamp + r.timestamp_delta == best_ts:
            return best_batch.base_offset + r.offset_delta, best_ts
    return best_batch.last_offset, best_ts


def offsets_before(segments: Sequence[tuple[int, int]], log_start: int, end_offset: int, last_has_size: bool,
                   now_ms: int, timestamp: int, max_num: int) -> list[int]:
    """ListOffsets v0 over ``segments`` as (base offset, last modified ms), oldest first: the
    starting points of the segments written at or before ``timestamp`` (and the log end, "written"
    now, when the newest segment holds data), newest first, at most ``max_num`` of them. Latest
    starts from the newest point, earliest from the oldest only."""
    points = [(max(base, log_start), mtime) for base, mtime in segments]
    if last_has_size or not points:
        points.append((end_offset, now_ms))
    if timestamp == LATEST:
        start = len(points) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num, start + 1))
    return sorted((points[start - i][0] for i in range(count)), reverse=True)


def _modified_ms(path: os.PathLike[str], fallback: int) -> int:
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return fallback


def legacy_offsets(log: PartitionLog, high_watermark: int, timestamp: int, max_num: int) -> list[int]:
    """ListOffsets v0 for a consumer: ``offsets_before`` with the high watermark for anything above it."""
    segments = log.segments()
    found = offsets_before([(s.base_offset, _modified_ms(s.path(LOG), s.created_ms)) for s in segments],
                           log.log_start_offset, log.end_offset, bool(segments and segments[-1].size),
                           int(time.time() * 1000), timestamp, max_num)
    if any(o > high_watermark for o in found):
        return [high_watermark, *(o for o in found if o <= high_watermark)]
    return found


class ListOffsetsApi:
    """ListOffsets, over the topic logs."""

    def __init__(self, topic_logs: TopicLogs, catalog: TopicCatalog) -> None:
        self.topic_logs = topic_logs
        self.catalog = catalog

    def locate(self, name: str, partition: int, committed: bool) -> tuple[PartitionLog, int] | int:
        """The log and the end of what the caller may see: the high watermark, or for
        read_committed (ListOffsets v2+) the last stable offset; or the partition's error code."""
        topic = self.catalog.get(name)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        part = self.topic_logs.readable(topic, partition)
        if isinstance(part, int):
            # Another node leads it (cluster mode); a loading shard's log is as good as missing.
            return part if part == ErrorCode.NOT_LEADER_OR_FOLLOWER else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        state = self.topic_logs.states.get((name, partition)) if committed else None
        end = state.last_stable_offset if state is not None else part.high_watermark
        return part.log, end

    def lookup(self, log: PartitionLog, hw: int, ts: int, version: int) -> tuple[int, int]:
        """(offset, timestamp) for one query; -1s when nothing matches."""
        if ts == LATEST:
            return hw, -1
        if ts in (EARLIEST, EARLIEST_LOCAL):
            return log.log_start_offset, -1
        if ts in TIERED_ONLY:
            return -1, -1
        if ts == MAX_TIMESTAMP:
            found = max_timestamp_offset(log, hw) if version >= 7 else None
        else:
            found = log.offset_for_timestamp(ts)
            if found is not None and found[0] >= hw:
                found = None
        return found if found is not None else (-1, -1)

    def list_offsets(self, req: Request[ListOffsetsRequest]) -> None:
        states = self.topic_logs.states
        moving = [state.start_moving for t in req.body.topics for p in t.partitions
                  if (state := states.get((t.name, p.partition_index))) is not None and state.start_moving is not None]
        if moving:
            self.topic_logs.spawn(self._after_moves, req, moving)
            return
        self._answer(req)

    async def _after_moves(self, req: Request[ListOffsetsRequest], moving: list[trio.Event]) -> None:
        for event in moving:
            await event.wait()
        self._answer(req)

    def _answer(self, req: Request[ListOffsetsRequest]) -> None:
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                out: Any = ListOffsetsResponse.Topic.Partition(partition_index=p.partition_index, error_code=0,
                                                               timestamp=-1, offset=-1, leader_epoch=-1,
                                                               old_style_offsets=[])
                parts.append(out)
                where = self.locate(t.name, p.partition_index, req.version >= 2 and req.body.isolation_level == 1)
                if isinstance(where, int):
                    out.error_code = where
                    continue
                if req.version == 0:
                    try:
                        out.old_style_offsets = legacy_offsets(*where, p.timestamp, p.max_num_offsets)
                    except StorageError:
                        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                try:
                    out.offset, out.timestamp = self.lookup(*where, p.timestamp, req.version)
                except StorageError:
                    out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if out.offset >= 0:
                    out.leader_epoch = epoch_of(where[0], out.offset, p.timestamp == LATEST)
            topics.append(ListOffsetsResponse.Topic(name=t.name, partitions=parts))
        req.reply.set(ListOffsetsResponse(throttle_time_ms=0, topics=topics))
