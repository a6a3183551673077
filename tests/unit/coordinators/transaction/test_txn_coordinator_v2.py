"""Transactions version 2 (KIP-890 part 2) in the transaction coordinator, as Kafka's
TransactionCoordinator.endTransaction serves EndTxn v5: every transaction ends one epoch up, its
markers carry that epoch and the answer names it; a retry is the epoch just before; an abort with
nothing added still moves the epoch; the last epoch moves the producer to a new id; a timeout's
abort lets the producer's own late abort through as a retry. Records are written at the flexible
value version and replay to the same state."""

from __future__ import annotations

import itertools

from broker.coordinators.transaction.core.coordinator import TransactionCoordinator, TxnResult
from broker.coordinators.transaction.core.metadata import TxnState
from protocol.errors import ErrorCode
from protocol.payloads.transaction_log_records import decode_transaction_record, encode_transaction_record

NOW = 1_000_000
TP = ("t", 0)


class Log:
    """A coordinator whose every record goes through its bytes into a list (the log)."""

    def __init__(self, transaction_version: int = 2) -> None:
        self.ids = itertools.count(100)
        self.transaction_version = transaction_version
        self.coordinator = TransactionCoordinator(lambda: next(self.ids), transaction_version=transaction_version)
        self.records: list[tuple[bytes, bytes | None]] = []

    def __call__(self, result: TxnResult) -> TxnResult:
        self.records += [encode_transaction_record(r) for r in result.records]
        return result

    def complete(self, result: TxnResult) -> TxnResult:
        """The markers of ``result`` written: the transaction completes."""
        for job in result.markers:
            self(self.coordinator.markers_written(job, NOW))
        return result

    def replayed(self) -> TransactionCoordinator:
        fresh = TransactionCoordinator(lambda: next(self.ids), transaction_version=self.transaction_version)
        for key, value in self.records:
            fresh.replay(decode_transaction_record(key, value))
        return fresh


def started(log: Log) -> TransactionCoordinator:
    c = log.coordinator
    init = log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    assert (init.producer_id, init.producer_epoch) == (100, 0)
    added = log(c.add_partitions("tx", 100, 0, [TP], NOW, tv2=True))
    assert added.error == 0 and c.txns["tx"].client_transaction_version == 2
    return c


def test_end_txn_v5_bumps_the_epoch_writes_markers_at_it_and_names_it() -> None:
    log = Log()
    c = started(log)
    ended = log(c.end_txn("tx", 100, 0, True, NOW, tv2=True))
    assert (ended.error, ended.producer_id, ended.producer_epoch) == (0, 100, 1)
    (job,) = ended.markers
    assert (job.producer_id, job.producer_epoch, job.commit, job.partitions) == (100, 1, True, (TP,))
    assert c.txns["tx"].state is TxnState.PREPARE_COMMIT
    log.complete(ended)
    meta = c.txns["tx"]
    assert (meta.state, meta.producer_id, meta.producer_epoch, meta.partitions) == (TxnState.COMPLETE_COMMIT, 100, 1, set())
    assert decode_transaction_record(*log.records[-1]).version == 1
    again = log.replayed().txns["tx"]
    assert (again.state, again.producer_epoch, again.client_transaction_version) == (TxnState.COMPLETE_COMMIT, 1, 2)
    # The next transaction runs at the new epoch; the old one is fenced.
    assert log(c.add_partitions("tx", 100, 0, [TP], NOW, tv2=True)).error == ErrorCode.PRODUCER_FENCED
    assert log(c.add_partitions("tx", 100, 1, [TP], NOW, tv2=True)).error == 0


def test_a_retried_end_txn_is_answered_with_the_epoch_it_moved_to() -> None:
    log = Log()
    c = started(log)
    log.complete(log(c.end_txn("tx", 100, 0, True, NOW, tv2=True)))
    retry = log(c.end_txn("tx", 100, 0, True, NOW, tv2=True))
    assert (retry.error, retry.producer_id, retry.producer_epoch, retry.records) == (0, 100, 1, [])
    assert log(c.end_txn("tx", 100, 0, False, NOW, tv2=True)).error == ErrorCode.INVALID_TXN_STATE
    assert log(c.end_txn("tx", 100, 5, True, NOW, tv2=True)).error == ErrorCode.PRODUCER_FENCED
    assert log(c.end_txn("tx", 99, 1, True, NOW, tv2=True)).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_while_its_markers_are_written_a_transaction_answers_concurrent_transactions() -> None:
    log = Log()
    c = started(log)
    log(c.end_txn("tx", 100, 0, False, NOW, tv2=True))
    assert log(c.end_txn("tx", 100, 1, False, NOW, tv2=True)).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert log(c.add_partitions("tx", 100, 1, [TP], NOW, tv2=True)).error == ErrorCode.CONCURRENT_TRANSACTIONS


def test_an_abort_with_nothing_added_moves_the_epoch_and_a_commit_is_refused() -> None:
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    assert log(c.end_txn("tx", 100, 0, True, NOW, tv2=True)).error == ErrorCode.INVALID_TXN_STATE
    aborted = log(c.end_txn("tx", 100, 0, False, NOW, tv2=True))
    assert (aborted.error, aborted.producer_epoch) == (0, 1)
    assert aborted.markers[0].partitions == ()
    log.complete(aborted)
    assert c.txns["tx"].state is TxnState.COMPLETE_ABORT
    # From a completed transaction at the current epoch, again.
    assert log(c.end_txn("tx", 100, 1, False, NOW, tv2=True)).producer_epoch == 2


def test_the_last_epoch_moves_the_producer_to_a_new_id_once_the_transaction_completes() -> None:
    log = Log()
    c = started(log)
    c.txns["tx"].producer_epoch = 32766  # the last epoch a transaction may begin at
    ended = log(c.end_txn("tx", 100, 32766, True, NOW, tv2=True))
    assert (ended.producer_id, ended.producer_epoch) == (101, 0)
    assert (ended.markers[0].producer_id, ended.markers[0].producer_epoch) == (100, 32767)
    assert c.txns["tx"].next_producer_id == 101
    log.complete(ended)
    meta = c.txns["tx"]
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (101, 0, 100)
    retry = log(c.end_txn("tx", 100, 32766, True, NOW, tv2=True))
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (0, 101, 0)
    again = log.replayed().txns["tx"]
    assert (again.producer_id, again.producer_epoch, again.previous_producer_id) == (101, 0, 100)


def test_a_timed_out_transactions_late_abort_is_a_retry_under_v2_and_fenced_under_v1() -> None:
    for version, late_abort in ((2, (0, 100, 1)), (0, (ErrorCode.PRODUCER_FENCED, -1, -1))):
        log = Log(version)
        c = started(log)
        expired = log(c.time_out("tx", NOW + 60_001))
        assert [(j.producer_id, j.producer_epoch, j.commit) for j in expired.markers] == [(100, 1, False)]
        log.complete(expired)
        late = log(c.end_txn("tx", 100, 0, False, NOW, tv2=version == 2))
        assert (late.error, late.producer_id, late.producer_epoch) == late_abort
        assert decode_transaction_record(*log.records[-1]).version == (1 if version else 0)


def test_a_first_protocol_end_txn_keeps_the_epoch_whatever_the_cluster_level() -> None:
    log = Log()
    c = started(log)
    ended = log.complete(log(c.end_txn("tx", 100, 0, True, NOW)))
    assert (ended.markers[0].producer_epoch, c.txns["tx"].producer_epoch) == (0, 0)
    assert c.txns["tx"].client_transaction_version == 0


def test_a_first_protocol_clients_timed_out_transaction_is_fenced_as_the_first_protocol_does() -> None:
    """At level 2 a transaction whose client speaks the first protocol (its partitions added by
    AddPartitionsToTxn v3 or below) is still aborted the first protocol's way: the old epoch is
    forgotten, so the producer's retry of InitProducerId with it is fenced and a new incarnation
    takes over (librdkafka's producer, answered with the new epoch instead, went on and hung)."""
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    log(c.add_partitions("tx", 100, 0, [TP], NOW))
    log.complete(log(c.time_out("tx", NOW + 60_001)))
    assert c.txns["tx"].producer_epoch == 1
    assert log(c.end_txn("tx", 100, 0, True, NOW)).error == ErrorCode.PRODUCER_FENCED
    assert log(c.init_producer_id("tx", 60_000, 100, 0, NOW)).error == ErrorCode.PRODUCER_FENCED
    fresh = log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    assert (fresh.error, fresh.producer_epoch) == (0, 2)
