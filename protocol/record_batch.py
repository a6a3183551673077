"""Record batch v2 (magic 2): the unit Kafka stores on disk and ships in Produce and Fetch.

The hot path is plain ``struct`` plus hand-inlined varints: ``iter_batches`` walks a buffer and
yields header tuples that point into it without copying, ``decode_records`` turns one batch
into ``Record`` tuples. ``record_batch_reference`` declares the same layout with construct and
the tests hold the two against each other. Compression codecs live in ``record_compression``.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterator, Sequence
from enum import IntEnum
from typing import NamedTuple, TypeVar

from crc32c import crc32c

from protocol.errors import DecodeError
from protocol.record import CorruptBatchError as CorruptBatchError
from protocol.record import Record as Record
from protocol.record import decode_keys as decode_key_region
from protocol.record import decode_region, encode_simple_records
from protocol.record import encode_records as encode_records
from protocol.record import zigzag as zigzag
from protocol.record_compression import compress, decompress

T = TypeVar("T")

# baseOffset batchLength partitionLeaderEpoch magic crc attributes lastOffsetDelta
# baseTimestamp maxTimestamp producerId producerEpoch baseSequence recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

Buffer = bytes | bytearray | memoryview | mmap.mmap  # anything iter_batches can walk

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1

_HEAD12 = struct.Struct(">qi")
_HEAD_PLE = struct.Struct(">i")
_I16 = struct.Struct(">hh")


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class RecordBatch(NamedTuple):
    """Header fields of one batch plus where it sits: ``buffer[position:position + size]``."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    buffer: Buffer
    position: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        return self.position + self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """Set by the log cleaner: after this time tombstones and markers in the batch may go."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def raw(self) -> memoryview:
        """The whole batch, without copying."""
        return memoryview(self.buffer)[self.position : self.end]

    def computed_crc(self) -> int:
        return crc32c(memoryview(self.buffer)[self.position + ATTRIBUTES_OFFSET : self.end])

    def crc_ok(self) -> bool:
        return self.computed_crc() == self.crc

    def records_data(self) -> bytes:
        """The records region, decompressed when the batch is compressed."""
        body = self.buffer[self.position + HEADER_SIZE : self.end]
        codec = self.attributes & COMPRESSION_MASK
        if codec == 0:
            return bytes(body)
        try:
            return decompress(codec, body)
        except CorruptBatchError as exc:
            exc.position = self.position
            raise
        except DecodeError:
            raise
        except Exception as exc:  # every codec has its own exception family
            raise CorruptBatchError(
                f"cannot decompress codec {codec}: {exc}", self.position, "compression"
            ) from exc


def iter_batches(
    buf: Buffer,
    start: int = 0,
    *,
    verify_crc: bool = True,
    allow_partial: bool = False,
) -> Iterator[RecordBatch]:
    """Walk consecutive batches from ``start``. A short tail raises ``CorruptBatchError``
    (kind "short") unless ``allow_partial``, which stops quietly, as Fetch data may end
    mid-batch."""
    unpack = HEADER.unpack_from
    make = RecordBatch._make
    n = len(buf)
    pos = start
    while pos < n:
        if n - pos < HEADER_SIZE:
            if allow_partial:
                return
            raise CorruptBatchError(f"only {n - pos} bytes left for a batch header", pos, "short")
        fields = unpack(buf, pos)
        length = fields[1]
        if length < MIN_BATCH_LENGTH:
            raise CorruptBatchError(f"batch length {length} is below the minimum", pos, "length")
        end = pos + LOG_OVERHEAD + length
        if fields[3] != MAGIC:
            raise CorruptBatchError(f"unsupported magic {fields[3]}", pos, "magic")
        if end > n:
            if allow_partial:
                return
            raise CorruptBatchError(f"batch of {length + LOG_OVERHEAD} bytes but {n - pos} left", pos, "short")
        if verify_crc and crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]) != fields[4]:
            raise CorruptBatchError("CRC-32C mismatch", pos, "crc")
        if fields[12] < 0:
            raise CorruptBatchError(f"negative record count {fields[12]}", pos, "records")
        yield make((*fields, buf, pos))
        pos = end


def read_batch(buf: Buffer, position: int = 0, *, verify_crc: bool = True) -> RecordBatch:
    """The one batch at ``position``."""
    for batch in iter_batches(buf, position, verify_crc=verify_crc):
        return batch
    raise CorruptBatchError("no batch at the end of the buffer", position, "short")


def decode_records(batch: RecordBatch) -> list[Record]:
    """All records of ``batch`` (decompressing if needed); raises ``CorruptBatchError``."""
    return _decode_with(decode_region, batch)


def decode_keys(batch: RecordBatch) -> list[tuple[int, bytes | None, bool]]:
    """``(offset delta, key, value is null)`` of every record: the cheap view compaction uses."""
    return _decode_with(decode_key_region, batch)


def _decode_with(decoder: Callable[[bytes, int], tuple[list[T], int]], batch: RecordBatch) -> list[T]:
    data = batch.records_data()
    try:
        records, pos = decoder(data, batch.records_count)
    except IndexError:
        raise CorruptBatchError("record runs past the end of the batch", batch.position) from None
    except CorruptBatchError as exc:
        exc.position = batch.position
        raise
    except UnicodeDecodeError as exc:
        raise CorruptBatchError(f"header key is not UTF-8: {exc}", batch.position) from None
    if pos != len(data):
        raise CorruptBatchError(f"{len(data) - pos} bytes after the last record", batch.position)
    return records


def build_batch(
    records: Sequence[Record],
    base_offset: int = 0,
    *,
    base_timestamp: int,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    delete_horizon: bool = False,
) -> bytes:
    """One batch from records given relative to ``base_offset``/``base_timestamp``. With
    ``delete_horizon``, ``base_timestamp`` is the horizon (the deltas must be relative to it)."""
    data, count = encode_records(records)
    if max_timestamp is None:
        max_timestamp = max((base_timestamp + r.timestamp_delta for r in records), default=NO_TIMESTAMP)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta if records else 0
    return _seal(data, count, base_offset, base_timestamp, max_timestamp, last_offset_delta, partition_leader_epoch,
                 producer_id, producer_epoch, base_sequence, compression, log_append_time, transactional, control,
                 delete_horizon)


def _seal(data: bytes, count: int, base_offset: int, base_timestamp: int, max_timestamp: int,
          last_offset_delta: int, partition_leader_epoch: int, producer_id: int, producer_epoch: int,
          base_sequence: int, compression: int, log_append_time: bool, transactional: bool, control: bool,
          delete_horizon: bool) -> bytes:
    """Header, (compressed) records region and CRC: the batch's bytes."""
    attributes = compression & COMPRESSION_MASK
    if compression:
        data = compress(compression, data)
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    if delete_horizon:
        attributes |= DELETE_HORIZON_MASK
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(data), partition_leader_epoch, MAGIC, 0,
        attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, count,
    )
    out += data
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_simple_batch(
    entries: Sequence[tuple[bytes | None, bytes | None, int]],
    base_offset: int = 0,
    *,
    partition_leader_epoch: int = -1,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    """A batch from ``(key, value, timestamp_ms)`` at consecutive offsets, without headers: what
    the coordinator and the tools write. Encoded without building ``Record`` objects, as every
    group-commit pass makes one; the same bytes as ``build_batch`` (a property test checks)."""
    if not entries:
        raise ValueError("a batch needs at least one record")
    data, max_ts = encode_simple_records(entries)
    return _seal(data, len(entries), base_offset, entries[0][2], max_ts, len(entries) - 1, partition_leader_epoch,
                 producer_id, producer_epoch, base_sequence, compression, False, transactional, control, False)


def rewrite_header(
    raw: bytes | bytearray | memoryview, base_offset: int, partition_leader_epoch: int | None = None
) -> bytearray:
    """A copy of the batch(es) in ``raw`` renumbered from ``base_offset``. Only fields outside
    the CRC change, so the CRC stays valid."""
    out = bytearray(raw)
    pos = 0
    next_offset = base_offset
    for batch in iter_batches(out, verify_crc=False):
        _HEAD12.pack_into(out, pos, next_offset, batch.batch_length)
        if partition_leader_epoch is not None:
            _HEAD_PLE.pack_into(out, pos + LOG_OVERHEAD, partition_leader_epoch)
        next_offset += batch.last_offset_delta + 1
        pos = batch.end
    return out


class EndTxnMarker(NamedTuple):
    control_type: ControlType
    coordinator_epoch: int


def control_type_of(record: Record) -> int:
    """Type field of a control record key (version int16, type int16); -1 when unreadable."""
    key = record.key
    if key is None or len(key) < 4:
        return -1
    return _I16.unpack_from(key)[1]


def parse_end_txn_marker(record: Record) -> EndTxnMarker:
    kind = control_type_of(record)
    value = record.value
    if kind not in (ControlType.ABORT, ControlType.COMMIT) or value is None or len(value) < 6:
        raise CorruptBatchError("not a transaction marker")
    return EndTxnMarker(ControlType(kind), struct.unpack_from(">i", value, 2)[0])


def build_end_txn_marker(
    base_offset: int,
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker for ``producer_id``."""
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    record = Record(0, 0, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, coordinator_epoch), [])
    return build_batch(
        [record], base_offset, base_timestamp=timestamp, partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id, producer_epoch=producer_epoch, transactional=True, control=True,
    )
