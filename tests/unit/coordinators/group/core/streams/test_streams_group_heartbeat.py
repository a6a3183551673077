"""StreamsGroupHeartbeat in the pure coordinator: a word count's topology (a source subtopology
writing a repartition topic, a counting subtopology with a changelog) joined by several members."""

from __future__ import annotations

from dataclasses import replace

from protocol.errors import ErrorCode
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


def create_internal(h: Harness) -> None:
    """What the shell does with the topics the heartbeat asked for."""
    for topic in h.shard.state.streams.to_create:
        h.topics.set(topic.name, topic.partitions)
    h.shard.state.streams.to_create.clear()


def test_internal_topics_are_asked_for_with_the_partitions_the_topology_needs_and_no_task_runs_before() -> None:
    h = Harness(CONFIG, topics={"input": 4})
    r = send(h, join("a", "p1"))
    assert r.error_code == 0 and r.member_epoch == 1
    assert [s.status_code for s in r.status] == [3]  # MISSING_INTERNAL_TOPICS
    assert tasks(r.active_tasks) == {}
    wanted = {(t.name, t.partitions, t.configs) for t in h.shard.state.streams.to_create}
    assert wanted == {(REPARTITION, 4, ()), (CHANGELOG, 4, (("cleanup.policy", "compact"),))}
    create_internal(h)
    r = beat(h, "a", 1, {"active_tasks": {}, "standby_tasks": {}, "warmup_tasks": {}})
    assert r.status == [] and r.member_epoch == 2
    assert tasks(r.active_tasks) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}


def test_missing_source_topics_are_a_status() -> None:
    h = Harness(CONFIG, topics={})
    r = send(h, join("a", "p1"))
    assert [(s.status_code, s.status_detail) for s in r.status] == [(1, "Source topics input are missing.")]
    assert h.shard.state.streams.to_create == []


def _two_members() -> Harness:
    h = Harness(CONFIG, topics={"input": 4, REPARTITION: 4, CHANGELOG: 4})
    send(h, join("a", "p1"))
    send(h, join("b", "p2"))
    return h


def test_a_second_member_gets_tasks_only_after_the_first_revokes_them_and_restart_is_replay() -> None:
    h = _two_members()
    a = h.shard.state.streams.groups[APP].members["a"]
    # a still holds everything from epoch 1 and must give half of it up first.
    r = beat(h, "a", a.member_epoch, {"active_tasks": tasks_of(a.assigned.active), "standby_tasks": {},
                                      "warmup_tasks": {}})
    kept = tasks(r.active_tasks)
    assert sum(len(p) for p in kept.values()) == 4 and r.member_epoch == 1
    r = beat(h, "b", 2, {"active_tasks": {}, "standby_tasks": {}, "warmup_tasks": {}})
    assert tasks(r.active_tasks) == {}  # unreleased: a has not revoked yet
    r = beat(h, "a", 1, {"active_tasks": kept, "standby_tasks": {}, "warmup_tasks": {}})
    assert r.member_epoch == 2
    r = beat(h, "b", 2, {"active_tasks": {}, "standby_tasks": {}, "warmup_tasks": {}})
    got_b = tasks(r.active_tasks)
    assert sum(len(p) for p in got_b.values()) == 4
    assert all(not (got_b.get(s, set()) & p) for s, p in kept.items())
    before = h.shard.streams_group_describe(APP)
    h.restart()
    after = h.shard.streams_group_describe(APP)
    assert after.to_dict() == before.to_dict()
    assert after.group_state == "Stable"




def test_a_member_whose_session_ends_has_its_tasks_taken_over() -> None:
    h = _two_members()
    for _ in range(3):
        for m in ("a", "b"):
            mem = h.shard.state.streams.groups[APP].members[m]
            beat(h, m, mem.member_epoch, {"active_tasks": tasks_of(mem.assigned.active),
                                          "standby_tasks": {}, "warmup_tasks": {}})
    h.sleep(5000)
    mem = h.shard.state.streams.groups[APP].members["a"]
    beat(h, "a", mem.member_epoch, {"active_tasks": tasks_of(mem.assigned.active), "standby_tasks": {},
                                    "warmup_tasks": {}})
    h.sleep(6000)  # b silent for 11 s
    group = h.shard.state.streams.groups[APP]
    assert list(group.members) == ["a"]
    mem = group.members["a"]
    r = beat(h, "a", mem.member_epoch, {"active_tasks": tasks_of(mem.assigned.active), "standby_tasks": {},
                                        "warmup_tasks": {}})
    assert tasks(r.active_tasks) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}


def test_standby_tasks_go_to_another_process() -> None:
    h = Harness(replace(CONFIG, streams_num_standby_replicas=1), topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    send(h, join("a", "p1"))
    send(h, join("b", "p2"))
    targets = h.shard.state.streams.groups[APP].targets
    for task in [("0", 0), ("0", 1), ("1", 0), ("1", 1)]:
        holders = [(m, kind) for m, t in targets.items() for kind, tasks_ in (("active", t.active),
                   ("standby", t.standby)) if task[1] in tasks_.get(task[0], frozenset())]
        # Only the counting subtopology has state: its tasks get a standby copy elsewhere.
        assert sorted(kind for _, kind in holders) == (["active", "standby"] if task[0] == "1" else ["active"])
        assert len({m for m, _ in holders}) == len(holders)


def test_kafkas_errors() -> None:
    h = _two_members()
    no_topology = join("c", "p3")
    no_topology.topology = None
    assert send(h, no_topology).error_code == ErrorCode.INVALID_REQUEST
    assert send(h, join("", "p3")).error_code == ErrorCode.INVALID_REQUEST
    assert beat(h, "nobody", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(h, "a", 7).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    bad = join("c", "p3")
    bad.topology.subtopologies[1].repartition_source_topics = []
    assert send(h, bad).error_code == ErrorCode.INVALID_REQUEST


def test_list_describe_and_delete() -> None:
    h = _two_members()
    listed = h.shard.list_groups(None, {"streams"})
    assert [(g.group_id, g.group_type, g.protocol_type) for g in listed] == [(APP, "streams", "streams")]
    assert h.shard.delete_group(APP, h.now)[0] == ErrorCode.NON_EMPTY_GROUP
    for m in ("a", "b"):
        assert beat(h, m, -1).error_code == 0
    assert h.shard.streams_group_describe(APP).group_state == "Empty"
    error, records = h.shard.delete_group(APP, h.now)
    assert error == 0 and records
    assert h.shard.streams_group_describe(APP).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_a_new_groups_first_assignment_waits_for_the_initial_delay() -> None:
    h = Harness(replace(CONFIG, streams_initial_rebalance_delay_ms=3000),
                topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    r = send(h, join("a", "p1"))
    assert [s.status_code for s in r.status] == [5] and r.member_epoch == 1 and tasks(r.active_tasks) == {}
    group = h.shard.state.streams.groups[APP]
    assert (group.group_epoch, group.assignment_epoch) == (2, 1)  # as Kafka 4.4 leaves a new group
    r = send(h, join("b", "p2"))
    assert [s.status_code for s in r.status] == [5] and tasks(r.active_tasks) == {}
    h.sleep(3000)
    got = {}
    for m in ("a", "b"):
        r = beat(h, m, 1, {"active_tasks": {}, "standby_tasks": {}, "warmup_tasks": {}})
        assert r.status == [] and r.member_epoch == 3
        got[m] = tasks(r.active_tasks)
    assert sorted(sum(len(p) for p in t.values()) for t in got.values()) == [2, 2]


def test_assignments_are_at_least_an_interval_apart() -> None:
    h = Harness(replace(CONFIG, streams_assignment_interval_ms=1000), topics={"input": 2, REPARTITION: 2, CHANGELOG: 2})
    send(h, join("a", "p1"))
    r = send(h, join("b", "p2"))
    assert [(s.status_code, s.status_detail) for s in r.status] == [
        (5, "Assignment delayed due to the configured assignment interval.")]
    assert r.member_epoch == 1 and tasks(r.active_tasks) == {}
    h.sleep(1000)
    r = beat(h, "b", 1, {"active_tasks": {}, "standby_tasks": {}, "warmup_tasks": {}})
    assert r.status == [] and r.member_epoch == 2


def test_startup_replay_of_the_log_rebuilds_the_group() -> None:
    """The broker loads a partition through the replay plan, which skips what later records
    overwrite: a batch of streams-group records is never skipped."""
    from broker.coordinators.group.core import GroupCoordinatorShard
    from broker.coordinators.group.service.replay_plan import replay_log
    from protocol.record_batch import build_simple_batch, iter_batches

    h = _two_members()
    for m in ("a", "b"):
        mem = h.shard.state.streams.groups[APP].members[m]
        beat(h, m, mem.member_epoch, {"active_tasks": tasks_of(mem.assigned.active), "standby_tasks": {},
                                      "warmup_tasks": {}})
    log = bytearray()
    for offset, (key, value) in enumerate(h.log):
        raw = bytearray(build_simple_batch([(key, value, h.now)]))
        raw[0:8] = offset.to_bytes(8, "big")
        log.extend(raw)
    shard = GroupCoordinatorShard(0, CONFIG, h.topics, lambda p: p)
    replay_log(lambda: iter_batches(bytes(log)), shard.replay)
    assert shard.streams_group_describe(APP).to_dict() == h.shard.streams_group_describe(APP).to_dict()
    assert len(shard.streams_group_describe(APP).members) == 2


def test_offset_delete_refuses_the_topics_a_running_topology_reads() -> None:
    from protocol.messages.offset_commit import OffsetCommitRequest
    from protocol.messages.offset_delete import OffsetDeleteRequest

    h = _two_members()
    a = h.shard.state.streams.groups[APP].members["a"]
    commit = OffsetCommitRequest(group_id=APP, generation_id_or_member_epoch=a.member_epoch, member_id="a",
                                 topics=[OffsetCommitRequest.Topic(name="input", partitions=[
                                     OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=5)])])
    ctx = h.ctx(9)
    h.op(h.shard.offset_commit(commit, ctx, h.now))
    assert h.response(ctx.token).topics[0].partitions[0].error_code == 0

    def delete() -> int:
        ctx = h.ctx(0)
        h.op(h.shard.offset_delete(OffsetDeleteRequest(group_id=APP, topics=[OffsetDeleteRequest.Topic(
            name="input", partitions=[OffsetDeleteRequest.Topic.Partition(partition_index=0)])]), ctx, h.now))
        answer = h.response(ctx.token)
        return answer.error_code or answer.topics[0].partitions[0].error_code

    assert delete() == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    for m in ("a", "b"):
        beat(h, m, -1)
    assert delete() == 0
    assert h.shard.offset_fetch_group(APP, [("input", [0])], False)[1][0][2] == -1


def test_offsets_before_the_streams_records_replay_into_the_streams_group() -> None:
    """KAFKA-20254: once compaction has removed a migrated classic group's tombstone, that group's
    offset commits come before the streams group's records in the log. Replay keeps both: the
    streams group with its members and the offsets, and no classic group of that id."""
    from broker.coordinators.group.core import GroupCoordinatorShard, decode_record
    from broker.coordinators.group.core.base.records import GroupMetadataRecord
    from protocol.messages.offset_commit import OffsetCommitRequest

    h = Harness(CONFIG, topics={"input": 4, REPARTITION: 4, CHANGELOG: 4})
    member, token = h.join_new(APP)  # a classic group of one member leaves; its offsets stay
    h.sleep(3000)  # the initial rebalance delay
    h.sync(APP, member, h.response(token).generation_id, {member: b""})
    h.leave(APP, [(member, None)])
    ctx = h.ctx(9)
    h.op(h.shard.offset_commit(OffsetCommitRequest(
        group_id=APP, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitRequest.Topic(name="input", partitions=[
            OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=42)])]), ctx, h.now))
    assert h.response(ctx.token).topics[0].partitions[0].error_code == 0
    send(h, join("a", "p1"))  # the empty classic group gives way to a streams group
    send(h, join("b", "p2"))
    assert APP not in h.shard.state.groups and APP in h.shard.state.streams.groups
    # Compaction has dropped the classic group's metadata and its tombstone; its commits are first.
    compacted = [(k, v) for k, v in h.log if not isinstance(decode_record(k, v), GroupMetadataRecord)]
    shard = GroupCoordinatorShard(0, CONFIG, h.topics, lambda p: p)
    for key, value in compacted:
        shard.replay(decode_record(key, value))
    assert shard.streams_group_describe(APP).to_dict() == h.shard.streams_group_describe(APP).to_dict()
    assert APP not in shard.state.groups
    assert shard.state.offsets.get(APP, "input", 0).offset == 42
