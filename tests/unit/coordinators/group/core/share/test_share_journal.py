"""Share groups in the rebalance journal: members joining, leaving, fenced and timed out, each new
group epoch as an ``assignment`` event (what each member gained and lost, partitions shared by
several members), and the group passing between Empty and Stable."""

from __future__ import annotations

import json
from typing import Any

from broker.coordinators.group.core import CoordinatorConfig
from protocol import group_events
from protocol.group_events import encode_event
from tests.unit.coordinators.group.core.harness import Harness
from tests.unit.coordinators.group.core.share.beats import SHARE, beat


def of_kind(h: Harness, kind: str, cause: str | None = None) -> list[Any]:
    return [e for e in h.events if e.kind == kind and (cause is None or e.cause == cause)]


def test_joining_members_and_their_assignments_are_journaled() -> None:
    h = Harness(topics={"t": 2}, config=SHARE)
    a = beat(h, "a", 0, ["t"])
    [joined] = of_kind(h, "member", group_events.NEW_MEMBER)
    assert joined.group_type == "share" and joined.member_id == "a"
    assert joined.detail["client_id"] == "client" and joined.detail["subscribed_topics"] == ["t"]
    [first] = of_kind(h, "assignment")
    # Nothing assigned before the share partitions are initialized.
    assert first.cause == group_events.NEW_MEMBER and first.generation == a.member_epoch
    assert first.detail["partitions"] == 0 and first.detail["changed"] is False
    assert [(e.state_before, e.state_after) for e in of_kind(h, "state")] == [("Dead", "Stable")]
    beat(h, "a", a.member_epoch)
    second = of_kind(h, "assignment")[-1]
    assert second.cause == group_events.PARTITIONS_CHANGED and second.detail["reason"] == "share partitions initialized"
    assert second.detail["gained"] == {"a": ["t-0", "t-1"]} and second.detail["lost"] == {}
    assert second.detail["epoch_before"] == a.member_epoch and second.generation == a.member_epoch + 1
    beat(h, "b", 0, ["t"])
    beat(h, "c", 0, ["t"])
    last = of_kind(h, "assignment")[-1]
    # Three members on two partitions: one partition goes to two members at once.
    assert last.cause == group_events.NEW_MEMBER and last.detail["members"] == 3
    assert last.detail["partitions"] == 2 and last.detail["shared_partitions"] == 1
    assert "c" in last.detail["gained"]
    doc = json.loads(encode_event(last)[1])
    assert doc["kind"] == "assignment" and doc["group_type"] == "share" and doc["gained"] == last.detail["gained"]


def test_leaving_fencing_and_session_timeouts_are_journaled() -> None:
    h = Harness(topics={"t": 2}, config=SHARE)
    a = beat(h, "a", 0, ["t"])
    a = beat(h, "a", a.member_epoch)
    b = beat(h, "b", 0, ["t"])
    assert beat(h, "b", b.member_epoch + 5).error_code != 0
    [fenced] = of_kind(h, "member", group_events.FENCED)
    assert fenced.member_id == "b" and "stale member epoch" in fenced.detail["why"]
    beat(h, "b", -1)
    [left] = of_kind(h, "member", group_events.MEMBER_LEFT)
    assert left.member_id == "b" and left.group_type == "share"
    after_leave = of_kind(h, "assignment")[-1]
    assert after_leave.cause == group_events.MEMBER_LEFT and "b" in after_leave.detail["lost"]
    h.events.clear()
    h.sleep(CoordinatorConfig().share_session_timeout_ms + 1)
    [expired] = of_kind(h, "member", group_events.SESSION_TIMEOUT)
    assert expired.member_id == "a" and expired.detail["session_timeout_ms"] == CoordinatorConfig().share_session_timeout_ms
    [assignment] = of_kind(h, "assignment")
    assert assignment.cause == group_events.SESSION_TIMEOUT and assignment.detail["members"] == 0
    assert assignment.detail["lost"] == {"a": ["t-0", "t-1"]}
    [state] = of_kind(h, "state")
    assert (state.state_before, state.state_after, state.cause) == ("Stable", "Empty", group_events.SESSION_TIMEOUT)


def test_topic_growth_deletion_and_load_are_journaled() -> None:
    h = Harness(topics={"t": 1}, config=SHARE)
    a = beat(h, "a", 0, ["t"])
    beat(h, "a", a.member_epoch)
    h.events.clear()
    h.topics.set("t", 2)
    h.op(h.shard.on_topics_changed({"t"}, h.now))
    [grown] = of_kind(h, "assignment")
    assert grown.cause == group_events.PARTITIONS_CHANGED and grown.detail["reason"] == "subscribed topics changed"
    h.restart()
    h.events.clear()
    h.op(h.shard.on_topics_changed(set(), h.now))  # any operation collects what loading noted
    [loaded] = of_kind(h, "member", group_events.SHARD_LOADED)
    assert loaded.group_type == "share" and loaded.detail["members"] == 1
    beat(h, "a", -1)
    h.events.clear()
    assert h.shard.delete_group("sg", h.now)[0] == 0
    h.op(h.shard.on_topics_changed(set(), h.now))
    [deleted] = of_kind(h, "member", group_events.ADMIN)
    assert deleted.to_json()["group_type"] == "share"


def test_nothing_is_journaled_when_the_journal_is_off() -> None:
    h = Harness(topics={"t": 1}, config=CoordinatorConfig(group_events_enable=False, share_assignment_interval_ms=0))
    a = beat(h, "a", 0, ["t"])
    beat(h, "a", a.member_epoch)
    beat(h, "a", -1)
    assert h.events == []
