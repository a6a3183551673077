"""One reconciliation step of a member, case by case (the cases of Kafka's CurrentAssignmentBuilderTest
and those of the later rules: subscription consistency, own pending partitions, epoch validation)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from broker.coordinators.group.core.consumer.assignor_api import Assignment, TopicId
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember, MemberState
from broker.coordinators.group.core.consumer.reconcile import (
    FencedMemberEpochError,
    reconcile,
    validate_member_epoch,
)

T1 = bytes(range(16))
T2 = bytes(range(16, 32))
STABLE = MemberState.STABLE
UNREVOKED = MemberState.UNREVOKED_PARTITIONS
UNRELEASED = MemberState.UNRELEASED_PARTITIONS


def a(t1: tuple[int, ...] = (), t2: tuple[int, ...] = ()) -> Assignment:
    out: Assignment = {}
    if t1:
        out[T1] = frozenset(t1)
    if t2:
        out[T2] = frozenset(t2)
    return out


def member(
    state: MemberState, epoch: int, previous: int, assigned: Assignment, pending: Assignment | None = None
) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "member",
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned_partitions=assigned,
        partitions_pending_revocation=pending or {},
    )


def epochs(value: int) -> Callable[[TopicId, int], int]:
    return lambda _topic, _partition: value


def test_stable_member_moves_to_the_new_epoch_when_its_target_is_what_it_has() -> None:
    m = member(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, a((1, 2, 3), (4, 5, 6)), epochs(10), None)
    assert got == member(STABLE, 11, 10, a((1, 2, 3), (4, 5, 6)))


def test_stable_member_gets_free_partitions_at_once() -> None:
    m = member(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, a((1, 2, 3, 4), (4, 5, 6, 7)), epochs(-1), None)
    assert got == member(STABLE, 11, 10, a((1, 2, 3, 4), (4, 5, 6, 7)))


def test_stable_member_must_revoke_before_anything_else_and_keeps_its_epoch() -> None:
    m = member(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, a((2, 3, 4), (5, 6, 7)), epochs(-1), None)
    assert got == member(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))


def test_stable_member_waits_for_partitions_others_still_own() -> None:
    m = member(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, a((1, 2, 3, 4), (4, 5, 6, 7)), epochs(10), None)
    assert got == member(UNRELEASED, 11, 10, a((1, 2, 3), (4, 5, 6)))


def test_partition_already_revoked_by_the_client_needs_no_unrevoked_step() -> None:
    m = member(STABLE, 10, 10, a((1, 2, 3), (4, 5, 6)))
    got = reconcile(
        m,
        11,
        a((1, 2, 3), (4, 5, 7)),
        lambda topic, _p: 10 if topic == T2 else -1,
        {},  # the member reports owning nothing: partition 6 is already given up
    )
    assert got == member(UNRELEASED, 11, 10, a((1, 2, 3), (4, 5)))


def test_unrevoked_member_that_revoked_reaches_the_target() -> None:
    m = member(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    got = reconcile(m, 11, a((2, 3), (5, 6)), epochs(-1), {T1: [2, 3], T2: [5, 6]})
    assert got == member(STABLE, 11, 10, a((2, 3), (5, 6)))


@pytest.mark.parametrize(
    "owned",
    [None, {T1: [1, 2, 3], T2: [5, 6]}, {T1: [2, 3], T2: [4, 5, 6]}],
    ids=["not-reported", "still-owns-t1-1", "still-owns-t2-4"],
)
def test_unrevoked_member_stays_until_it_revokes_everything(owned: dict[TopicId, list[int]] | None) -> None:
    m = member(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    assert reconcile(m, 12, a((3,), (6,)), epochs(-1), owned) is m


def test_unrevoked_member_moves_one_epoch_and_revokes_again() -> None:
    m = member(UNREVOKED, 10, 10, a((2, 3), (5, 6)), a((1,), (4,)))
    got = reconcile(m, 12, a((3,), (6,)), epochs(-1), {T1: [2, 3], T2: [5, 6]})
    assert got == member(UNREVOKED, 11, 10, a((3,), (6,)), a((2,), (5,)))


def test_unrevoked_member_without_pending_partitions_does_not_pass_the_target_epoch() -> None:
    m = member(UNREVOKED, 11, 10, a((2, 3), (5, 6)))
    got = reconcile(m, 11, a((2, 3, 4), (5, 6, 7)), epochs(10), {T1: [2, 3], T2: [5, 6]})
    assert got == member(UNRELEASED, 11, 11, a((2, 3), (5, 6)))


def test_unreleased_member_becomes_stable_at_the_new_epoch() -> None:
    m = member(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    got = reconcile(m, 12, a((2, 3), (5, 6)), epochs(10), None)
    assert got == member(STABLE, 12, 11, a((2, 3), (5, 6)))


def test_unreleased_member_gets_the_partitions_once_released() -> None:
    m = member(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    got = reconcile(m, 11, a((2, 3, 4), (5, 6, 7)), epochs(-1), None)
    assert got == member(STABLE, 11, 11, a((2, 3, 4), (5, 6, 7)))


def test_unreleased_member_keeps_waiting_while_the_partitions_are_owned() -> None:
    m = member(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    assert reconcile(m, 11, a((2, 3, 4), (5, 6, 7)), epochs(10), None) == m


def test_unreleased_member_must_revoke_for_a_newer_target() -> None:
    m = member(UNRELEASED, 11, 11, a((2, 3), (5, 6)))
    got = reconcile(m, 12, a((3,), (6,)), epochs(10), None)
    assert got == member(UNREVOKED, 11, 11, a((3,), (6,)), a((2,), (5,)))


def test_member_in_an_unknown_state_is_fenced_unless_it_owns_nothing() -> None:
    m = member(MemberState.UNKNOWN, 11, 11, a((3,), (6,)), a((2,), (5,)))
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 12, a((3,), (6,)), epochs(10), None)
    with pytest.raises(FencedMemberEpochError):
        reconcile(m, 12, a((3,), (6,)), epochs(10), {T1: []})
    got = reconcile(m, 12, a((3,), (6,)), epochs(11), {})
    assert got == member(STABLE, 12, 11, a((3,), (6,)))


def test_member_state_values_are_the_persisted_bytes() -> None:
    assert [s.value for s in MemberState] == [0, 1, 2, 127]
    assert MemberState.from_value(2) is UNRELEASED
    assert MemberState.from_value(5) is MemberState.UNKNOWN


def test_own_partition_pending_revocation_is_not_unreleased_once_revoked() -> None:
    # The target moved partition 1 away and back: once the member stopped owning it, it is not
    # waiting on itself.
    m = member(UNREVOKED, 10, 9, a((2,)), a((1,)))
    got = reconcile(m, 12, a((1, 2)), epochs(10), {T1: [2]})
    assert got == member(STABLE, 12, 10, a((1, 2)))


def test_unsubscribed_topic_is_revoked_at_once_after_a_subscription_change() -> None:
    m = ConsumerGroupMember("member", member_epoch=10, previous_member_epoch=9, assigned_partitions=a((1, 2), (4,)))
    owned = {T1: [1, 2], T2: [4]}
    got = reconcile(m, 10, a((1, 2), (4,)), epochs(10), owned, subscribed_topics={T1}, subscription_changed=True)
    assert got == member(UNREVOKED, 10, 9, a((1, 2)), a((), (4,)))
    # Without the change flag the stable member at the target epoch is left alone.
    assert reconcile(m, 10, a((1, 2), (4,)), epochs(10), owned, subscribed_topics={T1}) is m
    # Already given up by the client: only the assignment shrinks.
    got = reconcile(m, 10, a((1, 2), (4,)), epochs(10), {T1: [1, 2]}, subscribed_topics={T1}, subscription_changed=True)
    assert got == member(STABLE, 10, 9, a((1, 2)))


def test_subscribing_to_nothing_revokes_everything() -> None:
    m = ConsumerGroupMember("member", member_epoch=10, previous_member_epoch=9, assigned_partitions=a((1,), (4,)))
    got = reconcile(m, 10, a((1,), (4,)), epochs(10), None, subscribed_topics=set(), subscription_changed=True)
    assert got == member(UNREVOKED, 10, 9, {}, a((1,), (4,)))


def test_unsubscribed_topic_is_not_assigned_from_a_stale_target() -> None:
    m = ConsumerGroupMember("member", member_epoch=10, previous_member_epoch=9, assigned_partitions=a((1,)))
    got = reconcile(m, 11, a((1,), (4,)), epochs(-1), {T1: [1]}, subscribed_topics={T1})
    assert got == member(STABLE, 11, 10, a((1,)))


def test_heartbeat_epoch_above_the_members_is_fenced() -> None:
    m = member(STABLE, 11, 10, a((1, 2)))
    with pytest.raises(FencedMemberEpochError):
        validate_member_epoch(m, 12, {T1: [1, 2]})
    validate_member_epoch(m, 11, None)


def test_previous_epoch_is_accepted_only_with_a_subset_of_the_assignment() -> None:
    m = member(STABLE, 11, 10, a((1, 2)))
    validate_member_epoch(m, 10, {T1: [1]})  # the response that bumped it was lost
    validate_member_epoch(m, 10, {})
    for owned in (None, {T1: [1, 3]}, {T2: []}):
        with pytest.raises(FencedMemberEpochError):
            validate_member_epoch(m, 10, owned)
    with pytest.raises(FencedMemberEpochError):
        validate_member_epoch(m, 9, {T1: [1]})
