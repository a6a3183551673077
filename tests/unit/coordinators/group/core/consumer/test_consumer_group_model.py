"""The consumer group rebuilt from its records: epochs, owners of partitions, subscriptions, static
members, the group state and the checks made while replaying."""

from __future__ import annotations

import pytest

from broker.coordinators.group.core.consumer.group import ConsumerGroup, ConsumerGroupState, IllegalStateError
from broker.coordinators.group.core.consumer.member import (
    MemberCurrentAssignment,
    MemberMetadata,
    MemberState,
)

T = b"t" * 16
U = b"u" * 16


def current(epoch: int, assigned: dict[bytes, frozenset[int]], pending: dict[bytes, frozenset[int]] | None = None,
            state: MemberState = MemberState.STABLE, previous: int | None = None) -> MemberCurrentAssignment:
    return MemberCurrentAssignment(
        member_epoch=epoch,
        previous_member_epoch=epoch - 1 if previous is None else previous,
        state=state,
        assigned_partitions=assigned,
        partitions_pending_revocation=pending or {},
    )


def joined(group: ConsumerGroup, member_id: str, topics: frozenset[str] = frozenset({"t"}), **kw: object) -> None:
    group.update_member_metadata(member_id, MemberMetadata(subscribed_topic_names=topics, **kw))  # type: ignore[arg-type]


def remove(group: ConsumerGroup, member_id: str) -> None:
    group.clear_member_current_assignment(member_id)
    group.remove_target_assignment(member_id)
    group.remove_member(member_id)


def test_group_state_follows_kafkas_rule() -> None:
    g = ConsumerGroup("g")
    assert g.state is ConsumerGroupState.EMPTY
    joined(g, "a")
    g.set_group_epoch(1)
    assert g.state is ConsumerGroupState.ASSIGNING
    g.update_target_assignment("a", {T: frozenset({0, 1})})
    g.set_target_assignment_epoch(1)
    assert g.state is ConsumerGroupState.RECONCILING  # member still at epoch 0
    g.update_member_current_assignment("a", current(1, {T: frozenset({0, 1})}))
    assert g.state is ConsumerGroupState.STABLE
    g.update_member_current_assignment("a", current(1, {T: frozenset({0})}, state=MemberState.UNRELEASED_PARTITIONS))
    assert g.state is ConsumerGroupState.RECONCILING
    assert g.state.value == "Reconciling"


def test_owner_epoch_tracks_assigned_and_pending_partitions() -> None:
    g = ConsumerGroup("g")
    joined(g, "a")
    g.update_member_current_assignment(
        "a", current(3, {T: frozenset({0})}, {T: frozenset({1})}, MemberState.UNREVOKED_PARTITIONS)
    )
    assert (g.owner_epoch(T, 0), g.owner_epoch(T, 1), g.owner_epoch(T, 2), g.owner_epoch(U, 0)) == (3, 3, -1, -1)
    assert g.partitions_pending_revocation() == {"a": {T: frozenset({1})}}
    g.update_member_current_assignment("a", current(4, {T: frozenset({0})}))
    assert (g.owner_epoch(T, 0), g.owner_epoch(T, 1)) == (4, -1)
    g.clear_member_current_assignment("a")
    assert g.owner_epoch(T, 0) == -1
    assert g.member("a").member_epoch == -1  # type: ignore[union-attr]


def test_a_partition_owned_twice_is_refused_and_leaves_the_group_unchanged() -> None:
    g = ConsumerGroup("g")
    joined(g, "a")
    joined(g, "b")
    g.update_member_current_assignment("a", current(2, {T: frozenset({0, 1})}))
    before = g.member("b")
    with pytest.raises(IllegalStateError):
        g.update_member_current_assignment("b", current(2, {T: frozenset({1, 2})}))
    assert g.member("b") == before
    assert (g.owner_epoch(T, 1), g.owner_epoch(T, 2)) == (2, -1)
    with pytest.raises(IllegalStateError):  # assigned and pending at once
        g.update_member_current_assignment("b", current(2, {T: frozenset({5})}, {T: frozenset({5})}))
    assert g.owner_epoch(T, 5) == -1


def test_member_tombstone_requires_its_assignments_deleted_first() -> None:
    g = ConsumerGroup("g")
    joined(g, "a")
    g.update_target_assignment("a", {T: frozenset({0})})
    g.update_member_current_assignment("a", current(1, {T: frozenset({0})}))
    with pytest.raises(IllegalStateError):
        g.remove_member("a")
    g.clear_member_current_assignment("a")
    with pytest.raises(IllegalStateError):
        g.remove_member("a")
    g.remove_target_assignment("a")
    g.remove_member("a")
    assert dict(g.members) == {}
    g.remove_member("a")  # a tombstone for an unknown member is ignored


def test_group_tombstone_requires_everything_else_deleted() -> None:
    g = ConsumerGroup("g")
    joined(g, "a")
    g.update_target_assignment("a", {})
    g.set_target_assignment_epoch(1)
    with pytest.raises(IllegalStateError):
        g.check_deletable()
    with pytest.raises(IllegalStateError):
        g.clear_target_assignment_epoch()
    remove(g, "a")
    with pytest.raises(IllegalStateError):
        g.check_deletable()
    g.clear_target_assignment_epoch()
    g.check_deletable()


def test_subscribed_topic_counts_include_resolved_regexes() -> None:
    g = ConsumerGroup("g")
    joined(g, "a", frozenset({"t", "u"}))
    joined(g, "b", frozenset({"t"}))
    joined(g, "c", frozenset(), subscribed_topic_regex="v.*")
    assert g.subscribed_topic_names() == {"t": 2, "u": 1}
    assert not g.is_subscribed_to_topic("v1")
    g.set_resolved_regex("v.*", frozenset({"v1", "t"}))
    assert g.subscribed_topic_names() == {"t": 3, "u": 1, "v1": 1}
    assert g.is_subscribed_to_topic("v1")
    joined(g, "a", frozenset({"t"}))
    remove(g, "c")
    assert g.subscribed_topic_names() == {"t": 2}
    assert not g.is_subscribed_to_topic("u")


def test_static_member_index_and_replacement() -> None:
    g = ConsumerGroup("g")
    joined(g, "a", instance_id="i1")
    g.update_target_assignment("a", {T: frozenset({0})})
    assert g.static_member_id("i1") == "a"
    assert g.member_target("new", "i1") == {T: frozenset({0})}
    assert g.member_target("new", "i2") == {}
    # Replacement as Kafka writes it: the old member's tombstones, then the new member's records.
    remove(g, "a")
    joined(g, "b", instance_id="i1")
    g.update_target_assignment("b", {T: frozenset({0})})
    assert g.static_member_id("i1") == "b"
    assert dict(g.static_members) == {"i1": "b"}


def test_preferred_server_assignor_is_the_most_asked_for() -> None:
    g = ConsumerGroup("g")
    assert g.preferred_server_assignor() is None
    joined(g, "a", server_assignor_name="range")
    joined(g, "b", server_assignor_name="uniform")
    joined(g, "c", server_assignor_name="uniform")
    assert g.preferred_server_assignor() == "uniform"
    remove(g, "c")
    assert g.preferred_server_assignor() == "range"  # a tie goes to the first name


def test_group_epoch_record_carries_the_metadata_hash() -> None:
    g = ConsumerGroup("g")
    g.set_group_epoch(7, metadata_hash=-123456789)
    assert (g.group_epoch, g.metadata_hash, g.assignment_epoch) == (7, -123456789, 0)


def test_waiting_on_unreleased_partition() -> None:
    g = ConsumerGroup("g")
    joined(g, "a")
    joined(g, "b")
    g.update_target_assignment("b", {T: frozenset({0, 1})})
    g.update_member_current_assignment("a", current(2, {}, {T: frozenset({1})}, MemberState.UNREVOKED_PARTITIONS))
    g.update_member_current_assignment("b", current(3, {T: frozenset({0})}, state=MemberState.UNRELEASED_PARTITIONS))
    assert g.waiting_on_unreleased_partition(g.member("b"))  # type: ignore[arg-type]
    g.update_member_current_assignment("a", current(3, {}))
    assert not g.waiting_on_unreleased_partition(g.member("b"))  # type: ignore[arg-type]
