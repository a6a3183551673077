"""The epoch check a partition makes of a COMMIT/ABORT marker, by the transaction version its
coordinator sent with it (WriteTxnMarkers v2's ``TransactionVersion``; Kafka's
ProducerAppendInfo.appendEndTxnMarker): version 2 markers must be strictly newer than the producer's
epoch on the partition, but for one written again after the transaction ended there or at the last
epoch; version 0/1 markers may not be older. And the coordinator's marker jobs carry the version
of the client whose transaction they end."""

from __future__ import annotations

import itertools

import pytest

from broker.coordinators.transaction.core.coordinator import TransactionCoordinator
from broker.topics.producer_state import INT16_MAX, ProducerStateTable
from protocol.errors import ErrorCode

PID = 7
NOW = 1_000_000
TP = ("t", 0)


def table_at(epoch: int) -> ProducerStateTable:
    """A partition that holds one batch of ``PID`` at ``epoch``."""
    table = ProducerStateTable()
    table.record(PID, epoch, 0, 0, 0, 0, 1000)
    return table


@pytest.mark.parametrize("transaction_version", [0, 1])
@pytest.mark.parametrize("ongoing", [True, False])
def test_before_version_2_a_marker_may_not_be_older_than_the_producer(transaction_version: int,
                                                                      ongoing: bool) -> None:
    table = table_at(5)
    assert table.check_marker(PID, 5, transaction_version, ongoing).error_code == ErrorCode.NONE
    assert table.check_marker(PID, 6, transaction_version, ongoing).error_code == ErrorCode.NONE
    refused = table.check_marker(PID, 4, transaction_version, ongoing)
    assert refused.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert refused.message is not None and "4" in refused.message and "5" in refused.message


def test_at_version_2_a_marker_must_be_newer_than_an_open_transactions_epoch() -> None:
    table = table_at(5)
    assert table.check_marker(PID, 6, 2, True).error_code == ErrorCode.NONE
    # The same epoch as the transaction's own batches: the coordinator did not bump it for this
    # marker, so it could end a later transaction of the same epoch.
    assert table.check_marker(PID, 5, 2, True).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert table.check_marker(PID, 4, 2, True).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert table.check_marker(PID, 4, 2, False).error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_at_version_2_a_marker_written_again_after_its_transaction_ended_is_taken() -> None:
    table = table_at(5)
    table.note_marker(PID, 6)  # the first write of the marker moved the producer to its epoch
    assert table.check_marker(PID, 6, 2, False).error_code == ErrorCode.NONE
    # Had the producer begun its next transaction here at that epoch, the old marker is refused.
    assert table.check_marker(PID, 6, 2, True).error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_at_version_2_the_last_epoch_may_end_its_own_transaction() -> None:
    table = table_at(INT16_MAX)
    assert table.check_marker(PID, INT16_MAX, 2, True).error_code == ErrorCode.NONE


@pytest.mark.parametrize("transaction_version", [0, 1, 2])
def test_a_producer_the_partition_does_not_know_is_not_checked(transaction_version: int) -> None:
    assert ProducerStateTable().check_marker(PID, 0, transaction_version, False).error_code == ErrorCode.NONE


def test_marker_jobs_carry_the_transaction_version_of_the_client() -> None:
    ids = itertools.count(100)
    c = TransactionCoordinator(lambda: next(ids), transaction_version=2)
    c.init_producer_id("v2", 60_000, -1, -1, NOW)
    c.add_partitions("v2", 100, 0, [TP], NOW, tv2=True)
    (job,) = c.end_txn("v2", 100, 0, True, NOW, tv2=True).markers
    assert (job.producer_epoch, job.transaction_version) == (1, 2)
    # A client of the first protocol on the same coordinator: markers at the transaction's epoch.
    c.init_producer_id("v0", 60_000, -1, -1, NOW)
    c.add_partitions("v0", 101, 0, [TP], NOW)
    (job,) = c.end_txn("v0", 101, 0, False, NOW).markers
    assert (job.producer_epoch, job.transaction_version) == (0, 0)
