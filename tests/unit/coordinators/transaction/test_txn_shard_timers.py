"""A ``__transaction_state`` partition's shard arms a timeout timer for each transaction as it
begins (and, at load, for each the log left open), which aborts the transaction if it is still open
when it fires; and the periodic expiry of idle transactional ids, re-armed each time."""

from __future__ import annotations

import itertools

from broker.coordinators.transaction.core.coordinator import TIMEOUT_KEY
from broker.coordinators.transaction.core.metadata import TxnState
from broker.coordinators.transaction.core.shard import EXPIRE_IDS_KEY, TransactionCoordinatorShard
from broker.runtime.timer_requests import SetTimer

NOW = 1_000_000


def shard() -> TransactionCoordinatorShard:
    ids = itertools.count(100)
    return TransactionCoordinatorShard(0, lambda: next(ids), 900_000, id_expiration_ms=60_000,
                                       id_expiry_check_interval_ms=3_600_000)


def test_the_id_check_is_armed_at_load_with_a_timer_per_open_transaction() -> None:
    assert shard().on_loaded(NOW) == [SetTimer(EXPIRE_IDS_KEY, NOW + 3_600_000)]
    s = shard()
    init = s.init_producer_id("t", 1_000, -1, -1, NOW)
    s.add_partitions("t", init.producer_id, init.producer_epoch, [("topic", 0)], NOW)
    assert s.on_loaded(NOW + 10) == [SetTimer(TIMEOUT_KEY + "t", NOW + 1_000),
                                     SetTimer(EXPIRE_IDS_KEY, NOW + 3_600_010)]


def test_a_transaction_is_aborted_when_its_own_timer_fires_if_still_open() -> None:
    s = shard()
    init = s.init_producer_id("t", 1_000, -1, -1, NOW)
    added = s.add_partitions("t", init.producer_id, init.producer_epoch, [("topic", 0)], NOW)
    assert added.timers == [SetTimer(TIMEOUT_KEY + "t", NOW + 1_000)]
    # More partitions in the same transaction arm nothing new.
    more = s.add_partitions("t", init.producer_id, init.producer_epoch, [("topic", 1)], NOW + 5)
    assert more.timers == []
    # The timer elapsed on the steady clock: whatever the wall clock says, the transaction is due.
    fired = s.on_timer(TIMEOUT_KEY + "t", NOW - 60_000)
    assert [job.transactional_id for job in fired.markers] == ["t"] and not fired.markers[0].commit
    assert s.txns["t"].state is TxnState.PREPARE_ABORT and fired.records
    # A timer of a transaction that ended meanwhile does nothing.
    again = s.on_timer(TIMEOUT_KEY + "t", NOW + 2_000)
    assert again.records == [] and again.markers == []


def test_the_id_check_forgets_idle_ids_and_comes_back() -> None:
    s = shard()
    s.init_producer_id("t", 1_000, -1, -1, NOW)
    result = s.on_timer(EXPIRE_IDS_KEY, NOW + 60_000)
    assert [r.transactional_id for r in result.records] == ["t"] and "t" not in s.txns
    assert result.timers == [SetTimer(EXPIRE_IDS_KEY, NOW + 3_660_000)]
