"""A partition's open and aborted transactions: the last stable offset and what read_committed skips."""

from __future__ import annotations

from broker.topics.partition_txns import AbortedTxn, PartitionTxns


def test_the_last_stable_offset_stops_at_the_oldest_open_transaction() -> None:
    t = PartitionTxns()
    assert t.last_stable_offset(10) == 10
    t.on_batch(1, 10)
    t.on_batch(2, 12)
    t.on_batch(1, 14)  # the same transaction goes on
    assert t.last_stable_offset(20) == 10
    t.on_marker(1, 20, commit=True)
    assert t.last_stable_offset(21) == 12
    t.on_marker(2, 21, commit=False)
    assert t.last_stable_offset(22) == 22
    assert t.aborted == [AbortedTxn(2, 12, 21, 22)]


def test_aborted_transactions_overlapping_a_fetch() -> None:
    t = PartitionTxns.rebuild([(1, 0, False, None), (1, 5, True, False), (2, 6, False, None),
                               (2, 9, True, False), (3, 10, False, None), (3, 12, True, True)])
    assert t.aborted_between(0, 13) == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 6, 9, 10)]
    assert t.aborted_between(6, 13) == [AbortedTxn(2, 6, 9, 10)]
    assert t.aborted_between(0, 3) == [AbortedTxn(1, 0, 5, 6)]
    assert t.aborted_between(10, 13) == []
    t.forget_before(6)
    assert t.aborted == [AbortedTxn(2, 6, 9, 10)]


def test_a_marker_for_nothing_open_changes_nothing() -> None:
    t = PartitionTxns()
    t.on_marker(1, 3, commit=False)
    assert t.aborted == [] and t.last_stable_offset(4) == 4


def test_an_abort_records_the_last_stable_offset_right_after_its_marker() -> None:
    t = PartitionTxns()
    t.on_batch(1, 10)
    t.on_batch(2, 12)
    t.on_batch(3, 31)  # queued behind the marker at 30: not in the log when the marker was written
    assert t.on_marker(2, 30, commit=False) == AbortedTxn(2, 12, 30, 10)  # producer 1 is still open
    assert t.on_marker(1, 32, commit=True) is None
    assert t.on_marker(3, 33, commit=False) == AbortedTxn(3, 31, 33, 34)
