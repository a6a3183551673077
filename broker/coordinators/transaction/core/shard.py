"""One ``__transaction_state`` partition's transaction coordinator, as the coordinator runtime
runs it: the transactional ids whose partition it is, a timer per open transaction that aborts it at
its timeout (Kafka's abortTimedOutTransactions, which scans every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``), and the expiry of transactional
ids (Kafka's removeExpiredTransactionalIds), re-armed each time it fires."""

from __future__ import annotations

from collections.abc import Callable

from broker.coordinators.transaction.core.coordinator import (
    DEFAULT_ID_EXPIRATION_MS,
    DEFAULT_MAX_TIMEOUT_MS,
    TIMEOUT_KEY,
    TransactionCoordinator,
    TxnResult,
)
from broker.runtime.timer_requests import SetTimer

EXPIRE_IDS_KEY = "remove-expired-transactional-ids"


class TransactionCoordinatorShard(TransactionCoordinator):
    def __init__(self, partition: int, new_producer_id: Callable[[], int],
                 max_timeout_ms: int = DEFAULT_MAX_TIMEOUT_MS, id_expiration_ms: int = DEFAULT_ID_EXPIRATION_MS,
                 id_expiry_check_interval_ms: int = 3_600_000, transaction_version: int = 2, *,
                 two_phase_commit: bool = False) -> None:
        super().__init__(new_producer_id, max_timeout_ms, id_expiration_ms, transaction_version,
                         two_phase_commit=two_phase_commit)
        self.partition = partition
        self.id_expiry_check_interval_ms = id_expiry_check_interval_ms

    def on_loaded(self, now_ms: int) -> list[SetTimer]:
        return [*self.timeout_timers(), SetTimer(EXPIRE_IDS_KEY, now_ms + self.id_expiry_check_interval_ms)]

    def on_timer(self, key: str, now_ms: int) -> TxnResult:
        """Aborts a transaction past its timeout, or forgets the expired transactional ids (and
        arms that timer again for the next check)."""
        if key.startswith(TIMEOUT_KEY):
            out = self.time_out(key[len(TIMEOUT_KEY):], now_ms)
        elif key == EXPIRE_IDS_KEY:
            out = self.expire_transactional_ids(now_ms)
            out.timers.append(SetTimer(key, now_ms + self.id_expiry_check_interval_ms))
        else:
            out = TxnResult()
        return out
