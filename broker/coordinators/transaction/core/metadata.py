"""One transactional id's metadata, as Kafka's TransactionMetadata keeps it, and its record form."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from protocol.messages.transaction_log import TransactionLogValue
from protocol.payloads.transaction_log_records import TransactionRecord

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka rotates the producer id before the epoch reaches Short.MaxValue (the last one is kept
# for fencing: TransactionMetadata.isEpochExhausted).
MAX_PRODUCER_EPOCH = 32766
# A two-phase commit participant's transaction (KIP-939) has no timeout: Kafka stores
# Integer.MAX_VALUE as its timeout and tells such a transaction by that value alone
# (TransactionMetadata.isDistributedTwoPhaseCommitTxn), so a log replayed knows it too.
TWO_PHASE_TIMEOUT_MS = 2_147_483_647

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """Kafka's TransactionState ids, as ``transaction_status`` holds them."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        for state, text in _NAMES.items():
            if text == name:
                return state
        return None


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETED = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    # The epoch before the last bump: a retried InitProducerId (KIP-360) that names it is answered
    # with the current epoch instead of being fenced. Not persisted, as in Kafka.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    # Transactions version 2: the producer id the transaction continues under once it completes
    # (allocated when the epoch is exhausted), and the protocol its client speaks (0 or 2).
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @property
    def two_phase(self) -> bool:
        """A transaction of a two-phase commit participant: never timed out by the coordinator."""
        return self.timeout_ms == TWO_PHASE_TIMEOUT_MS

    def to_record(self, version: int = 0) -> TransactionRecord:
        """The record of this metadata, its value at ``version`` (1: the flexible one, with the
        previous and next producer ids and the client's transaction version)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        # Kafka writes no partitions (null) for Empty and the Complete states.
        partitions = None if self.state in COMPLETED else [
            TransactionLogValue.PartitionsSchema(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
        value = TransactionLogValue(
            producer_id=self.producer_id, previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            producer_epoch=self.producer_epoch, transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state), transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.start_ms,
            client_transaction_version=self.client_transaction_version,
        )
        return TransactionRecord(self.transactional_id, value, version)

    @classmethod
    def from_record(cls, record: TransactionRecord) -> TxnMetadata:
        v = record.value
        assert v is not None
        partitions = {(p.topic, i) for p in (v.transaction_partitions or []) for i in p.partition_ids}
        return cls(record.transactional_id, v.producer_id, v.producer_epoch, NO_PRODUCER_EPOCH,
                   v.previous_producer_id, v.transaction_timeout_ms, TxnState(v.transaction_status), partitions,
                   v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms,
                   v.next_producer_id, v.client_transaction_version)
