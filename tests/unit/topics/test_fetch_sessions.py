"""Incremental fetch sessions (KIP-227): the cache's answers to full, incremental and closing
fetches, what an incremental answer leaves out, and which session a new one may evict."""

from __future__ import annotations

import random

from broker.topics.fetch_sessions import (
    EVICTION_MS,
    FetchContext,
    FetchSessionCache,
    Key,
    PartitionData,
    Wanted,
    next_epoch,
)
from protocol.errors import ErrorCode

V12 = 12


def want(partition: int, offset: int = 0, topic: str = "t") -> Wanted:
    return Wanted(topic, bytes(16), partition, offset, 1 << 20)


def data(partition: int, hw: int = 10, start: int = 0, records: bytes = b"", error: int = 0) -> PartitionData:
    return PartitionData(partition_index=partition, error_code=error, high_watermark=hw, last_stable_offset=hw,
                         log_start_offset=start, records=records)


def read(context: FetchContext, **changed: PartitionData) -> list[tuple[Wanted, PartitionData]]:
    """Every partition of the context read: unchanged (hw 10) unless ``changed`` names it (p0=...)."""
    return [(w, changed.get(f"p{w.partition}", data(w.partition))) for w in context.partitions]


def opened(cache: FetchSessionCache, partitions: int = 3, now: int = 0) -> int:
    context = cache.open(V12, 0, 0, [want(p) for p in range(partitions)], [], now)
    answer = cache.answer(context, read(context), now)
    assert answer.session_id != 0 and len(answer.partitions) == partitions
    return answer.session_id


def incremental(cache: FetchSessionCache, session_id: int, epoch: int, wanted: list[Wanted] | None = None,
                forgotten: list[Key] | None = None, now: int = 1, **changed: PartitionData) -> tuple[int, int, list[int]]:
    """(error, session id, partitions answered) of one incremental fetch."""
    context = cache.open(V12, session_id, epoch, wanted or [], forgotten or [], now)
    answer = cache.answer(context, read(context, **changed), now)
    return answer.error, answer.session_id, [w.partition for w, _ in answer.partitions]


def test_epochs_count_from_1_and_wrap_to_1() -> None:
    assert [next_epoch(0), next_epoch(1), next_epoch(2**31 - 1), next_epoch(-1)] == [1, 2, 1, -1]


def test_an_incremental_fetch_answers_only_what_changed() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache)
    # Nothing new: an empty answer, the session goes on.
    assert incremental(cache, sid, 1) == (0, sid, [])
    # Records on 1, the high watermark of 2 moved: those two.
    assert incremental(cache, sid, 2, p1=data(1, records=b"x"), p2=data(2, hw=11)) == (0, sid, [1, 2])
    # The moved high watermark was told: not again; the log start of 0 moved.
    assert incremental(cache, sid, 3, p2=data(2, hw=11), p0=data(0, start=5)) == (0, sid, [0])


def test_a_partition_with_records_moves_to_the_end_of_the_session() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache)
    incremental(cache, sid, 1, p0=data(0, records=b"x"))
    context = cache.open(V12, sid, 2, [], [], 2)
    assert [w.partition for w in context.partitions] == [1, 2, 0]


def test_errors_are_answered_every_time_and_their_end_is_told() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache)
    gone = data(1, hw=-1, start=-1, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert incremental(cache, sid, 1, p1=gone) == (0, sid, [1])
    assert incremental(cache, sid, 2, p1=gone) == (0, sid, [1])
    # Served again with the same offsets as before the error: still told.
    assert incremental(cache, sid, 3) == (0, sid, [1])
    assert incremental(cache, sid, 4) == (0, sid, [])


def test_the_request_updates_offsets_adds_and_forgets_partitions() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache)
    context = cache.open(V12, sid, 1, [want(1, offset=7), want(3)], [("t", 0)], 1)
    assert [(w.partition, w.fetch_offset) for w in context.partitions] == [(1, 7), (2, 0), (3, 0)]
    # The added partition is answered (the client has been told nothing of it).
    assert [w.partition for w, _ in cache.answer(context, read(context), 1).partitions] == [3]


def test_forgetting_every_partition_ends_the_session() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache, partitions=1)
    assert incremental(cache, sid, 1, forgotten=[("t", 0)]) == (0, 0, [])
    assert sid not in cache.sessions


def test_session_errors() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache)
    assert incremental(cache, sid + 1, 1)[:2] == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert incremental(cache, sid, 5)[:2] == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    context = cache.open(13, sid, 1, [], [], 1)
    assert cache.answer(context, [], 1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # None of those moved the session on.
    assert incremental(cache, sid, 1) == (0, sid, [])


def test_a_fetch_that_waited_while_another_used_the_session_is_refused() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache)
    waiting = cache.open(V12, sid, 1, [], [], 1)
    assert incremental(cache, sid, 2) == (0, sid, [])  # a duplicate the client sent meanwhile
    answer = cache.answer(waiting, read(waiting), 2)
    assert (answer.error, answer.session_id, answer.partitions) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid, [])


def test_full_fetches_close_the_session_they_name() -> None:
    cache = FetchSessionCache(10)
    sid = opened(cache)
    context = cache.open(V12, sid, -1, [want(0)], [], 1)
    answer = cache.answer(context, read(context), 1)
    assert answer.session_id == 0 and [w.partition for w, _ in answer.partitions] == [0]
    assert cache.sessions == {}
    again = opened(cache)
    assert opened(cache) != again and len(cache.sessions) == 2
    # Epoch 0 naming a session: that one closes, a new one opens.
    context = cache.open(V12, again, 0, [want(0)], [], 2)
    renewed = cache.answer(context, read(context), 2).session_id
    assert again not in cache.sessions and renewed in cache.sessions


def test_old_versions_and_epoch_minus_1_never_open_a_session() -> None:
    cache = FetchSessionCache(10)
    for version, epoch in ((6, 0), (V12, -1)):
        context = cache.open(version, 0, epoch, [want(0)], [], 0)
        assert cache.answer(context, read(context), 0).session_id == 0
    assert cache.sessions == {}


def test_a_full_cache_evicts_a_stale_session_then_a_smaller_old_one() -> None:
    cache = FetchSessionCache(2, random.Random(1))
    first = opened(cache, partitions=2, now=0)
    second = opened(cache, partitions=3, now=1000)
    # Both recently used and too young to be evicted: no session for the third consumer.
    context = cache.open(V12, 0, 0, [want(p) for p in range(5)], [], 2000)
    assert cache.answer(context, read(context), 2000).session_id == 0
    # The first idle for longer than the eviction time: its slot is taken.
    later = EVICTION_MS + 5000
    incremental(cache, second, 1, now=later)
    third = opened(cache, partitions=1, now=later + 1)
    assert set(cache.sessions) == {second, third} and cache.evictions == 1
    # Both in use, the second old enough to be evicted (touched after its first two minutes):
    # a session of 4 partitions takes the slot of the second (3), not one of 1 partition.
    incremental(cache, second, 2, now=later + 2)
    incremental(cache, third, 1, now=later + 2)
    fourth = opened(cache, partitions=4, now=later + 3)
    assert set(cache.sessions) == {third, fourth} and cache.evictions == 2
    assert first not in cache.sessions


def test_no_slots_no_sessions() -> None:
    cache = FetchSessionCache(0)
    context = cache.open(V12, 0, 0, [want(0)], [], 0)
    assert cache.answer(context, read(context), 0).session_id == 0


def test_sessions_of_topic_ids_key_partitions_by_id() -> None:
    cache = FetchSessionCache(10)
    a, b = Wanted("", b"a" * 16, 0, 0, 100), Wanted("", b"b" * 16, 0, 0, 100)
    context = cache.open(13, 0, 0, [a, b], [], 0)
    sid = cache.answer(context, read(context), 0).session_id
    context = cache.open(13, sid, 1, [], [(b"a" * 16, 0)], 1)
    assert [w.topic_id for w in context.partitions] == [b"b" * 16]
    context = cache.open(V12, sid, 2, [], [], 1)
    assert cache.answer(context, [], 1).error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
