"""What a streams member reports beside its tasks, as Kafka 4.4 keeps it: its task offsets and end
offsets (soft state, shown by StreamsGroupDescribe, gone with the member or a restart), the tasks it
says it owns checked against the topology, and the client tags a group's
rack.aware.assignment.tags asks for (MISSING_CLIENT_TAGS)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as Req
from tests.unit.coordinators.group.core.harness import Harness
from tests.unit.coordinators.group.core.streams.wordcount import (
    APP,
    CHANGELOG,
    CONFIG,
    REPARTITION,
    join,
    send,
)

TOPICS = {"input": 2, REPARTITION: 2, CHANGELOG: 2}


def offsets(*entries: tuple[str, int, int]) -> list[Any]:
    return [Req.TaskOffset(subtopology_id=s, partition=p, offset=o) for s, p, o in entries]


def described(h: Harness, member: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    m = next(m for m in h.shard.streams_group_describe(APP).members if m.member_id == member)
    return ([(t.subtopology_id, t.partition, t.offset) for t in m.task_offsets],
            [(t.subtopology_id, t.partition, t.offset) for t in m.task_end_offsets])


def tagged(member: str, process: str, **tags: str) -> Req:
    req = join(member, process)
    req.client_tags = [Req.KeyValue(key=k, value=v) for k, v in tags.items()]
    return req


def beat(h: Harness, member: str, **fields: Any) -> Any:
    m = h.shard.state.streams.groups[APP].members[member]
    return send(h, Req(group_id=APP, member_id=member, member_epoch=m.member_epoch, endpoint_information_epoch=0,
                       **fields))


def test_reported_task_offsets_are_described_until_the_member_goes_and_are_not_written() -> None:
    h = Harness(CONFIG, topics=TOPICS)
    # What the heartbeat creating the group reports is lost, as in Kafka 4.4 (it keeps it on the
    # group object the new group's replay replaces).
    send(h, join("c", "p3", task_offsets=offsets(("1", 1, 2))))
    assert described(h, "c") == ([], [])
    r = send(h, join("a", "p1", task_offsets=offsets(("1", 1, 7), ("1", 0, 5)), task_end_offsets=offsets(("1", 0, 9))))
    assert r.error_code == 0
    assert described(h, "a") == ([("1", 0, 5), ("1", 1, 7)], [("1", 0, 9)])
    beat(h, "a", task_end_offsets=offsets(("1", 0, 12)))  # offsets left out: kept
    assert described(h, "a") == ([("1", 0, 5), ("1", 1, 7)], [("1", 0, 12)])
    beat(h, "a")  # neither: both kept
    assert described(h, "a") == ([("1", 0, 5), ("1", 1, 7)], [("1", 0, 12)])
    beat(h, "a", task_offsets=[])
    assert described(h, "a") == ([], [("1", 0, 12)])
    send(h, join("b", "p2", task_offsets=offsets(("1", 1, 3))))
    h.restart()  # soft state, as Kafka keeps it: a restarted coordinator waits for the next report
    assert described(h, "b") == ([], [])
    beat(h, "b", task_offsets=offsets(("1", 1, 4)))
    assert described(h, "b") == ([("1", 1, 4)], [])
    send(h, Req(group_id=APP, member_id="b", member_epoch=-1, endpoint_information_epoch=0))
    assert "b" not in h.shard.state.streams.groups[APP].task_offsets


def test_a_task_reported_twice_is_refused_and_nothing_is_kept() -> None:
    h = Harness(CONFIG, topics=TOPICS)
    r = send(h, join("a", "p1", task_offsets=offsets(("1", 0, 5), ("1", 0, 6))))
    assert (r.error_code, r.error_message) == (
        ErrorCode.INVALID_REQUEST, "Task offsets contain a duplicate entry for subtopology 1 and partition 0.")
    assert APP not in h.shard.state.streams.groups
    send(h, join("c", "p3"))
    send(h, join("a", "p1", task_offsets=offsets(("1", 0, 5))))
    r = beat(h, "a", task_end_offsets=offsets(("0", 1, 5), ("0", 1, 5)))
    assert r.error_code == ErrorCode.INVALID_REQUEST
    assert described(h, "a") == ([("1", 0, 5)], [])


def test_owned_tasks_outside_the_topology_are_refused_once_it_is_configured() -> None:
    h = Harness(CONFIG, topics=TOPICS)
    send(h, join("a", "p1"))

    def owning(**tasks: list[tuple[str, list[int]]]) -> tuple[int, str | None]:
        owned: dict[str, Any] = {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []}
        owned |= {k: [Req.TaskIds(subtopology_id=s, partitions=p) for s, p in v] for k, v in tasks.items()}
        r = beat(h, "a", **owned)
        return r.error_code, r.error_message

    assert owning(active_tasks=[("7", [0])]) == (ErrorCode.INVALID_REQUEST,
                                                 "Subtopology 7 does not exist in the topology.")
    assert owning(standby_tasks=[("1", [2])]) == (
        ErrorCode.INVALID_REQUEST, "Task 2 for subtopology 1 is invalid. Number of tasks for this subtopology: 2")
    assert owning(warmup_tasks=[("0", [-1])])[0] == ErrorCode.INVALID_REQUEST
    assert owning()[0] == ErrorCode.NONE


def test_a_member_without_the_client_tags_the_group_asks_for_is_told_from_version_1() -> None:
    h = Harness(CONFIG, topics=TOPICS)
    h.shard.state.config = replace(h.shard.state.config, group_configs={
        APP: {"streams.rack.aware.assignment.tags": "zone, rack"}})
    r = send(h, tagged("a", "p1", zone="z1"))
    assert [(s.status_code, s.status_detail) for s in r.status if s.status_code == 6] == [
        (6, "Missing required client tags for rack-aware standby assignment: [rack]. Configure them via "
            "'client.tag.<tagKey>' in your Streams config.")]
    group = h.shard.state.streams.groups[APP]
    assert group.last_assignment_configs == {"num.standby.replicas": "0", "rack.aware.assignment.tags": "zone,rack"}
    ctx = h.ctx(0)
    m = group.members["a"]
    h.op(h.shard.streams_group_heartbeat(Req(group_id=APP, member_id="a", member_epoch=m.member_epoch,
                                             endpoint_information_epoch=0), ctx, h.now))
    assert all(s.status_code != 6 for s in h.response(ctx.token).status)
    r = send(h, tagged("b", "p2", zone="z2", rack="r2"))
    assert all(s.status_code != 6 for s in r.status)


def test_the_brokers_rack_aware_assignment_tags_count_unless_the_group_sets_its_own() -> None:
    h = Harness(replace(CONFIG, streams_rack_aware_assignment_tags="zone"), topics=TOPICS)
    r = send(h, tagged("a", "p1", rack="r1"))
    assert [s.status_detail for s in r.status if s.status_code == 6] == [
        "Missing required client tags for rack-aware standby assignment: [zone]. Configure them via "
        "'client.tag.<tagKey>' in your Streams config."]
    assert h.shard.state.streams.groups[APP].last_assignment_configs == {
        "num.standby.replicas": "0", "rack.aware.assignment.tags": "zone"}
    # The group's own (here: none) wins over the broker's.
    h.shard.state.config = replace(h.shard.state.config, group_configs={
        APP: {"streams.rack.aware.assignment.tags": ""}})
    r = send(h, tagged("b", "p2", rack="r2"))
    assert all(s.status_code != 6 for s in r.status)
