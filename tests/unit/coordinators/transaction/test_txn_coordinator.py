"""The transaction coordinator's rules, and restart == replay of its __transaction_state records."""

from __future__ import annotations

import itertools

from broker.coordinators.transaction.core.coordinator import TransactionCoordinator, TxnResult
from broker.coordinators.transaction.core.metadata import TxnState
from protocol.errors import ErrorCode
from protocol.payloads.transaction_log_records import decode_transaction_record, encode_transaction_record

NOW = 1_000_000


class Log:
    """A coordinator whose every record goes through its bytes into a list (the log)."""

    def __init__(self, max_timeout_ms: int = 900_000) -> None:
        self.ids = itertools.count(100)
        self.max_timeout_ms = max_timeout_ms
        self.coordinator = TransactionCoordinator(lambda: next(self.ids), max_timeout_ms)
        self.records: list[tuple[bytes, bytes | None]] = []

    def __call__(self, result: TxnResult) -> TxnResult:
        self.records += [encode_transaction_record(r) for r in result.records]
        return result

    def replayed(self) -> TransactionCoordinator:
        fresh = TransactionCoordinator(lambda: next(self.ids), self.max_timeout_ms)
        for key, value in self.records:
            fresh.replay(decode_transaction_record(key, value))
        return fresh


def state_of(c: TransactionCoordinator, txn_id: str) -> tuple[int, int, TxnState, set[tuple[str, int]]]:
    m = c.txns[txn_id]
    return m.producer_id, m.producer_epoch, m.state, m.partitions


def test_init_allocates_then_bumps_the_epoch_and_a_retry_is_not_bumped_twice() -> None:
    log = Log()
    c = log.coordinator
    first = log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    assert (first.error, first.producer_id, first.producer_epoch) == (0, 100, 0)
    second = log(c.init_producer_id("tx", 60_000, 100, 0, NOW))
    assert (second.producer_id, second.producer_epoch) == (100, 1)
    retry = log(c.init_producer_id("tx", 60_000, 100, 0, NOW))  # KIP-360: the same request again
    assert (retry.error, retry.producer_epoch) == (0, 1)
    assert log(c.init_producer_id("tx", 60_000, 555, 0, NOW)).error == ErrorCode.PRODUCER_FENCED
    assert log(c.init_producer_id("tx", 0, -1, -1, NOW)).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert log(c.init_producer_id("tx", 900_001, -1, -1, NOW)).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert log(c.init_producer_id("", 1000, -1, -1, NOW)).error == ErrorCode.INVALID_REQUEST


def test_a_transaction_goes_ongoing_prepare_complete_and_replays_to_the_same_state() -> None:
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    added = log(c.add_partitions("tx", 100, 0, [("a", 0), ("__consumer_offsets", 7)], NOW + 1))
    assert added.error == 0 and len(added.records) == 1
    assert not log(c.add_partitions("tx", 100, 0, [("a", 0)], NOW + 2)).records  # nothing new
    ended = log(c.end_txn("tx", 100, 0, True, NOW + 3))
    assert ended.error == 0
    [job] = ended.markers
    assert job.commit and job.partitions == (("__consumer_offsets", 7), ("a", 0))
    assert state_of(log.replayed(), "tx")[2] is TxnState.PREPARE_COMMIT
    assert [j.partitions for j in log.replayed().unfinished()] == [job.partitions]
    # While the markers are written: retries wait, other requests are refused.
    assert c.end_txn("tx", 100, 0, True, NOW).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert c.end_txn("tx", 100, 0, False, NOW).error == ErrorCode.INVALID_TXN_STATE
    assert c.add_partitions("tx", 100, 0, [("a", 1)], NOW).error == ErrorCode.CONCURRENT_TRANSACTIONS
    log(c.markers_written(job, NOW + 4))
    assert state_of(c, "tx") == (100, 0, TxnState.COMPLETE_COMMIT, set())
    assert c.end_txn("tx", 100, 0, True, NOW).error == 0  # a retried EndTxn that completed
    assert not log(c.markers_written(job, NOW + 5)).records  # markers written twice: nothing more
    again = log.replayed()
    assert {k: state_of(again, k) for k in again.txns} == {k: state_of(c, k) for k in c.txns}
    assert again.unfinished() == []


def test_producer_checks() -> None:
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    assert c.add_partitions("nope", 100, 0, [("a", 0)], NOW).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", 101, 0, [("a", 0)], NOW).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", 100, 3, [("a", 0)], NOW).error == ErrorCode.PRODUCER_FENCED
    assert c.end_txn("tx", 100, 0, True, NOW).error == ErrorCode.INVALID_TXN_STATE  # nothing begun


def test_a_new_incarnation_fences_the_open_transaction_and_aborts_it() -> None:
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    log(c.add_partitions("tx", 100, 0, [("a", 0)], NOW))
    fenced = log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    [job] = fenced.markers
    assert (job.commit, job.producer_epoch) == (False, 1)
    assert state_of(c, "tx")[2] is TxnState.PREPARE_ABORT
    assert c.end_txn("tx", 100, 0, True, NOW).error == ErrorCode.PRODUCER_FENCED  # the zombie
    log(c.markers_written(job, NOW))
    retried = log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    assert (retried.error, retried.producer_epoch) == (0, 2)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("tx", 1_000, -1, -1, NOW))
    added = log(c.add_partitions("tx", 100, 0, [("a", 0)], NOW))
    assert [(t.key, t.deadline_ms) for t in added.timers] == [("transaction-timeout/tx", NOW + 1_000)]  # type: ignore[union-attr]
    [job] = log(c.time_out("tx", NOW + 1_000)).markers
    assert (job.commit, job.producer_epoch, job.partitions) == (False, 1, (("a", 0),))
    assert c.end_txn("tx", 100, 0, True, NOW).error == ErrorCode.PRODUCER_FENCED


def test_verify_only_reports_partitions_outside_the_transaction() -> None:
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("tx", 60_000, -1, -1, NOW))
    log(c.add_partitions("tx", 100, 0, [("a", 0)], NOW))
    result = c.add_partitions("tx", 100, 0, [("a", 0), ("a", 1)], NOW, verify_only=True)
    assert result.partition_errors == {("a", 1): ErrorCode.INVALID_TXN_STATE}
    assert not result.records


def test_listing_filters_by_state_producer_and_duration() -> None:
    log = Log()
    c = log.coordinator
    log(c.init_producer_id("a", 60_000, -1, -1, NOW))
    log(c.init_producer_id("b", 60_000, -1, -1, NOW))
    log(c.add_partitions("b", 101, 0, [("t", 0)], NOW))
    assert [m.transactional_id for m in c.listed(set(), set(), -1, NOW)] == ["a", "b"]
    assert [m.transactional_id for m in c.listed({"Ongoing"}, set(), -1, NOW)] == ["b"]
    assert [m.transactional_id for m in c.listed(set(), {100}, -1, NOW)] == ["a"]
    assert [m.transactional_id for m in c.listed(set(), set(), 500, NOW + 1_000)] == ["b"]
    assert c.listed(set(), set(), 5_000, NOW + 1_000) == []


def test_an_idle_transactional_id_is_forgotten_after_its_expiration_and_stays_forgotten_on_replay() -> None:
    log = Log()
    c = log.coordinator
    c.id_expiration_ms = 10_000
    log(c.init_producer_id("idle", 60_000, -1, -1, NOW))  # Empty since NOW
    log(c.init_producer_id("done", 60_000, -1, -1, NOW))
    log(c.add_partitions("done", 101, 0, [("a", 0)], NOW))
    [job] = log(c.end_txn("done", 101, 0, True, NOW + 1)).markers
    log(c.markers_written(job, NOW + 2))  # CompleteCommit since NOW + 2
    log(c.init_producer_id("open", 60_000, -1, -1, NOW))
    log(c.add_partitions("open", 102, 0, [("a", 1)], NOW))  # Ongoing: never forgotten here

    assert not log(c.expire_transactional_ids(NOW + 9_999)).records
    expired = log(c.expire_transactional_ids(NOW + 10_000))
    assert [(r.transactional_id, r.value) for r in expired.records] == [("idle", None)]
    expired = log(c.expire_transactional_ids(NOW + 10_002))
    assert [(r.transactional_id, r.value) for r in expired.records] == [("done", None)]
    assert set(c.txns) == {"open"} and set(log.replayed().txns) == {"open"}
    # The next InitProducerId for a forgotten id starts afresh: a new producer id, epoch 0.
    again = log(c.init_producer_id("idle", 60_000, -1, -1, NOW + 20_000))
    assert (again.error, again.producer_epoch) == (0, 0) and again.producer_id not in (100, 101, 102)
