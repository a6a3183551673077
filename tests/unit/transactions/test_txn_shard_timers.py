"""A ``__transaction_state`` partition's shard arms its two periodic checks at load and re-arms
each when it fires: the abort of transactions past their timeout, the expiry of idle ids."""

from __future__ import annotations

import itertools

from broker.runtime.timer_requests import SetTimer
from broker.txn_coordinator.metadata import TxnState
from broker.txn_coordinator.shard import ABORT_EXPIRED_KEY, EXPIRE_IDS_KEY, TransactionCoordinatorShard

NOW = 1_000_000


def shard() -> TransactionCoordinatorShard:
    ids = itertools.count(100)
    return TransactionCoordinatorShard(0, lambda: next(ids), 900_000, id_expiration_ms=60_000,
                                       abort_check_interval_ms=10_000, id_expiry_check_interval_ms=3_600_000)


def test_both_checks_are_armed_at_load() -> None:
    assert shard().on_loaded(NOW) == [SetTimer(ABORT_EXPIRED_KEY, NOW + 10_000),
                                      SetTimer(EXPIRE_IDS_KEY, NOW + 3_600_000)]


def test_the_abort_check_aborts_a_timed_out_transaction_and_comes_back() -> None:
    s = shard()
    init = s.init_producer_id("t", 1_000, -1, -1, NOW)
    s.add_partitions("t", init.producer_id, init.producer_epoch, [("topic", 0)], NOW)
    early = s.on_timer(ABORT_EXPIRED_KEY, NOW + 500)
    assert early.records == [] and early.markers == []
    assert early.timers == [SetTimer(ABORT_EXPIRED_KEY, NOW + 10_500)]
    late = s.on_timer(ABORT_EXPIRED_KEY, NOW + 1_001)
    assert [job.transactional_id for job in late.markers] == ["t"] and not late.markers[0].commit
    assert s.txns["t"].state is TxnState.PREPARE_ABORT and late.records
    assert late.timers == [SetTimer(ABORT_EXPIRED_KEY, NOW + 11_001)]


def test_the_id_check_forgets_idle_ids_and_comes_back() -> None:
    s = shard()
    s.init_producer_id("t", 1_000, -1, -1, NOW)
    result = s.on_timer(EXPIRE_IDS_KEY, NOW + 60_000)
    assert [r.transactional_id for r in result.records] == ["t"] and "t" not in s.txns
    assert result.timers == [SetTimer(EXPIRE_IDS_KEY, NOW + 3_660_000)]
