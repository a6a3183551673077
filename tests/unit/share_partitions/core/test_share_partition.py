"""The pure share partition: acquisition, acknowledgement, release, lock expiry, the delivery
limit, the in-flight cap, and its durable snapshot."""

from __future__ import annotations

from broker.share_partitions.core import records
from broker.share_partitions.core.partition import (
    ACCEPT,
    ARCHIVED,
    REJECT,
    RELEASE,
    Acquired,
    BatchRange,
    Limits,
    SharePartition,
)
from protocol.errors import ErrorCode
from protocol.payloads import share_state_records
from protocol.payloads.share_state_records import SNAPSHOT, ShareStateRecord

L = Limits(lock_ms=1000, delivery_limit=3, max_in_flight=100)
B = [BatchRange(0, 9, False)]


def fresh() -> SharePartition:
    sp = SharePartition()
    sp.initialize(0)
    return sp


def test_two_members_never_get_the_same_record() -> None:
    sp = fresh()
    a = sp.acquire("a", B, 10, 4, 0, L)
    b = sp.acquire("b", B, 10, 100, 0, L)
    assert a == [Acquired(0, 3, 1)] and b == [Acquired(4, 9, 1)]
    assert sp.acquire("c", B, 10, 100, 0, L) == []


def test_accept_moves_start_release_redelivers_counted_reject_never() -> None:
    sp = fresh()
    sp.acquire("a", B, 10, 3, 0, L)
    assert sp.acknowledge("a", 0, 2, [ACCEPT, RELEASE, REJECT], L) == 0
    assert sp.start_offset == 1
    assert sp.acquire("b", B, 10, 1, 0, L) == [Acquired(1, 1, 2)]
    assert sp.acquire("b", B, 10, 1, 0, L) == [Acquired(3, 3, 1)]  # 2 was rejected


def test_only_the_holder_acknowledges() -> None:
    sp = fresh()
    sp.acquire("a", B, 10, 2, 0, L)
    assert sp.acknowledge("b", 0, 1, [ACCEPT], L) == ErrorCode.INVALID_RECORD_STATE
    assert sp.acknowledge("a", 0, 0, [ACCEPT], L) == 0
    assert sp.acknowledge("a", 0, 0, [ACCEPT], L) == 0  # below the start offset: done, no error (as Kafka)
    assert sp.acknowledge("a", 1, 2, [ACCEPT], L) == ErrorCode.INVALID_RECORD_STATE  # 2 was never acquired


def test_lock_expiry_and_delivery_limit_archive_a_poison_record() -> None:
    sp = fresh()
    for attempt in range(1, 4):
        got = sp.acquire("a", B, 10, 1, attempt * 5000, L)
        assert got == [Acquired(0, 0, attempt)]
        assert sp.expire(attempt * 5000 + 1000, L) == 1
    assert sp.start_offset == 1  # archived after the third delivery
    assert sp.acquire("a", B, 10, 1, 99999, L) == [Acquired(1, 1, 1)]


def test_member_leaving_releases_its_records() -> None:
    sp = fresh()
    sp.acquire("a", B, 10, 5, 0, L)
    assert sp.release_member("a", L)
    assert sp.acquire("b", B, 10, 5, 0, L) == [Acquired(0, 4, 2)]


def test_in_flight_cap_and_control_batches() -> None:
    sp = fresh()
    got = sp.acquire("a", [BatchRange(0, 0, True), BatchRange(1, 9, False)], 10, 100, 0,
                     Limits(max_in_flight=3))
    assert got == [Acquired(1, 3, 1)]
    assert sp.start_offset == 1


def test_snapshot_round_trip_keeps_outcomes_and_frees_acquired() -> None:
    sp = fresh()
    sp.acquire("a", B, 10, 6, 0, L)
    sp.acknowledge("a", 0, 3, [ACCEPT, REJECT, RELEASE, ACCEPT], L)
    value = records.snapshot(sp, 1, 1, 5, 1)
    key, data = share_state_records.encode(ShareStateRecord(SNAPSHOT, "g", b"t" * 16, 0, value))
    decoded = share_state_records.decode(key, data)
    assert decoded is not None and decoded.group == "g" and decoded.partition == 0
    back = records.load(decoded.value)
    assert back.start_offset == 2
    assert back.records[1].state == ARCHIVED if 1 in back.records else True
    got = back.acquire("b", B, 10, 100, 0, L)
    # 2 (released) and 4, 5 (acquired when written) come back with their counts; 3 is done.
    assert got == [Acquired(2, 2, 2), Acquired(4, 5, 2), Acquired(6, 9, 1)]


def test_aborted_transaction_records_are_archived_not_delivered() -> None:
    """read_committed: the shell marks an aborted transaction's batch; its records and the
    marker are archived, the committed records around them delivered."""
    sp = fresh()
    batches = [BatchRange(0, 1, False), BatchRange(2, 4, False, aborted=True), BatchRange(5, 5, True),
               BatchRange(6, 6, False)]
    assert sp.acquire("a", batches, 7, 100, 0, L) == [Acquired(0, 1, 1), Acquired(6, 6, 1)]
    assert sp.acknowledge("a", 0, 1, [ACCEPT], L) == ErrorCode.NONE
    assert sp.acknowledge("a", 6, 6, [ACCEPT], L) == ErrorCode.NONE
    assert sp.start_offset == 7 and not sp.records


def test_records_rejected_or_at_the_limit_become_dead_letters_only_with_a_queue() -> None:
    """With a queue, such records are ARCHIVING (never delivered again, holding the start offset)
    until the shell has written their dead letters and calls ``archive``."""
    from broker.share_partitions.core.partition import (
        ARCHIVED,
        ARCHIVING,
        CLIENT_REJECT,
        DELIVERY_COUNT_EXCEEDED,
        DeadLetter,
    )

    with_queue = Limits(lock_ms=1000, delivery_limit=2, max_in_flight=100, dead_letters=True)
    for limits, expect in ((L, False), (with_queue, True)):
        sp = fresh()
        sp.acquire("a", B, 10, 3, 0, limits)  # 0, 1, 2
        assert sp.acknowledge("a", 0, 2, [ACCEPT, REJECT, RELEASE], limits) == ErrorCode.NONE
        sp.acquire("a", B, 10, 1, 0, limits)  # 2 again (its second delivery)
        sp.expire(5000, limits)  # its lock expires: the limit (2 with the queue, 3 without)
        letters = sp.take_dead_letters()
        if expect:
            assert letters == [DeadLetter(1, 1, CLIENT_REJECT), DeadLetter(2, 2, DELIVERY_COUNT_EXCEEDED)]
            assert [sp.records[o].state for o in (1, 2)] == [ARCHIVING, ARCHIVING] and sp.start_offset == 1
            assert sp.acquire("b", B, 10, 5, 0, limits) == [Acquired(3, 7, 1)]  # never delivered again
            sp.changed.clear()
            state = sp.records[1]
            assert sp.archive([1]) and sp.changed == {1} and state.state == ARCHIVED
            assert sp.start_offset == 2  # past 1; 2 is still ARCHIVING and holds it
            assert sp.archive([2, 2]) and sp.start_offset == 3
            assert not sp.archive([2])
        else:
            assert letters == []
            assert sp.records.get(1) is None and sp.start_offset == 2  # rejected: archived at once
        assert sp.take_dead_letters() == []


def test_records_left_archiving_are_noted_again_when_loaded() -> None:
    """A node stopped between the two phases: whoever loads the state writes the dead letters
    (again), the reason told by the delivery count."""
    from broker.share_partitions.core.partition import (
        ARCHIVING,
        AVAILABLE,
        CLIENT_REJECT,
        DELIVERY_COUNT_EXCEEDED,
        DeadLetter,
    )
    from broker.share_partitions.service.manager import from_state
    from protocol.messages.read_share_group_state import ReadShareGroupStateResponse

    B_ = ReadShareGroupStateResponse.ReadStateResult.PartitionResult.StateBatch
    sp = from_state(10, [B_(first_offset=10, last_offset=10, delivery_state=ARCHIVING, delivery_count=1),
                         B_(first_offset=11, last_offset=12, delivery_state=ARCHIVING, delivery_count=3),
                         B_(first_offset=13, last_offset=13, delivery_state=AVAILABLE, delivery_count=1)])
    assert sp.start_offset == 10
    sp.resume_archiving(delivery_limit=3)
    sp.resume_archiving(delivery_limit=3)  # noted once
    assert sp.take_dead_letters() == [DeadLetter(10, 1, CLIENT_REJECT), DeadLetter(11, 3, DELIVERY_COUNT_EXCEEDED),
                                      DeadLetter(12, 3, DELIVERY_COUNT_EXCEEDED)]
    assert sp.archive([10, 11, 12]) and sp.start_offset == 13


def test_renew_is_refused_when_the_group_disables_it() -> None:
    from broker.share_partitions.core.partition import RENEW

    for renew, expect in ((True, ErrorCode.NONE), (False, ErrorCode.INVALID_RECORD_STATE)):
        limits = Limits(lock_ms=1000, delivery_limit=3, max_in_flight=100, renew=renew)
        sp = fresh()
        sp.acquire("a", B, 10, 2, 0, limits)
        assert sp.acknowledge("a", 0, 1, [ACCEPT, RENEW], limits, now_ms=500) == expect
        # Refused, nothing of the acknowledgement is applied: offset 0 is still acquired.
        assert (sp.start_offset == 1) == (expect == ErrorCode.NONE)
        assert sp.records[1].deadline_ms == (1500 if renew else 1000)
