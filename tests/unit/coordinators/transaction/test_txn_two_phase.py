"""Two-phase commit participants (KIP-939) in the transaction coordinator, as Kafka 4.4's
TransactionCoordinator.handleInitProducerId serves InitProducerId v6: Enable2Pc only where
``transaction.two.phase.commit.enable`` allows it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
KeepPreparedTxn refused UNSUPPORTED_VERSION, a participant's transaction stored with the timeout
Integer.MAX_VALUE and never timed out, a new incarnation without the flag fencing and aborting it.
Its records replay to the same state; logs written before (and a value carrying the tagged
NextProducerEpoch Kafka declares) keep loading."""

from __future__ import annotations

import itertools

from broker.coordinators.transaction.core.coordinator import TIMEOUT_KEY, TxnResult
from broker.coordinators.transaction.core.metadata import TWO_PHASE_TIMEOUT_MS, TxnState
from broker.coordinators.transaction.core.shard import EXPIRE_IDS_KEY, TransactionCoordinatorShard
from broker.runtime.timer_requests import CancelTimer, SetTimer
from broker.security.acl_model import AclBinding, Operation, PatternType, Permission, ResourceType
from broker.security.authorizer import Authorizer
from protocol.errors import ErrorCode
from protocol.messages.transaction_log import TransactionLogValue
from protocol.payloads.transaction_log_records import (
    TransactionRecord,
    decode_transaction_record,
    encode_transaction_record,
)

NOW = 1_000_000
TP = ("t", 0)
MAX_TIMEOUT = 900_000


class Log:
    """A shard whose every record goes through its bytes into a list (the log)."""

    def __init__(self, two_phase_commit: bool = True) -> None:
        self.ids = itertools.count(100)
        self.two_phase_commit = two_phase_commit
        self.shard = self.fresh()
        self.records: list[tuple[bytes, bytes | None]] = []

    def fresh(self) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(0, lambda: next(self.ids), MAX_TIMEOUT,
                                           two_phase_commit=self.two_phase_commit)

    def __call__(self, result: TxnResult) -> TxnResult:
        self.records += [encode_transaction_record(r) for r in result.records]
        return result

    def replayed(self) -> TransactionCoordinatorShard:
        shard = self.fresh()
        for key, value in self.records:
            shard.replay(decode_transaction_record(key, value))
        return shard


def test_two_phase_commit_is_refused_where_the_coordinator_does_not_allow_it() -> None:
    log = Log(two_phase_commit=False)
    refused = log(log.shard.init_producer_id("tx", 60_000, -1, -1, NOW, enable_two_phase=True))
    assert (refused.error, refused.producer_id, refused.records) == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, [])
    # Without the flag the same coordinator serves the id as ever.
    assert log(log.shard.init_producer_id("tx", 60_000, -1, -1, NOW)).error == 0


def test_keeping_the_prepared_transaction_is_unsupported_as_in_kafka_4_4() -> None:
    log = Log()
    for two_phase in (True, False):
        kept = log(log.shard.init_producer_id("tx", 60_000, -1, -1, NOW, enable_two_phase=two_phase,
                                              keep_prepared=True))
        assert (kept.error, kept.records) == (ErrorCode.UNSUPPORTED_VERSION, [])
    # Two-phase commit not allowed is answered first, as Kafka checks it first.
    off = Log(two_phase_commit=False)
    assert off.shard.init_producer_id("tx", 60_000, -1, -1, NOW, enable_two_phase=True,
                                      keep_prepared=True).error == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_a_participant_takes_no_timeout_and_its_record_says_so() -> None:
    log = Log()
    s = log.shard
    # Any timeout is accepted with the flag (the Java producer may not even set one), none without.
    assert s.init_producer_id("other", MAX_TIMEOUT + 1, -1, -1, NOW).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    init = log(s.init_producer_id("tx", MAX_TIMEOUT + 1, -1, -1, NOW, enable_two_phase=True))
    assert (init.error, init.producer_id, init.producer_epoch) == (0, 100, 0)
    (record,) = init.records
    assert record.value is not None and record.value.transaction_timeout_ms == TWO_PHASE_TIMEOUT_MS
    assert s.txns["tx"].two_phase and log.replayed().txns["tx"].two_phase
    # A later incarnation without the flag is an ordinary producer again, with its own timeout.
    again = log(s.init_producer_id("tx", 60_000, 100, 0, NOW))
    assert (again.error, again.producer_epoch, s.txns["tx"].timeout_ms) == (0, 1, 60_000)
    assert not log.replayed().txns["tx"].two_phase


def test_a_participants_open_transaction_is_never_timed_out() -> None:
    log = Log()
    s = log.shard
    # An ordinary transaction first: its timer is armed.
    init = log(s.init_producer_id("tx", 1_000, -1, -1, NOW))
    first = log(s.add_partitions("tx", 100, init.producer_epoch, [TP], NOW))
    assert first.timers == [SetTimer(TIMEOUT_KEY + "tx", NOW + 1_000)]
    s.txns["tx"].state = TxnState.COMPLETE_ABORT  # as if it had ended
    s.txns["tx"].partitions = set()
    two_phase = log(s.init_producer_id("tx", 1_000, 100, init.producer_epoch, NOW, enable_two_phase=True))
    added = log(s.add_partitions("tx", 100, two_phase.producer_epoch, [TP], NOW))
    # The earlier transaction's timer goes; none replaces it.
    assert added.timers == [CancelTimer(TIMEOUT_KEY + "tx")]
    fired = s.on_timer(TIMEOUT_KEY + "tx", NOW + 10 ** 10)
    assert (fired.records, fired.markers) == ([], [])
    assert s.txns["tx"].state is TxnState.ONGOING
    # Loaded from the log, the open transaction gets no timer either, and is not an expiry candidate.
    loaded = log.replayed()
    assert loaded.txns["tx"].state is TxnState.ONGOING and loaded.txns["tx"].two_phase
    assert loaded.on_loaded(NOW) == [SetTimer(EXPIRE_IDS_KEY, NOW + 3_600_000)]
    assert loaded.on_timer(EXPIRE_IDS_KEY, NOW + 10 ** 10).records == []


def test_a_new_incarnation_fences_and_aborts_a_participants_open_transaction() -> None:
    log = Log()
    s = log.shard
    init = log(s.init_producer_id("tx", 60_000, -1, -1, NOW, enable_two_phase=True))
    log(s.add_partitions("tx", 100, init.producer_epoch, [TP], NOW))
    fenced = log(s.init_producer_id("tx", 60_000, -1, -1, NOW, enable_two_phase=True))
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    (job,) = fenced.markers
    assert (job.commit, job.partitions) == (False, (TP,))
    log(s.markers_written(job, NOW))
    retried = log(s.init_producer_id("tx", 60_000, -1, -1, NOW, enable_two_phase=True))
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (0, 100, 2)
    # The old producer's epoch is fenced.
    assert s.end_txn("tx", 100, 0, True, NOW, tv2=True).error == ErrorCode.PRODUCER_FENCED
    replayed = log.replayed().txns["tx"]
    assert (replayed.state, replayed.producer_epoch, replayed.two_phase) == (TxnState.EMPTY, 2, True)


def test_records_with_or_without_the_next_producer_epoch_load() -> None:
    """Kafka 4.4 declares NextProducerEpoch (tag 3) and never sets it: a value without it (every log
    written so far, at version 0 or 1) reads it as -1, and one with it keeps it and loads alike."""
    def value(next_producer_epoch: int = -1) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=7, producer_epoch=3, next_producer_epoch=next_producer_epoch,
            transaction_timeout_ms=TWO_PHASE_TIMEOUT_MS, transaction_status=int(TxnState.ONGOING),
            transaction_partitions=[TransactionLogValue.PartitionsSchema(topic="t", partition_ids=[0])],
            transaction_last_update_timestamp_ms=NOW, transaction_start_timestamp_ms=NOW)

    for version in (0, 1):
        key, raw = encode_transaction_record(TransactionRecord("tx", value(), version))
        decoded = decode_transaction_record(key, raw)
        assert decoded.value is not None and decoded.value.next_producer_epoch == -1
    key, raw = encode_transaction_record(TransactionRecord("tx", value(4), 1))
    _key, plain = encode_transaction_record(TransactionRecord("tx", value(), 1))
    assert raw is not None and plain is not None and len(raw) > len(plain)  # the tag is there
    decoded = decode_transaction_record(key, raw)
    assert decoded.value is not None and decoded.value.next_producer_epoch == 4
    shard = Log().fresh()
    shard.replay(decoded)
    meta = shard.txns["tx"]
    assert (meta.state, meta.producer_epoch, meta.partitions, meta.two_phase) == (TxnState.ONGOING, 3, {TP}, True)
    assert shard.on_loaded(NOW) == [SetTimer(EXPIRE_IDS_KEY, NOW + 3_600_000)]


def test_two_phase_commit_on_a_transactional_id_is_its_own_operation() -> None:
    """Kafka's TWO_PHASE_COMMIT (15): not implied by Write, granted by All or by itself."""
    def may(*operations: int) -> bool:
        a = Authorizer(None, frozenset({"User:admin"}), False)
        a.acls = [AclBinding(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL, "User:alice", "*", op,
                             Permission.ALLOW) for op in operations]
        return a.authorize("User:alice", "10.0.0.1", Operation.TWO_PHASE_COMMIT, ResourceType.TRANSACTIONAL_ID, "tx")

    assert not may(Operation.WRITE, Operation.DESCRIBE)
    assert may(Operation.TWO_PHASE_COMMIT) and may(Operation.ALL)
    assert AclBinding(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL, "User:alice", "*",
                      Operation.TWO_PHASE_COMMIT, Permission.ALLOW).invalid() is None
