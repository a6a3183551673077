"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups, DeleteGroups) against Apache Kafka and kcoord: the same exchanges, every answer compared."""

from __future__ import annotations

import pytest

from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.leave_group import LeaveGroupRequest
from protocol.messages.list_groups import ListGroupsRequest
from protocol.messages.sync_group import SyncGroupRequest
from tests.differential.harness import Pair, Target, retry, unique
from tests.differential.ops import (
    describe,
    heartbeat,
    join,
    join_member,
    join_request,
    leave,
    stable_member,
    sync,
)

pytestmark = pytest.mark.differential


@pytest.mark.parametrize("version", [3, 4, 5, 7, 9])
def test_first_member_joins_syncs_and_heartbeats(pair: Pair, version: int) -> None:
    group = unique("classic")

    def scenario(t: Target) -> object:
        c = t.client()
        first = join(c, group, "", version)
        member = first.member_id
        joined = join(c, group, member, version) if first.error_code == 79 else first
        synced = sync(c, group, joined.generation_id, joined.member_id, {joined.member_id: b"plan"})
        beat = heartbeat(c, group, joined.generation_id, joined.member_id)
        return [first, joined, synced, beat, describe(c, group)]

    answers = pair.compare(scenario)
    assert answers[0]["error_code"] == (79 if version >= 4 else 0)  # type: ignore[index]


def test_heartbeat_errors_unknown_member_illegal_generation_unknown_group(pair: Pair) -> None:
    group = unique("hb")

    def scenario(t: Target) -> object:
        c = t.client()
        joined = stable_member(c, group)
        return [
            heartbeat(c, group, joined.generation_id + 1, joined.member_id),
            heartbeat(c, group, joined.generation_id - 1, joined.member_id),
            heartbeat(c, group, joined.generation_id, "unknown-member"),
            heartbeat(c, group, joined.generation_id, ""),
            heartbeat(c, unique("nogroup"), 1, joined.member_id),
        ]

    codes = [a["error_code"] for a in pair.compare(scenario)]  # type: ignore[attr-defined, index]
    assert codes[:3] == [22, 22, 25]


def test_sync_errors(pair: Pair) -> None:
    group = unique("sync")

    def scenario(t: Target) -> object:
        c = t.client()
        joined = stable_member(c, group)
        g, m = joined.generation_id, joined.member_id
        return [
            sync(c, group, g, "unknown-member"),
            sync(c, group, g + 1, m),
            sync(c, group, g, m, protocol_type="other"),
            sync(c, group, g, m, protocol_name="roundrobin"),
            sync(c, group, g, m, protocol_type=None, protocol_name=None),
            sync(c, unique("nogroup"), 1, m),
            sync(c, group, g, m, version=3),
        ]

    pair.compare(scenario)


@pytest.mark.parametrize("session_ms", [5999, 1800001, 0, -1])
def test_session_timeout_out_of_bounds(pair: Pair, session_ms: int) -> None:
    group = unique("session")

    def scenario(t: Target) -> object:
        c = t.client()
        return [join(c, group, "", session_ms=session_ms), join(c, group, "", 5, session_ms=session_ms),
                describe(c, group)]

    answers = pair.compare(scenario)
    assert answers[0]["error_code"] == 26  # type: ignore[index]


def test_empty_group_id_is_invalid(pair: Pair) -> None:
    def scenario(t: Target) -> object:
        c = t.client()
        return [join(c, ""), join(c, "", "", 3), sync(c, "", 1, "m"), heartbeat(c, "", 1, "m"),
                leave(c, "", ("m", None))]

    answers = pair.compare(scenario)
    assert answers[0]["error_code"] == 24  # type: ignore[index]


def test_inconsistent_protocols(pair: Pair) -> None:
    group = unique("protocols")

    def scenario(t: Target) -> object:
        a, b = t.client("a"), t.client("b")
        stable_member(a, group)
        return [
            join(b, group, "", protocol_type="connect"),
            join_member(b, group, names=("roundrobin",)),
            join(b, group, "", protocol_type=""),
            join(b, group, "", names=()),
            describe(a, group),
        ]

    answers = pair.compare(scenario)
    assert answers[0]["error_code"] == 23  # type: ignore[index]


def test_join_with_unknown_member_id(pair: Pair) -> None:
    group = unique("unknown")

    def scenario(t: Target) -> object:
        c = t.client()
        before = join(c, group, "not-a-member")
        stable_member(c, group)
        return [before, join(c, group, "not-a-member"), join(c, group, "not-a-member", 3)]

    pair.compare(scenario)


def test_rebalance_in_progress_when_a_second_member_joins(pair: Pair) -> None:
    group = unique("rebalance")

    def scenario(t: Target) -> object:
        a, b = t.client("a"), t.client("b")
        first = stable_member(a, group)
        required = join(b, group, "")
        pending = b.send(11, 9, join_request(group, required.member_id))
        # Setup, not comparison: the second join must have reached the group before the first
        # member's heartbeat (the two connections race otherwise).
        retry(lambda: describe(a, group), lambda d: d.groups[0].group_state == "PreparingRebalance", 10)
        during = [heartbeat(a, group, first.generation_id, first.member_id),
                  sync(a, group, first.generation_id, first.member_id),
                  describe(a, group)]
        rejoined = join(a, group, first.member_id)
        second = b.recv(11, 9, pending)
        leader, follower = (rejoined, second) if rejoined.leader == rejoined.member_id else (second, rejoined)
        follower_sync = b.send(14, 5, SyncGroupRequest(
            group_id=group, generation_id=second.generation_id, member_id=second.member_id,
            protocol_type="consumer", protocol_name="range"))
        leader_sync = sync(a, group, rejoined.generation_id, rejoined.member_id,
                           {rejoined.member_id: b"one", second.member_id: b"two"})
        return {"member_ids": [first.member_id, second.member_id], "during": during, "rejoined": rejoined, "second": second,
                "leader_is_first": leader is rejoined, "follower_is_second": follower is second,
                "leader_sync": leader_sync, "follower_sync": b.recv(14, 5, follower_sync),
                "after": [heartbeat(a, group, rejoined.generation_id, rejoined.member_id),
                          heartbeat(b, group, second.generation_id, second.member_id),
                          heartbeat(b, group, first.generation_id, second.member_id)],
                "described": describe(a, group)}

    answers = pair.compare(scenario)
    assert answers["during"][0]["error_code"] == 27  # type: ignore[index]


def test_leave_group_batch_and_errors(pair: Pair) -> None:
    group = unique("leave")

    def scenario(t: Target) -> object:
        c = t.client()
        joined = stable_member(c, group)
        return [
            leave(c, group, ("unknown-member", None), (joined.member_id, None)),
            describe(c, group),
            leave(c, group, (joined.member_id, None)),
            leave(c, unique("nogroup"), ("m", None)),
            leave(c, group, ("m", None), version=2),
        ]

    pair.compare(scenario)


def test_leave_group_v0_single_member(pair: Pair) -> None:
    group = unique("leave0")

    def scenario(t: Target) -> object:
        c = t.client()
        joined = stable_member(c, group)
        return [c.call(13, 1, LeaveGroupRequest(group_id=group, member_id="other")),
                c.call(13, 1, LeaveGroupRequest(group_id=group, member_id=joined.member_id)),
                describe(c, group)]

    pair.compare(scenario)


def test_static_member_rejoin_fences_the_old_member_id(pair: Pair) -> None:
    group = unique("static")

    def scenario(t: Target) -> object:
        a, b = t.client("a"), t.client("b")
        first = stable_member(a, group, instance="instance-1")
        again = join(b, group, "", instance="instance-1")
        return {
            "first": first, "again": again,
            "old_heartbeat": heartbeat(a, group, first.generation_id, first.member_id, instance="instance-1"),
            "new_heartbeat": heartbeat(b, group, again.generation_id, again.member_id, instance="instance-1"),
            "old_sync": sync(a, group, first.generation_id, first.member_id, instance="instance-1"),
            "old_join": join(a, group, first.member_id, instance="instance-1"),
            "wrong_instance": heartbeat(b, group, again.generation_id, again.member_id, instance="instance-2"),
            "described": describe(a, group),
        }

    answers = pair.compare(scenario)
    assert answers["old_heartbeat"]["error_code"] == 82  # type: ignore[index]


def test_static_member_leaves_by_instance_id(pair: Pair) -> None:
    group = unique("staticleave")

    def scenario(t: Target) -> object:
        c = t.client()
        joined = stable_member(c, group, instance="i-1")
        return [
            leave(c, group, ("", "i-unknown"), ("wrong-member", "i-1")),
            leave(c, group, ("", "i-1")),
            describe(c, group),
            leave(c, group, (joined.member_id, "i-1")),
        ]

    pair.compare(scenario)


def test_unknown_static_member_id_with_known_instance(pair: Pair) -> None:
    group = unique("staticfence")

    def scenario(t: Target) -> object:
        c = t.client()
        joined = stable_member(c, group, instance="i-1")
        return [
            join(c, group, "someone-else", instance="i-1"),
            sync(c, group, joined.generation_id, "someone-else", instance="i-1"),
            heartbeat(c, group, joined.generation_id, joined.member_id, instance="i-other"),
            join(c, group, joined.member_id, instance="i-1"),
        ]

    pair.compare(scenario)


def test_describe_groups_states(pair: Pair) -> None:
    stable, empty, unknown = unique("desc-stable"), unique("desc-empty"), unique("desc-unknown")

    def scenario(t: Target) -> object:
        c = t.client("describer")
        stable_member(c, stable, assignment=b"the-assignment")
        gone = stable_member(c, empty)
        leave(c, empty, (gone.member_id, None))
        return [describe(c, stable, empty, unknown), describe(c, stable, version=0), describe(c, "", version=3)]

    answers = pair.compare(scenario)
    states = {g["group_id"]: g["group_state"] for g in answers[0]["groups"]}  # type: ignore[index]
    assert states == {stable: "Stable", empty: "Empty", unknown: "Dead"}


def test_list_groups_with_state_and_type_filters(pair: Pair) -> None:
    stable, empty = unique("list-stable"), unique("list-empty")

    def scenario(t: Target) -> object:
        c = t.client()
        stable_member(c, stable)
        gone = stable_member(c, empty)
        leave(c, empty, (gone.member_id, None))
        out = []
        for version, states, types in ((3, [], []), (4, ["Stable"], []), (4, ["Empty"], []),
                                       (5, [], ["classic"]), (5, [], ["consumer"]), (4, ["stable"], [])):
            answer = c.call(16, version, ListGroupsRequest(states_filter=states, types_filter=types))
            mine = sorted((g.group_id, g.protocol_type, g.group_state, g.group_type) for g in answer.groups
                          if g.group_id in (stable, empty))
            out.append({"error_code": answer.error_code, "groups": mine})
        return out

    pair.compare(scenario)


@pytest.mark.parametrize("version", [2, 3])
def test_delete_groups(pair: Pair, version: int) -> None:
    busy, empty, unknown = unique("del-busy"), unique("del-empty"), unique("del-unknown")

    def scenario(t: Target) -> object:
        c = t.client()
        stable_member(c, busy)
        gone = stable_member(c, empty)
        leave(c, empty, (gone.member_id, None))
        deleted = c.call(42, version, DeleteGroupsRequest(groups_names=[busy, empty, unknown, ""]))
        results = sorted(deleted.results, key=lambda r: r.group_id)
        # v3's messages, compared too (the harness leaves error_message out of what it compares).
        texts = [r.error_message for r in results] if version >= 3 else None
        return [results, texts, describe(c, empty), c.call(42, version, DeleteGroupsRequest(groups_names=[empty]))]

    answers = pair.compare(scenario)
    assert [r["error_code"] for r in answers[0]] == [69, 68, 0, 69]  # type: ignore[index]
    assert answers[1] == (None if version < 3 else [None] * 4)  # Kafka 4.4 gives these errors no text


@pytest.mark.parametrize("version", [0, 1, 2])
def test_old_join_versions(pair: Pair, version: int) -> None:
    group = unique("old-join")

    def scenario(t: Target) -> object:
        c = t.client()
        joined = join(c, group, "", version)
        synced = sync(c, group, joined.generation_id, joined.member_id, {joined.member_id: b"x"}, version=0,
                      protocol_type=None, protocol_name=None)
        return [joined, synced, heartbeat(c, group, joined.generation_id, joined.member_id, version=0),
                leave(c, group, (joined.member_id, None), version=3), describe(c, group, version=3)]

    answers = pair.compare(scenario)
    assert answers[0]["error_code"] == 0  # type: ignore[index]


def test_describe_with_authorized_operations(pair: Pair) -> None:
    group, unknown = unique("ops"), unique("ops-none")

    def scenario(t: Target) -> object:
        from protocol.messages.describe_groups import DescribeGroupsRequest

        c = t.client()
        stable_member(c, group)
        return c.call(15, 5, DescribeGroupsRequest(groups=[group, unknown], include_authorized_operations=True))

    answers = pair.compare(scenario)
    assert [g["authorized_operations"] for g in answers["groups"]] == [3400, 3400]  # type: ignore[index]
