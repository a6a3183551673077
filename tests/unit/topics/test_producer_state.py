"""Idempotent producer sequence rules (Kafka's ProducerStateManager) and producer id allocation."""

from __future__ import annotations

from pathlib import Path

from broker.topics.producer_state import (
    INT32_MAX,
    MAX_CACHED_BATCHES,
    ProducerIdAllocator,
    ProducerStateTable,
    in_sequence,
    last_sequence,
)
from protocol.errors import ErrorCode

PID = 7


def appended(table: ProducerStateTable, epoch: int, first: int, count: int, offset: int) -> None:
    assert table.check(PID, epoch, first, last_sequence(first, count - 1)).error_code == 0
    table.record(PID, epoch, first, last_sequence(first, count - 1), offset, offset + count - 1, 1000)


def test_an_unknown_producer_may_start_at_any_sequence() -> None:
    table = ProducerStateTable()
    check = table.check(PID, 0, 42, 50)
    assert check.error_code == 0 and check.duplicate is None


def test_batches_in_sequence_are_appended_and_a_gap_is_out_of_order() -> None:
    table = ProducerStateTable()
    appended(table, 0, 0, 10, 100)
    appended(table, 0, 10, 5, 110)
    gap = table.check(PID, 0, 16, 20)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "16" in (gap.message or "") and "14" in (gap.message or "")


def test_a_retry_of_any_of_the_last_five_batches_is_a_duplicate_with_its_offsets() -> None:
    table = ProducerStateTable()
    for i in range(7):
        appended(table, 0, i * 3, 3, 1000 + i * 3)
    for i in range(7 - MAX_CACHED_BATCHES, 7):
        dup = table.check(PID, 0, i * 3, i * 3 + 2).duplicate
        assert dup is not None and dup.first_offset == 1000 + i * 3 and dup.last_offset == 1000 + i * 3 + 2
    # Older than the cache: Kafka no longer knows the offsets and calls it out of order.
    old = table.check(PID, 0, 0, 2)
    assert old.duplicate is None and old.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_partial_overlap_is_not_a_duplicate() -> None:
    table = ProducerStateTable()
    appended(table, 0, 0, 10, 0)
    assert table.check(PID, 0, 0, 4).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero() -> None:
    table = ProducerStateTable()
    appended(table, 3, 0, 4, 0)
    assert table.check(PID, 2, 4, 4).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert table.check(PID, 4, 5, 5).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(table, 4, 0, 1, 4)
    # The new epoch forgets the old epoch's batches: their retry is fenced, not a duplicate.
    assert table.check(PID, 3, 0, 3).error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequences_wrap_after_int32_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    assert in_sequence(INT32_MAX, 0)
    table = ProducerStateTable()
    appended(table, 0, INT32_MAX - 1, 2, 0)
    assert table.check(PID, 0, 0, 4).error_code == 0


def test_a_batch_of_an_idempotent_producer_needs_a_sequence() -> None:
    assert ProducerStateTable().check(PID, 0, -1, -1).error_code == ErrorCode.INVALID_RECORD
    assert ProducerStateTable().check(-1, -1, -1, -1).error_code == 0


def test_silent_producers_expire() -> None:
    table = ProducerStateTable()
    table.record(1, 0, 0, 0, 0, 0, timestamp=1_000)
    table.record(2, 0, 0, 0, 1, 1, timestamp=90_000)
    assert table.expire(now_ms=100_000, max_age_ms=50_000) == 1
    assert list(table.producers) == [2]


def test_producer_ids_are_never_handed_out_twice_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "ids"
    first = ProducerIdAllocator(path)
    ids = [first.next_id() for _ in range(3)]
    assert ids == [0, 1, 2]
    again = ProducerIdAllocator(path)  # as after a crash: the rest of the reserved block is skipped
    assert again.next_id() > max(ids)
    seen = ProducerIdAllocator(tmp_path / "other")
    seen.at_least(5000)  # an id found in a log
    assert seen.next_id() == 5001


def test_a_marker_records_its_coordinator_epoch() -> None:
    table = ProducerStateTable()
    table.record(7, 0, 0, 2, 10, 12, 1000)
    assert table.producers[7].coordinator_epoch == -1
    table.note_marker(7, 0, 3, 2000)
    assert table.producers[7].coordinator_epoch == 3 and table.producers[7].last_seq == 2
    assert table.producers[7].last_timestamp == 2000
    table.note_marker(7, 1, 4)  # a newer producer epoch replaces the entry, keeping the marker's epoch
    assert (table.producers[7].epoch, table.producers[7].coordinator_epoch) == (1, 4)
    table.note_marker(8, 0, 5)  # a producer never seen here is not made up
    assert 8 not in table.producers
