"""Which old segments a ``delete``-policy log gives up: by age (``retention.ms``), by total
size (``retention.bytes``) and below the log start offset (DeleteRecords). Kafka's rules: only a
prefix of the log goes, judged by each segment's largest record timestamp."""

from __future__ import annotations

from storage.partition_log import PartitionLog
from storage.segment import Segment


def _expired_by_time(segments: list[Segment], retention_ms: int, now_ms: int) -> int:
    if retention_ms < 0:
        return 0
    count = 0
    for seg in segments:
        if seg.size == 0 or now_ms - seg.max_timestamp <= retention_ms:
            break
        count += 1
    return count


def _expired_by_size(segments: list[Segment], retention_bytes: int) -> int:
    if retention_bytes < 0:
        return 0
    excess = sum(s.size for s in segments) - retention_bytes
    count = 0
    for seg in segments:
        if excess - seg.size < 0:
            break
        excess -= seg.size
        count += 1
    return count


def _below_log_start(segments: list[Segment], log_start: int) -> int:
    count = 0
    for nxt in segments[1:]:
        if nxt.base_offset > log_start:
            break
        count += 1
    return count


def segments_to_delete(log: PartitionLog, now_ms: int, segments: list[Segment] | None = None) -> int:
    """How many of the oldest segments (of ``segments``, the log's as seen now) retention removes now."""
    segments = log.segments() if segments is None else segments
    count = _below_log_start(segments, log.log_start_offset)
    if log.config.delete:
        count = max(
            count,
            _expired_by_time(segments, log.config.retention_ms, now_ms),
            _expired_by_size(segments, log.config.retention_bytes),
        )
    return count


def apply_retention(log: PartitionLog, now_ms: int | None = None) -> list[int]:
    """Delete what retention allows; returns the base offsets of the removed segments."""
    now = log.clock() if now_ms is None else now_ms
    segments = log.segments()
    count = segments_to_delete(log, now, segments)
    return log.delete_oldest_segments(count, segments[0].base_offset) if count else []
