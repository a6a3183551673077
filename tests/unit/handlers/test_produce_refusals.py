"""A producer's batches after one refused on the same connection wait for it (produce_refusals)."""

from __future__ import annotations

from broker.handlers.produce_refusals import RefusedBatches, Sequence, batch_sequence
from broker.topics.producer_state import ProducerStateTable
from protocol.errors import ErrorCode
from protocol.record_batch import build_simple_batch

NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER
PID = 5


def store(table: ProducerStateTable, first: int) -> None:
    table.record(PID, 0, first, first, first, first, 0)


def test_the_sequence_is_read_from_an_idempotent_producers_batch_only() -> None:
    raw = build_simple_batch([(None, b"v", 1)], producer_id=PID, producer_epoch=3, base_sequence=42)
    assert batch_sequence(raw) == Sequence(PID, 3, 42)
    assert batch_sequence(build_simple_batch([(None, b"v", 1)])) is None
    assert batch_sequence(raw[:30]) is None and batch_sequence(None) is None


def test_the_run_the_fault_checker_found_resends_in_order_without_a_gap() -> None:
    """Batch 8 was written and then refused (the node's lease in doubt), 9 was refused while the
    node did not own the partition, 10 reached it once it owned it again: 10 must wait for 9."""
    table = ProducerStateTable()
    refusals = RefusedBatches()
    refusals.refused(1, "t", 0, Sequence(PID, 0, 8), NOT_LEADER)
    store(table, 8)  # it had reached the log
    refusals.refused(1, "t", 0, Sequence(PID, 0, 9), NOT_LEADER)
    assert refusals.held(1, "t", 0, Sequence(PID, 0, 10), table) == NOT_LEADER
    refusals.refused(1, "t", 0, Sequence(PID, 0, 10), NOT_LEADER)
    # The producer sends them again in order: 8 (a duplicate), 9, 10.
    assert refusals.held(1, "t", 0, Sequence(PID, 0, 8), table) == 0
    assert refusals.held(1, "t", 0, Sequence(PID, 0, 9), table) == 0
    store(table, 9)
    assert refusals.held(1, "t", 0, Sequence(PID, 0, 10), table) == 0
    assert refusals.marks == {}


def test_only_the_same_connection_partition_producer_and_epoch_are_held() -> None:
    table = ProducerStateTable()
    refusals = RefusedBatches()
    refusals.refused(1, "t", 0, Sequence(PID, 0, 9), NOT_LEADER)
    assert refusals.held(2, "t", 0, Sequence(PID, 0, 10), table) == 0
    assert refusals.held(1, "t", 1, Sequence(PID, 0, 10), table) == 0
    assert refusals.held(1, "t", 0, Sequence(PID + 1, 0, 10), table) == 0
    assert refusals.held(1, "t", 0, Sequence(PID, 0, 10), table) == NOT_LEADER
    assert refusals.held(1, "t", 0, Sequence(PID, 1, 0), table) == 0  # a new epoch starts over
    assert refusals.marks == {}


def test_a_refused_batch_stored_through_another_connection_holds_nothing() -> None:
    table = ProducerStateTable()
    refusals = RefusedBatches()
    refusals.refused(1, "t", 0, Sequence(PID, 0, 9), NOT_LEADER)
    store(table, 9)
    store(table, 10)
    assert refusals.held(1, "t", 0, Sequence(PID, 0, 11), table) == 0


def test_errors_the_producer_does_not_retry_mark_nothing() -> None:
    table = ProducerStateTable()
    refusals = RefusedBatches()
    refusals.refused(1, "t", 0, Sequence(PID, 0, 9), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
    refusals.refused(1, "t", 0, Sequence(PID, 0, 9), ErrorCode.INVALID_RECORD)
    assert refusals.marks == {}
    assert refusals.held(1, "t", 0, Sequence(PID, 0, 10), table) == 0
