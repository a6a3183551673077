"""The old message formats (magic 0 and 1), checked against kafka-python's legacy message-set
reader and writer, an implementation independent of ours; and the conversions Fetch v0-3 and
Produce v0-2 make, with the rules of Kafka brokers before 4.0."""

from __future__ import annotations

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from protocol.legacy_records import (
    Entry,
    build_message_set,
    iter_messages,
    lz4_header_checksum,
    xxh32_short,
)
from protocol.record import Record
from protocol.record_batch import build_batch, decode_records, iter_batches
from protocol.record_compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from protocol.record_conversion import (
    UnconvertibleBatchError,
    down_convert,
    fetch_magic,
    is_message_set,
    up_convert,
)

_BLOB = st.one_of(st.none(), st.binary(max_size=40))


def kafka_python_read(data: bytes) -> list[tuple[int, int | None, int | None, bytes | None, bytes | None]]:
    """(offset, timestamp, timestamp type, key, value) of every message, by kafka-python."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        assert batch is not None
        assert batch.magic in (0, 1)
        for r in batch:
            assert r.validate_crc()
            out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value))
    return out


@st.composite
def entries(draw: st.DrawFn) -> list[Entry]:
    first = draw(st.integers(0, 2**40))
    gaps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=8))
    out, offset = [], first
    for gap in gaps:
        out.append(Entry(offset, draw(st.integers(0, 2**42)), draw(_BLOB), draw(_BLOB)))
        offset += gap
    return out


@settings(max_examples=150, deadline=None)
@given(entries(), st.sampled_from([0, 1]), st.sampled_from([NONE, GZIP]), st.booleans())
def test_message_sets_read_back_by_kafka_python(es: list[Entry], magic: int, codec: int, append_time: bool) -> None:
    log_append_time = 1_700_000_000_000 if append_time and magic == 1 else None
    data = build_message_set(es, magic, codec, log_append_time)
    seen = kafka_python_read(data)
    assert [(o, k, v) for o, _ts, _tt, k, v in seen] == [(e.offset, e.key, e.value) for e in es]
    if magic == 0:
        assert all(tt is None for _o, _ts, tt, _k, _v in seen)
    elif log_append_time is not None:
        assert [(ts, tt) for _o, ts, tt, _k, _v in seen] == [(log_append_time, 1)] * len(es)
    else:
        assert [(ts, tt) for _o, ts, tt, _k, _v in seen] == [(e.timestamp, 0) for e in es]
    ours = list(iter_messages(data))
    assert [(m.offset, m.key, m.value) for m in ours] == [(e.offset, e.key, e.value) for e in es]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_BLOB, _BLOB, st.integers(0, 2**42)), min_size=1, max_size=6),
       st.sampled_from([0, 1]), st.sampled_from([NONE, GZIP]))
def test_kafka_python_message_sets_read_by_us(msgs: list[tuple[bytes | None, bytes | None, int]],
                                              magic: int, codec: int) -> None:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (key, value, ts) in enumerate(msgs):
        assert builder.append(i, ts, key, value) is not None
    data = bytes(builder.build())
    ours = list(iter_messages(data))
    assert [(m.timestamp, m.key, m.value) for m in ours] == [(ts if magic else -1, k, v) for k, v, ts in msgs]
    # A producer's wrapper offset means nothing (the broker assigns offsets): only the order counts.
    assert [m.offset - ours[0].offset for m in ours] == list(range(len(msgs)))


@pytest.mark.parametrize("codec", [SNAPPY, LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_snappy_and_lz4_message_sets_read_back(codec: int, magic: int) -> None:
    es = [Entry(10 + i, 1000 + i, b"k%d" % i, b"v" * (i * 50)) for i in range(40)]
    data = build_message_set(es, magic, codec)
    assert [(m.offset, m.key, m.value) for m in iter_messages(data)] == [(e.offset, e.key, e.value) for e in es]


def test_lz4_frames_use_kafkas_header_checksums() -> None:
    # XXH32 reference values, and the header byte every LZ4 frame with FLG 0x60/BD 0x40 carries.
    assert xxh32_short(b"") == 0x02CC5D05
    assert xxh32_short(b"a") == 0x550D7456
    assert lz4_header_checksum(1) == 0x82
    assert lz4_header_checksum(0) != 0x82  # the old bug: the frame magic was hashed too
    payload = b"hello, old consumers " * 500
    data = build_message_set([Entry(0, 5, None, payload)], 1, LZ4)
    wrapper_value = data[12 + 4 + 2 + 8 + 4 + 4 :]  # entry head, crc, magic+attributes, ts, null key, value len
    inner = bytes(cramjam.lz4.decompress(wrapper_value))  # a standard LZ4 frame reader agrees
    assert payload in inner


def _batch(records: list[Record], base: int, *, compression: int = NONE, control: bool = False,
           log_append_time: bool = False, max_ts: int | None = None) -> bytes:
    return build_batch(records, base, base_timestamp=1000, compression=compression, control=control,
                       log_append_time=log_append_time, max_timestamp=max_ts)


def test_down_conversion_keeps_offsets_and_timestamps_and_drops_headers_and_markers() -> None:
    plain = _batch([Record(0, 0, b"a", b"1", [("h", b"x")]), Record(1, 5, None, b"2", [])], 40)
    marker = _batch([Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [])], 42, control=True)
    zipped = _batch([Record(0, 7, b"c", None, []), Record(1, 9, b"d", b"4", [])], 43, compression=GZIP)
    data = plain + marker + zipped
    got = kafka_python_read(down_convert(data, 1, 0))
    assert got == [(40, 1000, 0, b"a", b"1"), (41, 1005, 0, None, b"2"), (43, 1007, 0, b"c", None),
                   (44, 1009, 0, b"d", b"4")]
    old = kafka_python_read(down_convert(data, 0, 0))
    assert [(o, ts, k, v) for o, ts, _tt, k, v in old] == [(40, None, b"a", b"1"), (41, None, None, b"2"),
                                                          (43, None, b"c", None), (44, None, b"d", b"4")]


def test_down_conversion_trims_below_the_fetch_offset_only_in_uncompressed_batches() -> None:
    recs = [Record(i, i, b"k", b"%d" % i, []) for i in range(4)]
    plain = _batch(recs, 0)
    zipped = _batch(recs, 4, compression=GZIP)
    assert [o for o, *_ in kafka_python_read(down_convert(plain + zipped, 1, 2))] == [2, 3, 4, 5, 6, 7]
    assert [o for o, *_ in kafka_python_read(down_convert(zipped, 1, 6))] == [4, 5, 6, 7]


def test_down_conversion_of_log_append_time_batches() -> None:
    data = _batch([Record(0, 0, b"a", b"1", []), Record(1, 3, b"b", b"2", [])], 0, log_append_time=True, max_ts=77)
    assert [(ts, tt) for _o, ts, tt, _k, _v in kafka_python_read(down_convert(data, 1, 0))] == [(77, 1)] * 2


def test_zstd_batches_cannot_be_down_converted() -> None:
    data = _batch([Record(0, 0, b"a", b"1", [])], 0, compression=ZSTD)
    with pytest.raises(UnconvertibleBatchError):
        down_convert(data, 1, 0)


def test_a_partial_batch_at_the_end_is_left_out() -> None:
    one = _batch([Record(0, 0, b"a", b"1", [])], 0)
    two = _batch([Record(0, 0, b"b", b"2", [])], 1)
    assert [o for o, *_ in kafka_python_read(down_convert(one + two[:-3], 1, 0))] == [0]


def test_fetch_versions_and_their_formats() -> None:
    assert [fetch_magic(v) for v in range(6)] == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("magic,codec", [(0, NONE), (1, NONE), (0, GZIP), (1, GZIP)])
def test_up_conversion_of_a_kafka_python_message_set(magic: int, codec: int) -> None:
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i in range(3):
        builder.append(i, 5000 + i, b"k%d" % i, None if i == 1 else b"v%d" % i)
    data = bytes(builder.build())
    assert is_message_set(data)
    batch = next(iter_batches(up_convert(data)))
    assert not is_message_set(batch.raw.tobytes())
    assert batch.compression == codec and batch.records_count == 3 and batch.last_offset_delta == 2
    records = decode_records(batch)
    assert [(r.offset_delta, r.key, r.value) for r in records] == [(0, b"k0", b"v0"), (1, b"k1", None),
                                                                   (2, b"k2", b"v2")]
    timestamps = [batch.base_timestamp + r.timestamp_delta for r in records]
    assert timestamps == ([5000, 5001, 5002] if magic else [-1, -1, -1])
