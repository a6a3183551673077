"""Static members of streams groups (an instance id in StreamsGroupHeartbeat), as Kafka 4.4 treats
them: leaving with epoch -2 keeps the member and its tasks; the instance rejoining under a new
member id takes them over without a new group epoch; a second member with the instance id in use is
refused, and a stale member of an instance is fenced."""

from __future__ import annotations

from protocol import group_events
from protocol.errors import ErrorCode
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Req
from tests.unit.coordinators.group.core.harness import Harness
from tests.unit.coordinators.group.core.streams.wordcount import (
    APP,
    CHANGELOG,
    CONFIG,
    REPARTITION,
    beat,
    join,
    send,
    tasks,
    tasks_of,
)


def _settle(h: Harness, *mids: str) -> None:
    for _ in range(4):
        for mid in mids:
            m = h.shard.state.streams.groups[APP].members[mid]
            beat(h, mid, m.member_epoch, {"active_tasks": tasks_of(m.assigned.active),
                                          "standby_tasks": tasks_of(m.assigned.standby), "warmup_tasks": {}})


def _leave(h: Harness, member: str, epoch: int, instance_id: str | None) -> object:
    return send(h, Req(group_id=APP, member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
                       instance_id=instance_id))


def _two_static() -> Harness:
    h = Harness(CONFIG, topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    send(h, join("a", "p1", instance_id="i-a"))
    send(h, join("b", "p2", instance_id="i-b"))
    _settle(h, "a", "b")
    assert h.shard.state.streams.groups[APP].state_name() == "Stable"
    return h


def test_a_static_member_that_leaves_temporarily_gets_its_tasks_back_under_a_new_id() -> None:
    h = _two_static()
    group = h.shard.state.streams.groups[APP]
    held, epoch = tasks_of(group.members["a"].assigned.active), group.group_epoch
    r = _leave(h, "a", -2, "i-a")
    assert (r.error_code, r.member_epoch) == (0, -2)  # type: ignore[attr-defined]
    group = h.shard.state.streams.groups[APP]
    assert group.members["a"].member_epoch == -2 and tasks_of(group.members["a"].assigned.active) == held
    _settle(h, "b")  # b does not get a's tasks meanwhile
    assert not set(tasks_of(h.shard.state.streams.groups[APP].members["b"].assigned.active).get("0", set())) & held["0"]

    r = send(h, join("a2", "p1", instance_id="i-a"))
    assert r.error_code == 0 and tasks(r.active_tasks) == held
    group = h.shard.state.streams.groups[APP]
    assert set(group.members) == {"a2", "b"} and group.group_epoch == epoch
    assert group.members["a2"].instance_id == "i-a" and group.targets["a2"].active == group.members["a2"].assigned.active
    [rejoined] = [e for e in h.events if e.cause == group_events.STATIC_REJOINED]
    assert rejoined.member_id == "a2" and rejoined.detail["replaced"] == "a" and rejoined.detail["avoided_rebalance"]
    _settle(h, "a2", "b")
    assert h.shard.state.streams.groups[APP].state_name() == "Stable"
    h.restart()
    assert set(h.shard.state.streams.groups[APP].members) == {"a2", "b"}


def test_the_instance_id_of_a_running_member_is_not_released_and_its_stale_member_is_fenced() -> None:
    h = _two_static()
    r = send(h, join("a2", "p1", instance_id="i-a"))
    assert r.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert r.error_message == ("Static member a2 with instance id i-a cannot join the group because the instance "
                               "id is owned by a member.")
    _leave(h, "a", -2, "i-a")
    send(h, join("a2", "p1", instance_id="i-a"))
    epoch = h.shard.state.streams.groups[APP].members["a2"].member_epoch
    stale = send(h, Req(group_id=APP, member_id="a", member_epoch=epoch, endpoint_information_epoch=0,
                        instance_id="i-a"))
    assert stale.error_code == ErrorCode.FENCED_INSTANCE_ID
    unknown = send(h, Req(group_id=APP, member_id="z", member_epoch=1, endpoint_information_epoch=0,
                          instance_id="i-z"))
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Instance id i-z is unknown.")


def test_a_static_member_gone_past_its_session_or_leaving_for_good_gives_up_its_tasks() -> None:
    h = _two_static()
    _leave(h, "a", -2, "i-a")
    for _ in range(3):
        h.sleep(CONFIG.streams_session_timeout_ms // 2)
        _settle(h, "b")
    group = h.shard.state.streams.groups[APP]
    assert set(group.members) == {"b"} and tasks_of(group.members["b"].assigned.active) == {"0": {0, 1}, "1": {0, 1}}
    r = _leave(h, "b", -1, "i-b")
    assert r.error_code == 0 and not h.shard.state.streams.groups[APP].members  # type: ignore[attr-defined]
