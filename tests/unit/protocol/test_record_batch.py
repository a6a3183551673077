"""Record batch v2 against kafka-python's independent implementation, in both directions."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol import record_batch_reference as reference
from protocol.record_batch import (
    HEADER_SIZE,
    ControlType,
    CorruptBatchError,
    Record,
    build_batch,
    build_end_txn_marker,
    build_simple_batch,
    control_type_of,
    decode_records,
    encode_records,
    iter_batches,
    parse_end_txn_marker,
    read_batch,
    rewrite_header,
)
from protocol.record_compression import GZIP, LZ4, NONE, SNAPPY, ZSTD

ENTRIES: list[tuple[bytes | None, bytes | None, int]] = [
    (b"group-a", b"value-1" * 30, 1_700_000_000_000),
    (None, b"no key", 1_700_000_000_005),
    (b"tombstone", None, 1_699_999_999_990),  # timestamps need not increase
    (b"k" * 300, b"v" * 5000, 1_700_000_000_100),  # multi-byte varints
]


def kafka_python_batch(compression: int = NONE, producer: tuple[int, int, int] | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
    )
    if producer:
        builder.set_producer_state(*producer, is_transactional=False)
    for i, (key, value, ts) in enumerate(ENTRIES):
        headers = [("h1", b"x"), ("h2", None)] if i == 0 else []
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("compression", [NONE, GZIP])
def test_reads_kafka_python_batches(compression: int) -> None:
    raw = kafka_python_batch(compression, producer=(4242, 3, 17))
    (batch,) = iter_batches(raw)
    assert batch.crc_ok()
    assert batch.compression == compression
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 3, 17)
    assert batch.records_count == len(ENTRIES)
    assert batch.last_offset_delta == len(ENTRIES) - 1
    assert batch.max_timestamp == max(ts for _, _, ts in ENTRIES)
    records = decode_records(batch)
    got = [(r.key, r.value, batch.base_timestamp + r.timestamp_delta) for r in records]
    assert got == ENTRIES
    assert [r.offset_delta for r in records] == [0, 1, 2, 3]
    assert records[0].headers == [("h1", b"x"), ("h2", None)]
    assert reference.parse(raw)[1] == records


@pytest.mark.parametrize("compression", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_kafka_python_reads_our_batches(compression: int) -> None:
    raw = build_simple_batch(ENTRIES, 1000, compression=compression, partition_leader_epoch=5)
    theirs = DefaultRecordBatch(bytearray(raw))
    assert theirs.validate_crc()
    assert theirs.base_offset == 1000
    assert theirs.leader_epoch == 5
    assert theirs.compression_type == compression
    if compression in (SNAPPY, LZ4, ZSTD):
        return  # kafka-python here has no library for these; the CRC and header still agree
    got = [(r.offset, r.key, r.value, r.timestamp) for r in theirs]
    assert got == [(1000 + i, k, v, ts) for i, (k, v, ts) in enumerate(ENTRIES)]


def test_identical_bytes_to_kafka_python_for_the_same_records() -> None:
    ours = build_batch(
        [Record(i, ts - ENTRIES[0][2], k, v, [("h1", b"x"), ("h2", None)] if i == 0 else [])
         for i, (k, v, ts) in enumerate(ENTRIES)],
        0, base_timestamp=ENTRIES[0][2], partition_leader_epoch=0,
    )
    assert ours == kafka_python_batch()


@pytest.mark.parametrize("compression", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_fast_path_and_construct_declaration_agree(compression: int) -> None:
    raw = build_simple_batch(ENTRIES, 77, compression=compression, producer_id=9, producer_epoch=1,
                             base_sequence=0)
    header, records = reference.parse(raw)
    batch = read_batch(raw)
    assert {k: getattr(batch, k) for k in header} == header
    assert decode_records(batch) == records
    assert reference.build(header, records) == raw


def test_snappy_reads_raw_and_xerial_framing() -> None:
    records, _ = encode_records([Record(0, 0, b"k", b"v" * 100, [])])
    raw_block = bytes(cramjam.snappy.compress_raw(records))
    for blob in (raw_block, b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(raw_block)) + raw_block):
        body = struct.pack(">hiqqqhii", SNAPPY, 0, 5, 5, -1, -1, -1, 1) + blob
        raw = bytearray(struct.pack(">qiibI", 0, len(body) + 9, 0, 2, 0)) + body
        struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
        assert decode_records(read_batch(bytes(raw))) == [Record(0, 0, b"k", b"v" * 100, [])]


def test_control_batch_is_recognized() -> None:
    raw = build_end_txn_marker(
        40, producer_id=7, producer_epoch=2, commit=True, coordinator_epoch=11, timestamp=123,
    )
    batch = read_batch(raw)
    assert batch.is_control and batch.is_transactional
    (record,) = decode_records(batch)
    assert control_type_of(record) == ControlType.COMMIT
    assert parse_end_txn_marker(record) == (ControlType.COMMIT, 11)
    theirs = DefaultRecordBatch(bytearray(raw))
    assert theirs.is_control_batch
    (control,) = list(theirs)
    assert control.commit and not control.abort


def test_rewrite_header_renumbers_without_breaking_crc() -> None:
    raw = build_simple_batch(ENTRIES[:2], 0) + build_simple_batch(ENTRIES[2:], 0)
    out = rewrite_header(raw, 500, partition_leader_epoch=9)
    batches = list(iter_batches(bytes(out)))
    assert [b.base_offset for b in batches] == [500, 502]
    assert all(b.partition_leader_epoch == 9 and b.crc_ok() for b in batches)


def test_delete_horizon_and_empty_batch() -> None:
    raw = build_batch([], 10, base_timestamp=5000, last_offset_delta=4, delete_horizon=True)
    batch = read_batch(raw)
    assert batch.delete_horizon_ms == 5000
    assert batch.records_count == 0 and batch.last_offset == 14 and batch.max_timestamp == -1
    assert decode_records(batch) == []
    assert len(raw) == HEADER_SIZE


def test_flipped_byte_fails_the_crc() -> None:
    raw = bytearray(build_simple_batch(ENTRIES, 0))
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError) as info:
        read_batch(bytes(raw))
    assert info.value.kind == "crc"
    assert read_batch(bytes(raw), verify_crc=False).records_count == len(ENTRIES)
