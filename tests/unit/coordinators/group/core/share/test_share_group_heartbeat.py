"""Share groups in the pure coordinator: joining, the share assignor, leaving, session timeouts,
topic changes, describe/list/delete, and a restart that replays the records (as Kafka's bytes)."""

from __future__ import annotations

from typing import Any

from broker.coordinators.group.core import CoordinatorConfig
from broker.coordinators.group.core.share import assignor
from protocol.errors import ErrorCode
from protocol.payloads.offsets_log_records import SHARE_GROUP_RECORD_TYPES, key_version
from tests.unit.coordinators.group.core.harness import Harness, Topics
from tests.unit.coordinators.group.core.share.beats import SHARE, beat


def partitions(resp: Any) -> set[tuple[str, int]]:
    return {(Topics.id_of("t").hex() if tp.topic_id == Topics.id_of("t") else tp.topic_id.hex(), p)
            for tp in resp.assignment.topic_partitions for p in tp.partitions}


def test_first_member_waits_for_initialized_partitions_then_gets_them_all() -> None:
    h = Harness(topics={"t": 2}, config=SHARE)
    a = beat(h, "a", 0, ["t"])
    # A new group starts at epoch 1; nothing is assigned before its share state is initialized.
    assert a.error_code == 0 and a.member_epoch == 2 and a.heartbeat_interval_ms == 5000
    assert partitions(a) == set()
    again = beat(h, "a", 2)  # the initialization (a timer due at once) has completed meanwhile
    assert again.member_epoch == 3 and len(partitions(again)) == 2
    b = beat(h, "b", 0, ["t"])
    assert b.member_epoch == 4 and len(partitions(b)) == 1
    c = beat(h, "c", 0, ["t"])
    assert len(partitions(c)) == 1  # three members on two partitions: a partition is shared
    a2 = beat(h, "a", 3)
    assert a2.member_epoch == 5 and len(partitions(a2)) == 1
    assert beat(h, "a", 5).assignment is None  # unchanged


def test_written_records_are_share_group_records() -> None:
    h = Harness(topics={"t": 1}, config=SHARE)
    beat(h, "a", 0, ["t"])
    types = [key_version(k) for k, _ in h.log]
    assert set(types) <= SHARE_GROUP_RECORD_TYPES
    # member, epoch, target (empty), target epoch, current assignment, initializing; initialized.
    assert types == [10, 11, 13, 12, 14, 15, 15]


def test_errors() -> None:
    h = Harness(topics={"t": 1}, config=SHARE)
    assert beat(h, "", 0, ["t"]).error_code == ErrorCode.INVALID_REQUEST
    assert beat(h, "a", 0, None).error_code == ErrorCode.INVALID_REQUEST
    assert beat(h, "a", 0, ["t"], group="").error_code == ErrorCode.INVALID_REQUEST
    assert beat(h, "a", 1, ["t"]).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    beat(h, "a", 0, ["t"])
    assert beat(h, "x", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(h, "a", 7).error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_a_group_id_names_one_kind_of_group() -> None:
    from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
    from protocol.messages.join_group import JoinGroupRequest

    h = Harness(topics={"t": 1}, config=SHARE)
    beat(h, "a", 0, ["t"])
    ctx = h.ctx(1)
    h.op(h.shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        group_id="sg", member_id="c", member_epoch=0, rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
        topic_partitions=[]), ctx, h.now))
    assert h.response(ctx.token).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    ctx = h.ctx(9)
    h.op(h.shard.join_group(JoinGroupRequest(group_id="sg", session_timeout_ms=10000, member_id="",
                                             protocol_type="consumer", protocols=[]), ctx, h.now))
    assert h.response(ctx.token).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert "sg" not in h.shard.state.consumer_groups and "sg" not in h.shard.state.groups


def test_leave_and_session_timeout_reassign() -> None:
    h = Harness(topics={"t": 2}, config=SHARE)
    a = beat(h, "a", 0, ["t"])
    a = beat(h, "a", a.member_epoch)
    b = beat(h, "b", 0, ["t"])
    left = beat(h, "b", -1)
    assert left.error_code == 0 and left.member_epoch == -1
    b_epoch = b.member_epoch
    a = beat(h, "a", a.member_epoch)
    # a never heartbeated while b was there: it still holds both partitions, only its epoch moves.
    assert a.assignment is None and a.member_epoch > b_epoch
    (member,) = h.shard.share_group_describe("sg").members
    assert [tp.partitions for tp in member.assignment.topic_partitions] == [[0, 1]]
    beat(h, "c", 0, ["t"])
    h.sleep(CoordinatorConfig().share_session_timeout_ms + 1)
    desc = h.shard.share_group_describe("sg")
    assert desc.group_state == "Empty" and desc.members == []


def test_new_partitions_are_picked_up() -> None:
    h = Harness(topics={"t": 1}, config=SHARE)
    a = beat(h, "a", 0, ["t"])
    a = beat(h, "a", a.member_epoch)
    h.topics.set("t", 3)
    h.op(h.shard.on_topics_changed({"t"}, h.now))
    again = beat(h, "a", a.member_epoch)  # the new partitions get initialized ...
    again = beat(h, "a", again.member_epoch)  # ... and then assigned
    assert again.member_epoch > a.member_epoch and len(partitions(again)) == 3


def test_describe_list_delete_and_restart() -> None:
    h = Harness(topics={"t": 2}, config=SHARE)
    beat(h, "a", 0, ["t"])
    b = beat(h, "b", 0, ["t"])
    beat(h, "b", b.member_epoch)
    a = beat(h, "a", 2)
    assert a.error_code == 0
    h.restart()
    desc = h.shard.share_group_describe("sg")
    assert desc.error_code == 0 and desc.group_state == "Stable" and desc.assignor_name == "simple"
    assert sorted(m.member_id for m in desc.members) == ["a", "b"]
    assert {p for m in desc.members for tp in m.assignment.topic_partitions for p in tp.partitions} == {0, 1}
    listed = h.shard.list_groups(None, {"share"})
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("sg", "share", "Stable")]
    assert h.shard.delete_group("sg", h.now)[0] == ErrorCode.NON_EMPTY_GROUP
    beat(h, "a", -1)
    beat(h, "b", -1)
    code, records = h.shard.delete_group("sg", h.now)
    assert code == 0 and records
    assert h.shard.share_group_describe("sg").error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_assignor_spreads_and_shares() -> None:
    out = assignor.assign({"a": frozenset({"t"}), "b": frozenset({"t"})}, {"t": (b"x" * 16, frozenset(range(4)))})
    assert out == {"a": {b"x" * 16: frozenset({0, 2})}, "b": {b"x" * 16: frozenset({1, 3})}}
    out = assignor.assign({m: frozenset({"t"}) for m in "abc"}, {"t": (b"x" * 16, frozenset({0}))})
    assert all(a == {b"x" * 16: frozenset({0})} for a in out.values())


def test_altering_offsets_initializes_partitions_and_creates_an_unknown_group() -> None:
    h = Harness(topics={"t": 2}, config=SHARE)
    t = Topics.id_of("t")
    code, records = h.shard.share_group_alter_offsets("new", {t: ("t", frozenset({1}))})
    assert code == ErrorCode.NONE and len(records) == 2  # the group's metadata, its initialized partition
    assert h.shard.share_group_view("new") == (0, {t: frozenset({1})})
    # Its first member is assigned the initialized partition at once, and the other one once it
    # is initialized too.
    a = beat(h, "a", 0, ["t"], group="new")
    assert a.member_epoch == 2 and partitions(a) == {(t.hex(), 1)}
    # A group with members is refused, and writes nothing.
    assert h.shard.share_group_alter_offsets("new", {t: ("t", frozenset({0}))}) == (ErrorCode.NON_EMPTY_GROUP, [])
