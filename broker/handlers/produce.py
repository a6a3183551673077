"""Produce: validate each partition's record batch, check idempotent sequences, append, and answer
once the writes are durable (``log.flush.policy``).

Versions 0-2 are advertised (librdkafka only sends compressed batches when ApiVersions lists
Produce from v0) but, as in Kafka 4, they close the connection. ``acks`` 0, 1 and -1: with one
replica 1 and -1 mean the same; acks=0 gets no response, and a connection whose acks=0 produce
failed is closed (Kafka's way of telling such a producer).

Transactions are not supported: a request with a transactional id, or a transactional batch,
gets INVALID_TXN_STATE (non-retriable) for its partitions.
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Any

from crc32c import crc32c

from broker.producer_state import last_sequence
from broker.router import CloseConnection, Request
from broker.topic_logs import PartitionState, TopicLogs
from broker.topics import Topic
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.produce import ProduceRequest, ProduceResponse
from protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    CorruptBatchError,
    RecordBatch,
    decode_records,
    iter_batches,
)
from protocol.record_compression import CompressionUnavailableError
from storage.errors import StorageError

if TYPE_CHECKING:
    from broker.server import Broker

PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_MAX_TIMESTAMP_OFFSET = 35
_CORRUPT_KINDS = {"crc", "length", "compression"}


class Rejected(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def inspect_batch(raw: bytes | None, max_message_bytes: int) -> RecordBatch:
    """The single, whole, CRC-valid magic-2 batch a v3+ produce carries per partition, with the
    checks Kafka's LogValidator makes on a client's batch header; raises ``Rejected``."""
    if not raw:
        raise Rejected(ErrorCode.INVALID_RECORD, "Produce requests must have exactly one record batch per partition")
    batches = []
    try:
        for batch in iter_batches(raw, verify_crc=False):
            batches.append(batch)
            if len(batches) > 1:
                raise Rejected(ErrorCode.INVALID_RECORD,
                               "Produce requests must have exactly one record batch per partition")
            if batch.size > max_message_bytes:
                raise Rejected(ErrorCode.MESSAGE_TOO_LARGE,
                               f"The record batch is {batch.size} bytes, larger than max.message.bytes "
                               f"({max_message_bytes})")
            if not batch.crc_ok():
                raise CorruptBatchError("CRC-32C mismatch", batch.position, "crc")
    except CorruptBatchError as exc:
        code = ErrorCode.CORRUPT_MESSAGE if exc.kind in _CORRUPT_KINDS else ErrorCode.INVALID_RECORD
        raise Rejected(code, f"invalid record batch: {exc.reason}") from None
    batch = batches[0]
    count = batch.records_count
    if count <= 0 or count != batch.last_offset_delta + 1:
        raise Rejected(ErrorCode.INVALID_RECORD,
                       f"record count {count} does not match last offset delta {batch.last_offset_delta}")
    if batch.is_control:
        raise Rejected(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if batch.is_transactional:
        raise Rejected(ErrorCode.INVALID_TXN_STATE, "transactions are not supported by this broker")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise Rejected(ErrorCode.INVALID_RECORD, f"Invalid sequence number {batch.base_sequence}")
    return batch


def stamp_log_append_time(raw: bytes, now_ms: int) -> bytes:
    """message.timestamp.type=LogAppendTime: mark the batch and set its max timestamp to now
    (Kafka changes only the header for v2 batches), then fix the CRC."""
    out = bytearray(raw)
    (attributes,) = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    struct.pack_into(">q", out, _MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _check_keys(batch: RecordBatch) -> None:
    try:
        records = decode_records(batch)
    except CorruptBatchError as exc:
        raise Rejected(ErrorCode.INVALID_RECORD, f"invalid record batch: {exc.reason}") from None
    if any(r.key is None for r in records):
        raise Rejected(ErrorCode.INVALID_RECORD, "Compacted topic cannot accept message without key")


def append(topic_logs: TopicLogs, state: PartitionState, raw: bytes, resp: Any) -> int | None:
    """Validates and appends one partition's batch, filling ``resp``. Returns the last offset the
    answer depends on (to wait for its durability), or None when there is nothing to wait for."""
    batch = inspect_batch(raw, state.max_message_bytes)
    log = state.log
    if log.config.compact:
        _check_keys(batch)
    pid = batch.producer_id
    first_seq = batch.base_sequence
    last_seq = last_sequence(first_seq, batch.last_offset_delta)
    if pid >= 0:
        check = state.producers.check(pid, batch.producer_epoch, first_seq, last_seq)
        if check.error_code:
            raise Rejected(check.error_code, check.message or "")
        if check.duplicate is not None:
            resp.base_offset = check.duplicate.first_offset
            resp.log_start_offset = log.log_start_offset
            return check.duplicate.last_offset
    now = int(time.time() * 1000)
    if state.log_append_time:
        raw = stamp_log_append_time(raw, now)
        resp.log_append_time_ms = now
    try:
        first, last = log.append_batch(raw)
    except CorruptBatchError as exc:
        code = ErrorCode.CORRUPT_MESSAGE if exc.kind in _CORRUPT_KINDS else ErrorCode.INVALID_RECORD
        raise Rejected(code, f"invalid record batch: {exc.reason}") from None
    except CompressionUnavailableError as exc:
        raise Rejected(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, exc.reason) from None
    except DecodeError as exc:
        raise Rejected(ErrorCode.INVALID_RECORD, f"invalid record batch: {exc.reason}") from None
    except StorageError:
        raise Rejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the partition was deleted") from None
    except OSError as exc:
        raise Rejected(ErrorCode.KAFKA_STORAGE_ERROR, f"cannot write the log: {exc.strerror}") from None
    if pid >= 0:
        state.producers.record(pid, batch.producer_epoch, first_seq, last_seq, first, last, batch.max_timestamp)
    topic_logs.appended(state)
    resp.base_offset = first
    resp.log_start_offset = log.log_start_offset
    return last


def register(broker: Broker) -> None:
    topic_logs = broker.topic_logs
    catalog = broker.catalog

    def resolve(req: Request, td: Any) -> tuple[Topic | None, int, str]:
        if req.version >= 13:
            topic = catalog.by_id.get(td.topic_id)
            if topic is None:
                return None, ErrorCode.UNKNOWN_TOPIC_ID, "unknown topic id"
        else:
            topic = catalog.get(td.name)
            if topic is None:
                return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        if topic.internal:
            return None, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic.name}"
        return topic, 0, ""

    def produce(req: Request) -> None:
        if req.version < 3:
            raise CloseConnection(f"Produce v{req.version} is no longer supported (v3 and later are)")
        body = req.body
        acks = body.acks
        transactional = body.transactional_id is not None
        waits: list[tuple[Any, PartitionState, int]] = []
        failed = False
        topics = []
        for td in body.topic_data:
            topic, topic_error, topic_message = resolve(req, td)
            parts = []
            for pd in td.partition_data:
                resp = PartitionResponse(index=pd.index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                                         log_start_offset=-1, record_errors=[], error_message=None)
                parts.append(resp)
                try:
                    if acks not in (0, 1, -1):
                        raise Rejected(ErrorCode.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, not {acks}")
                    if topic is None:
                        raise Rejected(topic_error, topic_message)
                    if transactional:
                        raise Rejected(ErrorCode.INVALID_TXN_STATE, "transactions are not supported by this broker")
                    state = topic_logs.get(topic.name, pd.index)
                    if state is None:
                        raise Rejected(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                       "This server does not host this topic-partition.")
                    last = append(topic_logs, state, pd.records, resp)
                    if last is not None and last >= state.high_watermark:
                        waits.append((resp, state, last))
                except Rejected as exc:
                    failed = True
                    resp.error_code = exc.error_code
                    resp.error_message = str(exc)
            topics.append(ProduceResponse.TopicProduceResponse(name=td.name, topic_id=td.topic_id,
                                                              partition_responses=parts))
        if acks == 0:
            if failed:
                req.reply.set_close()
            else:
                req.reply.set_nothing()
            return
        response = ProduceResponse(responses=topics, throttle_time_ms=0)

        def answer() -> None:
            for resp, state, last in waits:
                if state.deleted:
                    resp.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    resp.error_message = "the partition was deleted"
                elif state.high_watermark <= last:
                    resp.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                    resp.error_message = "the write could not be made durable"
            req.reply.set(response)

        if waits:
            topic_logs.when_durable(answer)
        else:
            answer()

    broker.router.register(ProduceRequest, ProduceResponse, produce, versions=(0, ProduceRequest.valid.high))
