"""ListOffsets: earliest (-2), latest (-1), the record with the largest timestamp (-3, v7+), and
the first record at or after a timestamp (through the time index). Earliest-local (-4) is the
earliest, since no segment is tiered; the tiered-storage specials (-5, -6) find nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.network.router import Request
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from protocol.record_batch import decode_records
from storage.errors import StorageError
from storage.partition_log import PartitionLog

if TYPE_CHECKING:
    from broker.server import Broker

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
TIERED_ONLY = (-5, -6)
LEADER_EPOCH = 0  # the epoch every batch is stamped with and Metadata reports


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


def register(broker: Broker) -> None:
    topic_logs = broker.topic_logs
    catalog = broker.catalog

    def locate(name: str, partition: int) -> tuple[PartitionLog, int] | None:
        topic = catalog.get(name)
        if topic is None:
            return None
        part = topic_logs.readable(topic, partition)
        return None if isinstance(part, int) else (part.log, part.high_watermark)

    def lookup(log: PartitionLog, hw: int, ts: int, version: int) -> tuple[int, int]:
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

    def list_offsets(req: Request) -> None:
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                out: Any = ListOffsetsResponse.Topic.Partition(partition_index=p.partition_index, error_code=0,
                                                               timestamp=-1, offset=-1, leader_epoch=-1)
                parts.append(out)
                where = locate(t.name, p.partition_index)
                if where is None:
                    out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                try:
                    out.offset, out.timestamp = lookup(*where, p.timestamp, req.version)
                except StorageError:
                    out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                if out.offset >= 0:
                    out.leader_epoch = LEADER_EPOCH
            topics.append(ListOffsetsResponse.Topic(name=t.name, partitions=parts))
        req.reply.set(ListOffsetsResponse(throttle_time_ms=0, topics=topics))

    broker.router.register(ListOffsetsRequest, ListOffsetsResponse, list_offsets)
