"""A streams group's own configs (Kafka's streams.* group configs) over the broker's: the timings
its members are given, and a change of its assignment configs assigning the tasks again, kept in
the group's metadata record (LastAssignmentConfigs) across a restart."""

from __future__ import annotations

from dataclasses import replace

from tests.unit.coordinators.group.core.harness import Harness
from tests.unit.coordinators.group.core.streams.wordcount import (
    APP,
    CHANGELOG,
    CONFIG,
    REPARTITION,
    beat,
    join,
    send,
    tasks_of,
)


def _with(h: Harness, **configs: str) -> None:
    """What the broker does when the group's configs change."""
    h.shard.state.config = replace(h.shard.state.config, group_configs={APP: configs})


def _steady(h: Harness, rounds: int = 4) -> None:
    for _ in range(rounds):
        for mid in ("a", "b"):
            m = h.shard.state.streams.groups[APP].members[mid]
            beat(h, mid, m.member_epoch, {"active_tasks": tasks_of(m.assigned.active),
                                                         "standby_tasks": tasks_of(m.assigned.standby),
                                                         "warmup_tasks": {}})


def test_the_group_timings_come_from_its_own_configs_and_others_keep_the_brokers() -> None:
    h = Harness(CONFIG, topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    _with(h, **{"streams.heartbeat.interval.ms": "7000", "streams.session.timeout.ms": "50000"})
    assert send(h, join("a", "p1")).heartbeat_interval_ms == 7000
    h.sleep(CONFIG.streams_session_timeout_ms + 1)  # the broker's timeout passes, the group's does not
    assert "a" in h.shard.state.streams.groups[APP].members
    h.sleep(50000)
    assert "a" not in h.shard.state.streams.groups[APP].members


def test_standby_replicas_turned_on_for_a_running_group_are_assigned_and_survive_a_restart() -> None:
    h = Harness(CONFIG, topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    send(h, join("a", "p1"))
    send(h, join("b", "p2"))
    _steady(h)
    group = h.shard.state.streams.groups[APP]
    assert group.last_assignment_configs == {"num.standby.replicas": "0"}
    assert all(not m.assigned.standby for m in group.members.values())
    epoch = group.group_epoch
    _with(h, **{"streams.num.standby.replicas": "1"})
    _steady(h)
    group = h.shard.state.streams.groups[APP]
    assert group.group_epoch == epoch + 1 and group.state_name() == "Stable"
    standby = {mid: tasks_of(m.assigned.standby) for mid, m in group.members.items()}
    active = {mid: tasks_of(m.assigned.active) for mid, m in group.members.items()}
    assert all(standby[mid] == {"1": active[other]["1"]} for mid, other in (("a", "b"), ("b", "a")))
    h.restart()
    again = h.shard.state.streams.groups[APP]
    assert again.last_assignment_configs == {"num.standby.replicas": "1"}
    _with(h, **{"streams.num.standby.replicas": "1"})  # the broker's configs, as the restarted shard gets them
    _steady(h, 1)
    assert h.shard.state.streams.groups[APP].group_epoch == epoch + 1  # nothing changed: no new assignment


def test_members_are_told_the_groups_task_offset_interval_and_acceptable_recovery_lag() -> None:
    h = Harness(CONFIG, topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    joined = send(h, join("a", "p1"))
    assert (joined.task_offset_interval_ms, joined.acceptable_recovery_lag) == (60000, 10000)
    assert joined.acceptable_recovery_lag_legacy == 0  # Kafka 4.4 leaves the version 0 field unset
    _with(h, **{"streams.task.offset.interval.ms": "30000", "streams.acceptable.recovery.lag": "5000"})
    m = h.shard.state.streams.groups[APP].members["a"]
    told = beat(h, "a", m.member_epoch, {"active_tasks": tasks_of(m.assigned.active), "standby_tasks": {},
                                         "warmup_tasks": {}})
    assert (told.task_offset_interval_ms, told.acceptable_recovery_lag) == (30000, 5000)
