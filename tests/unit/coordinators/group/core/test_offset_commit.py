"""OffsetCommit v0-10: group validation per errors.md, per-partition checks, what is written."""

from __future__ import annotations

import pytest

from broker.coordinators.group.core import OffsetCommitRecord, encode_record
from tests.unit.coordinators.group.core.harness import Harness

NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, ILLEGAL_GENERATION = 0, 3, 12, 22
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_ID = 25, 27, 69, 100


def test_commit_without_membership_makes_a_simple_group(h: Harness) -> None:
    assert h.commit("s", {("t", 0): 10, ("t", 1): 11}, metadata=None) == {("t", 0): NONE, ("t", 1): NONE}
    recs = h.last.records
    assert [(r.group, r.topic, r.partition) for r in recs] == [("s", "t", 0), ("s", "t", 1)]
    v = recs[0].value
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp) == (10, -1, "", h.now, -1)
    assert encode_record(recs[0])[1][:2] == b"\x00\x03"  # value version 3
    assert h.state("s") == "Empty" and h.group("s").protocol_type is None
    assert h.fetch("s", [("t", [0, 1])]) == {("t", 0): (10, -1, "", 0), ("t", 1): (11, -1, "", 0)}


@pytest.mark.parametrize(("version", "error"), [(1, ILLEGAL_GENERATION), (8, ILLEGAL_GENERATION),
                                                (9, GROUP_ID_NOT_FOUND)])
def test_unknown_group_with_a_generation(h: Harness, version: int, error: int) -> None:
    assert h.commit("nope", {("t", 0): 1}, generation=0, member_id="m", version=version) == {("t", 0): error}
    assert "nope" not in h.shard.state.groups and h.last.records == []


def test_member_commits_are_validated(h: Harness) -> None:
    (a, _b), gen = h.stable(n=2)
    assert h.commit("g", {("t", 0): 1}, generation=gen, member_id=a) == {("t", 0): NONE}
    assert h.commit("g", {("t", 0): 1}, generation=gen + 1, member_id=a) == {("t", 0): ILLEGAL_GENERATION}
    assert h.commit("g", {("t", 0): 1}, generation=gen, member_id="x") == {("t", 0): UNKNOWN_MEMBER_ID}
    # generation -1 without a member id is only for groups without members
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): UNKNOWN_MEMBER_ID}
    assert h.commit("g", {("t", 0): 1}, version=0) == {("t", 0): UNKNOWN_MEMBER_ID}


def test_commits_during_a_rebalance(h: Harness) -> None:
    (a, b), gen = h.stable(n=2)
    h.join("g", a)
    # PreparingRebalance: still the old generation's commits are accepted and keep b alive.
    assert h.commit("g", {("t", 0): 5}, generation=gen, member_id=b) == {("t", 0): NONE}
    assert h.timers[f"heartbeat:g:{b}"] == h.now + 10_000
    h.join("g", b)
    assert h.state("g") == "CompletingRebalance"
    assert h.commit("g", {("t", 0): 6}, generation=gen + 1, member_id=b) == {("t", 0): REBALANCE_IN_PROGRESS}


def test_an_emptied_group_accepts_admin_commits(h: Harness) -> None:
    (a,), gen = h.stable()
    h.leave("g", [(a, None)])
    assert h.commit("g", {("t", 0): 7}) == {("t", 0): NONE}
    assert h.commit("g", {("t", 0): 7}, generation=gen + 1, member_id=a) == {("t", 0): UNKNOWN_MEMBER_ID}


def test_per_partition_checks(h: Harness) -> None:
    big = "é" * 4097
    result = h.commit("s", {("t", 0): 1, ("t", 9): 1, ("missing", 0): 1}, metadata="m")
    assert result == {("t", 0): NONE, ("t", 9): UNKNOWN_TOPIC_OR_PARTITION, ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert h.commit("s", {("t", 1): 1}, metadata=big) == {("t", 1): OFFSET_METADATA_TOO_LARGE}
    assert h.commit("s", {("t", 1): 1}, metadata="x" * 4096) == {("t", 1): NONE}
    # Metadata length counts UTF-16 units, as Java does: one emoji is two.
    assert h.commit("s", {("t", 2): 1}, metadata="\U0001f600" * 2049) == {("t", 2): OFFSET_METADATA_TOO_LARGE}
    # A request with only unknown partitions never reaches the group checks.
    assert h.commit("nope", {("missing", 0): 1}, generation=3, version=9) == {("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}


def test_topic_errors_come_before_group_errors(h: Harness) -> None:
    result = h.commit("nope", {("t", 0): 1, ("missing", 0): 1}, generation=3, member_id="m", version=9)
    assert result == {("t", 0): GROUP_ID_NOT_FOUND, ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}


def test_negative_offsets_are_stored_as_given(h: Harness) -> None:
    assert h.commit("s", {("t", 0): -1, ("t", 1): -42}) == {("t", 0): NONE, ("t", 1): NONE}
    assert h.fetch("s", [("t", [0, 1])]) == {("t", 0): (-1, -1, "", 0), ("t", 1): (-42, -1, "", 0)}


def test_leader_epoch_is_kept_from_v6(h: Harness) -> None:
    h.commit("s", {("t", 0): 3}, leader_epoch=7, version=6)
    h.commit("s", {("t", 1): 3}, leader_epoch=7, version=5)
    assert h.fetch("s", [("t", [0, 1])]) == {("t", 0): (3, 7, "", 0), ("t", 1): (3, -1, "", 0)}


def test_retention_time_of_v2_to_v4_becomes_an_expire_timestamp(h: Harness) -> None:
    h.commit("s", {("t", 0): 3}, retention=60_000, version=2, metadata="md")
    [rec] = h.last.records
    assert isinstance(rec, OffsetCommitRecord) and rec.value.expire_timestamp == h.now + 60_000
    _key, value = encode_record(rec)
    assert value is not None and value[:2] == b"\x00\x01"  # value version 1 carries the expiry
    h.commit("s", {("t", 1): 3}, retention=60_000, version=5)
    assert h.last.records[0].value.expire_timestamp == -1


def test_v1_explicit_commit_timestamp_is_kept(h: Harness) -> None:
    from protocol.messages.offset_commit import OffsetCommitRequest

    req = OffsetCommitRequest(group_id="s", topics=[OffsetCommitRequest.Topic(name="t", partitions=[
        OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=1, commit_timestamp=1234,
                                            committed_metadata="")])])
    h.op(h.shard.offset_commit(req, h.ctx(1), h.now))
    assert h.last.records[0].value.commit_timestamp == 1234


def test_commit_result_is_replayed_and_survives_restart(h: Harness) -> None:
    (a,), gen = h.stable()
    h.commit("g", {("t", 0): 100, ("u", 3): 200}, generation=gen, member_id=a, metadata="meta")
    h.restart()
    assert h.fetch("g") == {("t", 0): (100, -1, "meta", 0), ("u", 3): (200, -1, "meta", 0)}


def test_v10_topics_by_id_need_the_broker_to_resolve_them(h: Harness) -> None:
    from protocol.messages.offset_commit import OffsetCommitRequest

    topic_id = bytes(range(16))

    def request() -> object:
        return OffsetCommitRequest(group_id="s", topics=[OffsetCommitRequest.Topic(topic_id=topic_id, partitions=[
            OffsetCommitRequest.Topic.Partition(partition_index=0, committed_offset=1)])])

    ctx = h.ctx(10)
    h.op(h.shard.offset_commit(request(), ctx, h.now))
    [topic] = h.response(ctx.token).topics
    assert (topic.topic_id, topic.partitions[0].error_code) == (topic_id, UNKNOWN_TOPIC_ID)

    h.topics.topic_name = lambda tid: "t" if tid == topic_id else None  # type: ignore[attr-defined]
    ctx = h.ctx(10)
    h.op(h.shard.offset_commit(request(), ctx, h.now))
    assert h.response(ctx.token).topics[0].partitions[0].error_code == NONE
    assert h.fetch("s") == {("t", 0): (1, -1, "", 0)}
