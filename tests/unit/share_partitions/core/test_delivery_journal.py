"""A share partition's trouble with deliveries (records archived at the delivery limit, locks that
expired) is gathered per round and becomes at most two journal events per share partition."""

from __future__ import annotations

import json

from broker.share_partitions.core.journal import delivery_events, offset_ranges
from broker.share_partitions.core.partition import (
    ACCEPT,
    RELEASE,
    BatchRange,
    Limits,
    SharePartition,
)
from protocol.group_events import DELIVERY_LIMIT, LOCK_EXPIRED, encode_event

LIMITS = Limits(lock_ms=1000, delivery_limit=2)


def fresh(records: int = 5) -> SharePartition:
    sp = SharePartition()
    sp.initialize(0)
    return sp


def acquire(sp: SharePartition, member: str, now: int, n: int = 5) -> None:
    assert sp.acquire(member, [BatchRange(0, n - 1, False)], n, n, now, LIMITS)


def test_offset_ranges_merge_runs_and_stop_at_the_limit() -> None:
    assert offset_ranges([5, 3, 4, 9, 10, 12]) == [[3, 5], [9, 10], [12, 12]]
    assert offset_ranges(list(range(0, 20, 2)), limit=3) == [[0, 0], [2, 2], [4, 4]]
    assert offset_ranges([]) == []


def test_nothing_to_report_without_trouble() -> None:
    sp = fresh()
    acquire(sp, "m", 0)
    assert sp.acknowledge("m", 0, 4, [ACCEPT], LIMITS) == 0
    assert sp.take_trouble() is None


def test_released_to_the_limit_is_archived_and_reported_once() -> None:
    sp = fresh()
    acquire(sp, "m", 0)
    assert sp.acknowledge("m", 0, 4, [RELEASE], LIMITS) == 0
    assert sp.take_trouble() is None  # delivered once, available again
    acquire(sp, "m", 10)
    # Offsets 1 and 2 are accepted, the rest released a second time: archived at the limit.
    assert sp.acknowledge("m", 0, 4, [RELEASE, ACCEPT, ACCEPT, RELEASE, RELEASE], LIMITS) == 0
    trouble = sp.take_trouble()
    assert trouble is not None and trouble.archived == 3 and trouble.archived_offsets == [0, 3, 4]
    assert trouble.archived_via == {"released": 3} and trouble.members == {"m": 3}
    assert sp.take_trouble() is None and sp.start_offset == 5
    [event] = delivery_events("g", "t", 0, trouble, LIMITS, 20, 7, "Stable")
    assert event.kind == "delivery" and event.cause == DELIVERY_LIMIT and event.group_type == "share"
    assert event.member_id == "m" and event.generation == 7
    assert event.detail["offsets"] == [[0, 0], [3, 4]] and event.detail["records"] == 3
    assert event.detail["delivery_limit"] == 2 and event.detail["released_by"] == {"released": 3}
    doc = json.loads(encode_event(event)[1])
    assert doc["topic"] == "t" and doc["partition"] == 0 and doc["cause"] == "delivery-limit-reached"


def test_expired_locks_are_reported_and_archive_at_the_limit() -> None:
    sp = fresh()
    acquire(sp, "slow", 0)
    assert sp.expire(1000, LIMITS) == 5
    first = sp.take_trouble()
    assert first is not None and first.expired == 5 and first.archived == 0
    [event] = delivery_events("g", "t", 3, first, LIMITS, 1000)
    assert event.cause == LOCK_EXPIRED and event.detail["offsets"] == [[0, 4]]
    assert event.detail["lock_duration_ms"] == 1000 and event.detail["members"] == ["slow"]
    acquire(sp, "a", 2000, 2)  # two records to another member ...
    assert sp.acquire("b", [BatchRange(0, 4, False)], 5, 5, 2000, LIMITS)  # ... the rest to a third
    assert sp.expire(3000, LIMITS) == 5
    second = sp.take_trouble()
    assert second is not None and second.expired == 5 and second.archived == 5
    assert second.archived_via == {"lock-expired": 5}
    expired, archived = delivery_events("g", "t", 3, second, LIMITS, 3000)
    assert (expired.cause, archived.cause) == (LOCK_EXPIRED, DELIVERY_LIMIT)
    # Two members held them: the event names both (most records first) and no single member.
    assert archived.member_id is None and archived.detail["members"] == ["b", "a"]


def test_a_gone_members_records_at_the_limit_are_archived() -> None:
    sp = fresh()
    acquire(sp, "m", 0)
    sp.release_member("m", LIMITS)
    acquire(sp, "m", 0)
    sp.release_member("m", LIMITS)
    trouble = sp.take_trouble()
    assert trouble is not None and trouble.archived == 5 and trouble.archived_via == {"member-gone": 5}
