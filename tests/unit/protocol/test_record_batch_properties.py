"""Round trips over generated batches, cross-checked with the construct declaration and
kafka-python; and bad input of every shape is refused with ``CorruptBatchError`` only."""

from __future__ import annotations

import contextlib
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from protocol import record_batch_reference as reference
from protocol.errors import DecodeError
from protocol.record_batch import (
    CorruptBatchError,
    Record,
    build_batch,
    build_simple_batch,
    decode_keys,
    decode_records,
    iter_batches,
)

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=3)


@st.composite
def batches(draw: st.DrawFn) -> tuple[bytes, list[Record], dict[str, int]]:
    deltas = sorted(draw(st.sets(st.integers(0, 2**31 - 1), min_size=1, max_size=20)))
    records = [
        Record(od, draw(st.integers(-(2**40), 2**40)), draw(maybe_bytes), draw(maybe_bytes), draw(headers))
        for od in deltas
    ]
    options = {
        "base_offset": draw(st.integers(0, 2**62)),
        "base_timestamp": draw(st.integers(2**41, 2**50)),
        "partition_leader_epoch": draw(st.integers(-1, 2**31 - 1)),
        "producer_id": draw(st.integers(-1, 2**62)),
        "producer_epoch": draw(st.integers(-1, 2**15 - 1)),
        "base_sequence": draw(st.integers(-1, 2**31 - 1)),
        "compression": draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4])),
    }
    base = options.pop("base_offset")
    raw = build_batch(records, base, **options)
    return raw, records, {"base_offset": base, **options}


@settings(max_examples=200, deadline=None)
@given(batches())
def test_round_trip_matches_reference_and_kafka_python(case: tuple[bytes, list[Record], dict[str, int]]) -> None:
    raw, records, options = case
    (batch,) = iter_batches(raw)
    assert batch.base_offset == options["base_offset"]
    assert batch.compression == options["compression"]
    assert batch.last_offset_delta == records[-1].offset_delta
    assert batch.max_timestamp == max(options["base_timestamp"] + r.timestamp_delta for r in records)
    assert decode_records(batch) == records
    assert decode_keys(batch) == [(r.offset_delta, r.key, r.value is None) for r in records]
    header, ref_records = reference.parse(raw)
    assert ref_records == records
    assert reference.build(header, records) == raw
    theirs = DefaultRecordBatch(bytearray(raw))
    assert theirs.validate_crc()
    if options["compression"] in (0, 1):
        got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
        assert got == [
            (options["base_offset"] + r.offset_delta, options["base_timestamp"] + r.timestamp_delta,
             r.key, r.value, r.headers)
            for r in records
        ]


def _decode_all(buf: bytes, verify_crc: bool) -> int:
    n = 0
    for batch in iter_batches(buf, verify_crc=verify_crc):
        n += len(decode_records(batch))
        n += len(decode_keys(batch))
    return n


@settings(max_examples=300, deadline=None)
@given(batches(), st.data())
def test_mutations_raise_only_decode_errors(case: tuple[bytes, list[Record], dict[str, int]], data: st.DataObject) -> None:
    raw = bytearray(case[0])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for buf in (bytes(raw), bytes(raw[:cut])):
        for verify in (True, False):
            with contextlib.suppress(DecodeError):
                _decode_all(buf, verify)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_decode_errors(buf: bytes) -> None:
    for verify in (True, False):
        with contextlib.suppress(DecodeError):
            _decode_all(buf, verify)


def test_every_truncation_of_a_batch_is_short() -> None:
    raw = build_batch([Record(0, 0, b"k", b"v" * 100, [])], 0, base_timestamp=1)
    for cut in range(1, len(raw)):
        try:
            list(iter_batches(raw[:cut]))
        except CorruptBatchError as exc:
            assert exc.kind == "short" and exc.position == 0
        else:
            raise AssertionError(f"truncation at {cut} accepted")
        assert list(iter_batches(raw[:cut], allow_partial=True)) == []


def test_absurd_lengths_and_counts() -> None:
    good = build_batch([Record(0, 0, b"k", b"v", [])], 0, base_timestamp=1)
    for length in (-1, 0, 48, 2**31 - 1):
        bad = bytearray(good)
        struct.pack_into(">i", bad, 8, length)
        try:
            list(iter_batches(bytes(bad)))
        except CorruptBatchError as exc:
            assert exc.kind in ("length", "short")
        else:
            raise AssertionError(length)
    for count in (-5, 2, 2**31 - 1):
        bad = bytearray(good)
        struct.pack_into(">i", bad, 57, count)
        try:
            for batch in iter_batches(bytes(bad), verify_crc=False):
                decode_records(batch)
        except CorruptBatchError:
            pass
        else:
            raise AssertionError(count)
    bad = bytearray(good)
    bad[16] = 1  # magic 1: the pre-2017 message set format
    try:
        list(iter_batches(bytes(bad)))
    except CorruptBatchError as exc:
        assert exc.kind == "magic"
    else:
        raise AssertionError("magic 1 accepted")


def test_second_batch_error_reports_its_position() -> None:
    one = build_batch([Record(0, 0, b"k", b"v", [])], 0, base_timestamp=1)
    buf = one + one[:-3]
    seen = []
    try:
        for batch in iter_batches(buf):
            seen.append(batch.position)
    except CorruptBatchError as exc:
        assert exc.position == len(one)
    assert seen == [0]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(maybe_bytes, maybe_bytes, st.integers(0, 2**45)), min_size=1, max_size=30),
    st.integers(0, 2**62),
    st.integers(-1, 2**31 - 1),
    st.booleans(),
)
def test_simple_batch_is_the_generic_batch(entries: list[tuple[bytes | None, bytes | None, int]], base: int,
                                           epoch: int, transactional: bool) -> None:
    """The coordinator's builder (no Record objects, no headers) writes the bytes ``build_batch``
    writes for the same records."""
    base_ts = entries[0][2]
    records = [Record(i, ts - base_ts, k, v, []) for i, (k, v, ts) in enumerate(entries)]
    generic = build_batch(records, base, base_timestamp=base_ts, partition_leader_epoch=epoch,
                          transactional=transactional)
    assert build_simple_batch(entries, base, partition_leader_epoch=epoch, transactional=transactional) == generic
