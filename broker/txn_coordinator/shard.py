"""One ``__transaction_state`` partition's transaction coordinator, as the coordinator runtime
runs it: the transactional ids whose partition it is, and its two periodic jobs as timers
(Kafka's abortTimedOutTransactions and removeExpiredTransactionalIds), re-armed each time they
fire."""

from __future__ import annotations

from collections.abc import Callable

from broker.runtime.timer_requests import SetTimer
from broker.txn_coordinator.coordinator import (
    DEFAULT_ID_EXPIRATION_MS,
    DEFAULT_MAX_TIMEOUT_MS,
    TransactionCoordinator,
    TxnResult,
)

ABORT_EXPIRED_KEY = "abort-timed-out-transactions"
EXPIRE_IDS_KEY = "remove-expired-transactional-ids"


class TransactionCoordinatorShard(TransactionCoordinator):
    def __init__(self, partition: int, new_producer_id: Callable[[], int],
                 max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS, id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS,
                 abort_check_interval_ms: int = 10_000, id_expiry_check_interval_ms: int = 3_600_000,
                 transaction_version: int = 2) -> None:
        super().__init__(new_producer_id, max_timeout_ms, id_expiration_ms, transaction_version)
        self.partition = partition
        self.abort_check_interval_ms = abort_check_interval_ms
        self.id_expiry_check_interval_ms = id_expiry_check_interval_ms

    def on_loaded(self, now_ms: int) -> list[SetTimer]:
        return [SetTimer(ABORT_EXPIRED_KEY, now_ms + self.abort_check_interval_ms),
                SetTimer(EXPIRE_IDS_KEY, now_ms + self.id_expiry_check_interval_ms)]

    def on_timer(self, key: str, now_ms: int) -> TxnResult:
        """Aborts the transactions past their timeout, or forgets the expired transactional ids;
        either way the timer is armed again for the next check."""
        if key == ABORT_EXPIRED_KEY:
            out = self.expire(now_ms)
            out.timers.append(SetTimer(key, now_ms + self.abort_check_interval_ms))
        elif key == EXPIRE_IDS_KEY:
            out = self.expire_transactional_ids(now_ms)
            out.timers.append(SetTimer(key, now_ms + self.id_expiry_check_interval_ms))
        else:
            out = TxnResult()
        return out
