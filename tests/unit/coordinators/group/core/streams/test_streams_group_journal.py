"""The rebalance journal knows streams groups: members joining, leaving and timed out are events
with their cause, each convergence ends in a summary whose moves are tasks, and the state
transitions (which the rebalance metrics count) are reported as consumer groups' are."""

from __future__ import annotations

from typing import Any

from protocol import group_events
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


def _settle(h: Harness, *mids: str) -> None:
    for _ in range(4):
        for mid in mids:
            m = h.shard.state.streams.groups[APP].members[mid]
            beat(h, mid, m.member_epoch, {"active_tasks": tasks_of(m.assigned.active),
                                          "standby_tasks": tasks_of(m.assigned.standby), "warmup_tasks": {}})


def _events(h: Harness, kind: str) -> list[Any]:
    return [e for e in h.events if e.kind == kind and e.group == APP]


def test_joins_a_timeout_and_the_tasks_moved_are_journaled() -> None:
    h = Harness(CONFIG, topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    send(h, join("a", "p1"))
    _settle(h, "a")
    send(h, join("b", "p2"))
    _settle(h, "a", "b")
    joined = [e for e in _events(h, "member") if e.cause == group_events.NEW_MEMBER]
    assert [(e.member_id, e.group_type, e.detail["process_id"]) for e in joined] == [("a", "streams", "p1"),
                                                                                     ("b", "streams", "p2")]
    # The group formed at once (Stable on the first heartbeat); b's arrival is a rebalance.
    [summary] = _events(h, "rebalance")
    assert (summary.state_before, summary.state_after, summary.cause) == ("Stable", "Stable", group_events.NEW_MEMBER)
    moved = summary.detail["moved"]
    assert moved and all(m["from"] == "a" and m["to"] == "b" and "subtopology" in m for m in moved)
    assert summary.detail["members_after"] == 2 and summary.group_type == "streams"
    h.events.clear()
    for _ in range(3):  # only b heartbeats: a's session ends
        h.sleep(CONFIG.streams_session_timeout_ms // 2)
        m = h.shard.state.streams.groups[APP].members["b"]
        beat(h, "b", m.member_epoch, {"active_tasks": tasks_of(m.assigned.active), "standby_tasks": {},
                                      "warmup_tasks": {}})
    _settle(h, "b")
    [timed_out] = [e for e in _events(h, "member") if e.cause == group_events.SESSION_TIMEOUT]
    assert timed_out.member_id == "a" and timed_out.detail["process_id"] == "p1"
    [summary] = _events(h, "rebalance")
    assert summary.cause == group_events.SESSION_TIMEOUT and summary.state_after == "Stable"
    assert {m["to"] for m in summary.detail["moved"]} == {"b"}
    states = [(e.state_before, e.state_after) for e in _events(h, "state")]
    assert states[0][0] == "Stable" and states[-1][1] == "Stable"


def test_a_member_that_leaves_and_a_fenced_epoch_are_journaled() -> None:
    h = Harness(CONFIG, topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    send(h, join("a", "p1"))
    _settle(h, "a")
    assert beat(h, "a", 99).error_code != 0
    send(h, join("b", "p2"))
    beat(h, "b", -1)
    causes = [(e.cause, e.member_id) for e in _events(h, "member")]
    assert (group_events.FENCED, "a") in causes and (group_events.MEMBER_LEFT, "b") in causes


def test_a_group_not_ready_says_why_and_leaves_it_once_the_topic_is_there() -> None:
    h = Harness(CONFIG, topics={REPARTITION: 2, CHANGELOG: 2})  # no source topic
    send(h, join("a", "p1"))
    [not_ready] = [e for e in _events(h, "state") if e.state_after == "NotReady"]
    assert not_ready.detail["topology_status"] == [{"status": "MISSING_SOURCE_TOPICS",
                                                     "detail": "Source topics input are missing."}]
    decoded = group_events.decode_event(group_events.encode_event(not_ready)[1])
    assert decoded is not None and decoded["topology_status"][0]["status"] == "MISSING_SOURCE_TOPICS"
    h.topics.set("input", 2)
    _settle(h, "a")
    states = [(e.state_before, e.state_after) for e in _events(h, "state")]
    assert states[0] == ("Dead", "NotReady") and states[-1][1] == "Stable"
    assert h.shard.state.streams.groups[APP].members["a"].assigned.active
    assert all("topology_status" not in e.detail for e in _events(h, "state") if e.state_after != "NotReady")
