"""The rebalance journal: every membership change and rebalance phase is an event with its cause;
each rebalance ends in a summary with its phases, stall, the members waited for and what moved."""

from __future__ import annotations

import json
from typing import Any

from broker.coordinators.group.core.base.context import CoordinatorConfig
from protocol import group_events
from protocol.group_events import encode_event
from protocol.messages.consumer_protocol import ConsumerProtocolAssignment
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.payloads.consumer_protocol import encode_assignment
from tests.unit.coordinators.group.core.harness import Harness


def assignment(*partitions: int, topic: str = "t") -> bytes:
    return encode_assignment(ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=list(partitions))]), 0)


def rebalances(h: Harness) -> list[Any]:
    return [e for e in h.events if e.kind == "rebalance"]


def members(h: Harness, cause: str) -> list[Any]:
    return [e for e in h.events if e.kind == "member" and e.cause == cause]


def two_members_with_partitions(h: Harness) -> tuple[str, str, int]:
    (a, b), gen = h.stable(n=2)
    h.sync("g", a, gen + 1)  # nothing: generation is gen; re-sync below with real assignments
    h.join("g", a)  # the leader rejoins: a new generation with real partitions
    h.join("g", b)
    gen += 1
    h.sync("g", a, gen, {a: assignment(0, 1), b: assignment(2, 3)})
    h.sync("g", b, gen)
    assert h.state("g") == "Stable"
    return a, b, gen


def test_forming_a_group_records_new_members_phases_and_the_stall(h: Harness) -> None:
    (a, b), gen = h.stable(n=2)
    joined = members(h, group_events.NEW_MEMBER)
    assert [e.member_id for e in joined] == [a, b] and joined[0].detail["client_id"] == "client"
    [summary] = rebalances(h)
    assert summary.cause == group_events.NEW_MEMBER and summary.generation == gen
    assert summary.state_before == "Empty" and summary.state_after == "Stable"
    d = summary.detail
    assert d["stall_ms"] == d["join_phase_ms"] + d["sync_phase_ms"]
    assert d["join_phase_ms"] >= CoordinatorConfig().group_initial_rebalance_delay_ms
    phases = [(e.state_before, e.state_after) for e in h.events if e.kind == "state"]
    assert phases == [("Empty", "PreparingRebalance"), ("PreparingRebalance", "CompletingRebalance"),
                      ("CompletingRebalance", "Stable")]


def test_a_leave_with_a_reason_is_the_cause_and_its_partitions_move(h: Harness) -> None:
    a, b, gen = two_members_with_partitions(h)
    h.events.clear()
    req = LeaveGroupRequest(group_id="g", members=[
        LeaveGroupRequest.MemberIdentity(member_id=b, group_instance_id=None, reason="the consumer is closing")])
    h.op(h.shard.leave_group(req, h.ctx(5), h.now))
    [left] = members(h, group_events.MEMBER_LEFT)
    assert left.member_id == b and left.detail["client_reason"] == "the consumer is closing"
    h.sleep(200)
    h.join("g", a)
    h.sleep(100)
    h.sync("g", a, gen + 1, {a: assignment(0, 1, 2, 3)})
    [summary] = rebalances(h)
    d = summary.detail
    assert summary.cause == group_events.MEMBER_LEFT and d["cause_detail"]["client_reason"] == "the consumer is closing"
    assert d["stall_ms"] == 300 and d["waited_for"][0]["member_id"] == a
    assert d["moved_count"] == 2 and {(m["partition"], m["from"], m["to"]) for m in d["moved"]} == {
        (2, b, a), (3, b, a)}
    # The eager member gave up its partitions when it rejoined, 200 ms in.
    assert d["no_partitions_ms"] == {a: 100}


def test_a_session_timeout_is_recorded_with_the_age_of_the_last_heartbeat(h: Harness) -> None:
    (a, b), gen = h.stable(n=2, session=10_000)
    h.events.clear()
    for _ in range(3):
        h.sleep(3_000)
        h.heartbeat("g", a, gen)
    h.sleep(2_000)
    [expired] = members(h, group_events.SESSION_TIMEOUT)
    assert expired.member_id == b and expired.detail["last_heartbeat_age_ms"] == 10_000
    assert h.state("g") == "PreparingRebalance"
    assert [e.cause for e in h.events if e.kind == "state"] == [group_events.SESSION_TIMEOUT]


def test_a_member_that_does_not_rejoin_in_time_is_a_rebalance_timeout(h: Harness) -> None:
    (a, b), gen = h.stable(n=2, rebalance=5_000, session=30_000)
    h.events.clear()
    h.join("g", a, rebalance=5_000, session=30_000)  # the leader starts a rebalance; b never rejoins
    h.sleep(5_000)
    [evicted] = members(h, group_events.REBALANCE_TIMEOUT)
    assert evicted.member_id == b and evicted.detail["rebalance_timeout_ms"] == 5_000
    h.sync("g", a, gen + 1, {a: b""})
    [summary] = rebalances(h)
    assert summary.cause == group_events.REBALANCE_TIMEOUT
    assert summary.detail["cause_detail"]["member_id"] == b
    assert summary.detail["cause_detail"]["trigger"] == group_events.LEADER_REJOINED
    assert [n["cause"] for n in summary.detail["also"]] == [group_events.REBALANCE_TIMEOUT]
    assert summary.detail["join_phase_ms"] == 5_000


def test_a_static_member_rejoining_in_a_stable_group_avoids_a_rebalance(h: Harness) -> None:
    token = h.join("g", instance_id="i-1")
    h.sleep(5_000)
    first = h.response(token)
    h.sync("g", first.member_id, first.generation_id, {first.member_id: b""}, instance_id="i-1")
    h.events.clear()
    again = h.response(h.join("g", instance_id="i-1"))
    assert again.error_code == 0
    [rejoined] = members(h, group_events.STATIC_REJOINED)
    assert rejoined.detail["avoided_rebalance"] is True and rejoined.detail["previous_member_id"] == first.member_id
    [fenced] = members(h, group_events.FENCED)
    assert fenced.member_id == first.member_id
    assert not rebalances(h)


def test_a_leader_rejoining_after_a_topic_grew_names_the_partition_count_change() -> None:
    h = Harness(topics={"t": 4})
    a, _b, _gen = two_members_with_partitions(h)
    h.topics.set("t", 6)
    h.events.clear()
    h.join("g", a)
    state = next(e for e in h.events if e.kind == "state")
    assert state.cause == group_events.PARTITIONS_CHANGED
    [note] = members(h, group_events.PARTITIONS_CHANGED)
    assert note.detail["partitions"] == {"t": [4, 6]}


def test_events_encode_as_versioned_json() -> None:
    h = Harness()
    h.stable(n=1)
    key, value, ts = encode_event(rebalances(h)[0])
    assert json.loads(key) == {"version": 1, "group": "g"}
    doc = json.loads(value)
    assert doc["version"] == 1 and doc["kind"] == "rebalance" and doc["cause"] == group_events.NEW_MEMBER
    assert doc["timestamp"] == ts and doc["group_type"] == "classic"


def test_switched_off_it_records_nothing() -> None:
    h = Harness(config=CoordinatorConfig(group_events_enable=False))
    h.stable(n=2)
    assert h.events == []


def test_a_consumer_group_rebalance_is_recorded_with_its_epoch_and_moves() -> None:
    from tests.unit.coordinators.group.core.consumer.members import CONFIG, Member, converge

    h = Harness(CONFIG, topics={"t": 4})
    a = Member(h, "a")
    converge([a])
    h.events.clear()
    b = Member(h, "b")
    converge([a, b])
    [joined] = members(h, group_events.NEW_MEMBER)
    assert joined.member_id == "b" and joined.group_type == "consumer"
    [summary] = rebalances(h)
    assert summary.cause == group_events.NEW_MEMBER and summary.group_type == "consumer"
    assert summary.generation == h.shard.state.consumer_groups["g"].group_epoch
    assert summary.state_after == "Stable" and summary.detail["moved_count"] == 2
    assert {m["from"] for m in summary.detail["moved"]} == {"a"} and {m["to"] for m in summary.detail["moved"]} == {"b"}
    # a kept two partitions throughout: the incremental protocol never left it without any.
    assert "a" not in summary.detail["no_partitions_ms"]
    h.events.clear()
    b.beat(epoch=-1)
    converge([a])
    [left] = members(h, group_events.MEMBER_LEFT)
    assert left.member_id == "b"
