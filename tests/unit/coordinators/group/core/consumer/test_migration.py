"""Online migration between classic and consumer groups on one shard (fake clock, records
round-tripped through their bytes): a classic group takes in a consumer-protocol member and becomes
a consumer group whose classic members keep working through JoinGroup/SyncGroup/Heartbeat; it goes
back to classic when its last consumer-protocol member leaves. At every step no partition is held by
two members, and a restart rebuilds the same groups from the records."""

from __future__ import annotations

from typing import Any

import pytest

from broker.coordinators.group.core import CoordinatorConfig
from broker.coordinators.group.core.base.classic_group import GroupState
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from protocol.payloads.consumer_protocol import (
    encode_assignment,
    encode_subscription,
)
from tests.unit.coordinators.group.core.consumer.classic_members import (
    ALL,
    ClassicMember,
    assignment_bytes,
    check_exclusive,
    held_by,
)
from tests.unit.coordinators.group.core.consumer.members import Member, group_view
from tests.unit.coordinators.group.core.harness import Harness, Topics

CONFIG = CoordinatorConfig(consumer_session_timeout_ms=6000, consumer_heartbeat_interval_ms=500,
                           group_initial_rebalance_delay_ms=0)
T = Topics.id_of("t")










def run(h: Harness, members: list[Any], rounds: int = 40, sleep: int = 100) -> None:
    for _ in range(rounds):
        for m in members:
            if isinstance(m, ClassicMember):
                m.step()
            else:
                m.beat()
            check_exclusive(members)
        h.sleep(sleep)


def spread(members: list[Any]) -> list[int]:
    return sorted(len(held_by(m)) for m in members)


def classic_group(h: Harness, n: int = 2, cooperative: bool = False, **kw: Any) -> list[ClassicMember]:
    members = [ClassicMember(h, cooperative=cooperative, **kw) for _ in range(n)]
    run(h, members)
    assert h.shard.state.groups["g"].state is GroupState.STABLE
    assert set().union(*(m.held() for m in members)) == ALL
    return members


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
def test_a_consumer_member_joining_a_classic_group_upgrades_it_without_sharing_a_partition(cooperative: bool) -> None:
    h = Harness(CONFIG)
    classic = classic_group(h, cooperative=cooperative)
    assert h.commit("g", {("t", 0): 42}, generation=classic[0].generation, member_id=classic[0].member_id) == {
        ("t", 0): 0}
    new = Member(h, "new")
    resp = new.beat()
    assert resp.error_code == 0
    assert "g" not in h.shard.state.groups and "g" in h.shard.state.consumer_groups
    members: list[Any] = [*classic, new]
    check_exclusive(members)
    run(h, members)
    group = h.shard.state.consumer_groups["g"]
    assert group.state.value == "Stable"
    assert spread(members) == [1, 1, 2]
    assert set().union(*(held_by(m) for m in members)) == ALL
    assert {m.uses_classic_protocol for m in group.members.values()} == {True, False}
    # The classic members commit with their generation (their member epoch).
    c = classic[0]
    assert h.commit("g", {("t", 1): 7}, generation=c.generation, member_id=c.member_id) == {("t", 1): 0}
    assert h.commit("g", {("t", 1): 8}, generation=c.generation - 1, member_id=c.member_id) == {
        ("t", 1): ErrorCode.ILLEGAL_GENERATION}
    assert h.fetch("g")[("t", 0)][0] == 42
    before = group_view(h)
    h.restart()
    assert group_view(h) == before
    assert h.fetch("g")[("t", 0)][0] == 42


def test_the_group_goes_back_to_classic_when_its_last_consumer_member_leaves() -> None:
    h = Harness(CONFIG)
    classic = classic_group(h)
    new = Member(h, "new")
    members: list[Any] = [*classic, new]
    run(h, members)
    assert new.beat(epoch=-1).member_epoch == -1
    new.owned = {}
    assert "g" not in h.shard.state.consumer_groups
    group = h.shard.state.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert set(group.members) == {m.member_id for m in classic}
    run(h, classic)
    group = h.shard.state.groups["g"]
    assert group.state is GroupState.STABLE
    assert spread(classic) == [2, 2]
    check_exclusive(classic)
    h.restart()
    assert h.shard.state.groups["g"].generation == group.generation
    assert set(h.shard.state.groups["g"].members) == set(group.members)


def test_a_silent_consumer_member_downgrades_the_group_when_its_session_ends() -> None:
    h = Harness(CONFIG)
    classic = classic_group(h)
    new = Member(h, "new")
    run(h, [*classic, new])
    run(h, classic, rounds=80)  # 8 s of silence from the consumer member: past its 6 s session
    assert "g" not in h.shard.state.consumer_groups
    assert h.shard.state.groups["g"].state is GroupState.STABLE
    assert spread(classic) == [2, 2]


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_the_upgrade_is_refused_when_the_policy_does_not_allow_it(policy: str) -> None:
    h = Harness(CoordinatorConfig(consumer_migration_policy=policy, group_initial_rebalance_delay_ms=0))
    classic = classic_group(h)
    resp = Member(h, "new").beat()
    assert resp.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.shard.state.groups["g"].state is GroupState.STABLE
    run(h, classic, rounds=5)
    assert spread(classic) == [2, 2]


def test_without_downgrade_the_classic_members_stay_in_a_consumer_group() -> None:
    h = Harness(CoordinatorConfig(consumer_migration_policy="upgrade", consumer_session_timeout_ms=6000,
                                  consumer_heartbeat_interval_ms=500, group_initial_rebalance_delay_ms=0))
    classic = classic_group(h)
    new = Member(h, "new")
    run(h, [*classic, new])
    new.beat(epoch=-1)
    new.owned = {}
    assert "g" in h.shard.state.consumer_groups
    run(h, classic)
    assert spread(classic) == [2, 2]
    assert h.shard.state.consumer_groups["g"].state.value == "Stable"


def test_a_classic_member_joins_a_consumer_group_and_gets_its_share() -> None:
    h = Harness(CONFIG)
    a, b = Member(h, "a"), Member(h, "b")
    run(h, [a, b])
    c = ClassicMember(h, cooperative=True)
    members: list[Any] = [a, b, c]
    run(h, members)
    assert spread(members) == [1, 1, 2]
    group = h.shard.state.consumer_groups["g"]
    described = h.shard.consumer_group_describe("g")
    kinds = {m.member_id: m.member_type for m in described.members}
    assert kinds == {"a": 1, "b": 1, c.member_id: 0}
    assert group.member(c.member_id).classic.session_timeout_ms == 10_000  # type: ignore[union-attr]
    # A classic member that goes silent is fenced after its own (classic) session timeout.
    run(h, [a, b], rounds=120)
    assert c.member_id not in h.shard.state.consumer_groups["g"].members
    assert spread([a, b]) == [2, 2]


def test_classic_requests_into_a_consumer_group_get_kafkas_errors() -> None:
    h = Harness(CONFIG)
    a = Member(h, "a")
    a.beat()
    other = [("roundrobin", encode_subscription(ConsumerProtocolSubscription(topics=["t"]), 0))]
    c = ClassicMember(h)
    run(h, [a, c])
    # A classic member must share a protocol with every classic member already in.
    token = h.join("g", "", protocols=other)
    first = h.response(token)
    token = h.join("g", first.member_id, protocols=other)
    assert h.response(token).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # The wrong protocol type.
    assert h.response(h.join("g", "", protocol_type="connect")).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # Heartbeat and SyncGroup check the member, that it is a classic one, and its generation.
    assert h.heartbeat("g", "nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", "a", a.epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("g", c.member_id, c.generation + 5) == ErrorCode.ILLEGAL_GENERATION
    assert h.response(h.sync("g", c.member_id, c.generation + 5)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.response(h.sync("g", c.member_id, c.generation, protocol_name="roundrobin")).error_code == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # LeaveGroup removes classic members only.
    left = h.leave("g", [("a", None), (c.member_id, None)])
    assert [(m.member_id, m.error_code) for m in left.members] == [
        ("a", ErrorCode.UNKNOWN_MEMBER_ID), (c.member_id, 0)]
    assert set(h.shard.state.consumer_groups["g"].members) == {"a"}


def test_a_classic_member_that_joins_but_never_syncs_is_fenced_after_its_rebalance_timeout() -> None:
    h = Harness(CONFIG)
    a = Member(h, "a")
    a.beat()
    first = h.response(h.join("g", "", rebalance=3000, session=30_000))
    joined = h.response(h.join("g", first.member_id, rebalance=3000, session=30_000))
    assert joined.error_code == 0 and joined.leader == "" and joined.members == []
    assert joined.member_id in h.shard.state.consumer_groups["g"].members
    for _ in range(8):
        h.sleep(500)
        a.beat()
    assert joined.member_id not in h.shard.state.consumer_groups["g"].members


def test_a_join_into_an_empty_consumer_group_makes_it_classic_and_keeps_its_offsets() -> None:
    h = Harness(CONFIG)
    a = Member(h, "a")
    a.beat()
    assert h.commit("g", {("t", 2): 5}, generation=a.epoch, member_id="a", version=9) == {("t", 2): 0}
    a.beat(epoch=-1)
    assert h.shard.state.consumer_groups["g"].state.value == "Empty"
    classic = classic_group(h, n=1)
    assert "g" not in h.shard.state.consumer_groups
    assert classic[0].held() == ALL
    assert h.fetch("g")[("t", 2)][0] == 5
    h.restart()
    assert "g" not in h.shard.state.consumer_groups and "g" in h.shard.state.groups
    assert h.fetch("g")[("t", 2)][0] == 5


def test_static_members_roll_to_the_consumer_protocol_and_back_keeping_their_partitions() -> None:
    h2 = Harness(CONFIG)
    old = [ClassicMember(h2, instance_id=f"i{n}") for n in range(2)]
    run(h2, old)
    mine = {m.instance_id: m.held() for m in old}
    # i0 restarts on the consumer protocol: it takes over its classic self without waiting.
    new0 = Member(h2, "n0", instance_id="i0")
    resp = new0.beat()
    assert resp.error_code == 0
    assert held_by(new0) == mine["i0"]
    members: list[Any] = [new0, old[1]]
    run(h2, members)
    assert held_by(new0) == mine["i0"] and old[1].held() == mine["i1"]
    # And back: i0 restarts on the classic protocol; it was the last consumer-protocol member, so
    # the group is classic again, and it keeps its partitions.
    back0 = ClassicMember(h2, instance_id="i0")
    run(h2, [back0, old[1]])
    assert "g" not in h2.shard.state.consumer_groups
    assert h2.shard.state.groups["g"].state is GroupState.STABLE
    assert spread([back0, old[1]]) == [2, 2]
    check_exclusive([back0, old[1]])


def test_an_upgrade_is_refused_when_the_classic_members_hold_the_same_partition() -> None:
    h = Harness(CONFIG)
    req_protocols = [("range", encode_subscription(ConsumerProtocolSubscription(topics=["t"]), 0))]
    first = h.response(h.join("g", "", protocols=req_protocols))
    token_a = h.join("g", first.member_id, protocols=req_protocols)
    a = h.response(token_a)
    both = assignment_bytes(ALL)
    h.response(h.sync("g", a.member_id, a.generation_id, {a.member_id: both}))
    second = h.response(h.join("g", "", protocols=req_protocols))
    tb = h.join("g", second.member_id, protocols=req_protocols)
    ta = h.join("g", a.member_id, protocols=req_protocols)
    ra, rb = h.response(ta), h.response(tb)
    leader = ra if ra.leader == ra.member_id else rb
    h.sync("g", ra.member_id, ra.generation_id, {ra.member_id: both, rb.member_id: both} if leader is ra else None)
    h.sync("g", rb.member_id, rb.generation_id, {ra.member_id: both, rb.member_id: both} if leader is rb else None)
    assert h.shard.state.groups["g"].state is GroupState.STABLE
    resp = Member(h, "new").beat()
    assert resp.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert "g" in h.shard.state.groups and "g" not in h.shard.state.consumer_groups


def test_an_upgrade_is_refused_when_an_assignment_carries_a_custom_assignors_user_data() -> None:
    """The consumer protocol has no place for it (Kafka's ``fromClassicGroup``); the group stays
    classic and goes on as it was."""
    h = Harness(CONFIG)
    subscription = [("range", encode_subscription(ConsumerProtocolSubscription(topics=["t"]), 0))]
    first = h.response(h.join("g", "", protocols=subscription))
    joined = h.response(h.join("g", first.member_id, protocols=subscription))
    state = encode_assignment(ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0, 1])],
        user_data=b"assignor state"), 1)
    h.response(h.sync("g", joined.member_id, joined.generation_id, {joined.member_id: state}))
    resp = Member(h, "new").beat()
    assert resp.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert resp.error_message == (
        "Cannot upgrade classic group g to consumer group because an unsupported custom assignor is in use. "
        "Please refer to the documentation or switch to a default assignor before re-attempting the upgrade.")
    assert h.shard.state.groups["g"].state is GroupState.STABLE and "g" not in h.shard.state.consumer_groups


def test_the_upgrade_answers_the_classic_members_parked_joins() -> None:
    h = Harness(CONFIG)
    classic = classic_group(h)
    # One member rejoins (parked: the group waits for the other), then a consumer member arrives.
    parked = h.join("g", classic[0].member_id, protocols=classic[0].protocols())
    assert not h.answered(parked)
    assert Member(h, "new").beat().error_code == 0
    assert h.response(parked).error_code == ErrorCode.REBALANCE_IN_PROGRESS
