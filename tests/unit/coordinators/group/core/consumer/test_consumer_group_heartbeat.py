"""ConsumerGroupHeartbeat on one shard (fake clock, records round-tripped through their bytes):
members join and converge without ever sharing a partition, leave, time out, come back as the same
static instance; Kafka's errors; and a restart rebuilds every consumer group from its records."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages.offset_commit import OffsetCommitRequest
from tests.unit.coordinators.group.core.consumer.members import CONFIG, Member, converge, group_view
from tests.unit.coordinators.group.core.harness import Harness, Topics

T = Topics.id_of("t")








def test_two_members_split_a_topic_without_sharing_a_partition_and_restart_is_replay() -> None:
    h = Harness(CONFIG)
    a, b = Member(h, "a"), Member(h, "b")
    first = a.beat()
    # A new group starts at epoch 1 (as Kafka 4.4's): the first join bumps it to 2.
    assert (first.error_code, first.member_epoch, first.heartbeat_interval_ms) == (0, 2, 500)
    assert a.held() == {(T, p) for p in range(4)}
    converge([a, b])
    assert len(a.held()) == len(b.held()) == 2 and a.held() | b.held() == {(T, p) for p in range(4)}
    assert h.shard.state.consumer_groups["g"].state.value == "Stable"
    before = group_view(h)
    h.restart()
    assert group_view(h) == before


def test_a_leaving_member_hands_its_partitions_to_the_other() -> None:
    h = Harness(CONFIG)
    a, b = Member(h, "a"), Member(h, "b")
    converge([a, b])
    assert b.beat(epoch=-1).member_epoch == -1
    converge([a])
    assert a.held() == {(T, p) for p in range(4)}


def test_a_silent_member_is_fenced_after_the_session_timeout() -> None:
    h = Harness(CONFIG)
    a, b = Member(h, "a"), Member(h, "b")
    converge([a, b])
    for _ in range(14):  # b goes silent; a keeps heartbeating every 500 ms
        h.sleep(500)
        a.beat()
    assert "b" not in h.shard.state.consumer_groups["g"].members
    assert a.held() == {(T, p) for p in range(4)}
    assert b.beat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_static_member_returning_under_a_new_id_gets_its_partitions_back() -> None:
    h = Harness(CONFIG)
    a, b = Member(h, "a", instance_id="ia"), Member(h, "b", instance_id="ib")
    converge([a, b])
    mine = b.held()
    assert b.beat(epoch=-2).member_epoch == -2
    back = Member(h, "b2", instance_id="ib")
    resp = back.beat()
    assert resp.error_code == 0
    assert back.held() == mine
    # Another instance may not take an instance id whose member has not left.
    thief = Member(h, "x", instance_id="ia")
    assert thief.beat().error_code == ErrorCode.UNRELEASED_INSTANCE_ID


def test_kafkas_errors() -> None:
    h = Harness(CONFIG)
    a = Member(h, "a")
    assert a.beat(server_assignor="sticky").error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert Member(h, "r", regex="(").beat().error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert Member(h, "z").beat(epoch=3).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    a.beat()
    assert a.beat(epoch=a.epoch + 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert Member(h, "nobody").beat(epoch=1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert Member(h, "").beat(rebalance_timeout_ms=-1).error_code == ErrorCode.INVALID_REQUEST
    # A fenced member rejoins under its own id with epoch 0 and is served again.
    assert a.beat(epoch=0).error_code == 0


def test_commits_carry_the_member_epoch() -> None:
    h = Harness(CONFIG)
    a = Member(h, "a")
    a.beat()

    def commit(epoch: int, member_id: str = "a") -> int:
        req = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=epoch, member_id=member_id, topics=[
            OffsetCommitRequest.Topic(name="t", partitions=[OffsetCommitRequest.Topic.Partition(
                partition_index=0, committed_offset=5, committed_metadata="")])])
        ctx = h.ctx(9)
        h.op(h.shard.offset_commit(req, ctx, h.now))
        return int(h.response(ctx.token).topics[0].partitions[0].error_code)

    assert commit(a.epoch) == 0
    assert commit(a.epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(a.epoch, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(-1, "") == ErrorCode.UNKNOWN_MEMBER_ID  # an admin may not while the group has members


def test_offset_fetch_checks_the_member_that_asks() -> None:
    h = Harness(CONFIG)
    a = Member(h, "a")
    a.beat()
    fetch = h.shard.offset_fetch_group
    assert fetch("g", None, False, "a", a.epoch)[0] == 0
    assert fetch("g", None, False, "a", a.epoch - 1)[0] == ErrorCode.STALE_MEMBER_EPOCH
    assert fetch("g", None, False, "stranger", 1)[0] == ErrorCode.UNKNOWN_MEMBER_ID
    assert fetch("g", None, False, None, -1)[0] == 0  # an admin
