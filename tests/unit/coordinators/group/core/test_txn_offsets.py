"""TxnOffsetCommit on the group coordinator: offsets pending until the transaction's marker,
UNSTABLE_OFFSET_COMMIT for require_stable meanwhile, applied on COMMIT, dropped on ABORT, and the
same state after a restart that replays the transactional records and markers."""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode
from protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.unit.coordinators.group.core.consumer.members import Member
from tests.unit.coordinators.group.core.harness import Harness, Topics

PID = 7


def txn_commit(h: Harness, group: str, offsets: dict[tuple[str, int], int], *, producer_id: int = PID,
               version: int = 3, generation: int = -1, member_id: str = "") -> Any:
    topics: dict[str, list[Any]] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(TxnOffsetCommitRequest.Topic.Partition(
            partition_index=p, committed_offset=o, committed_metadata=None))
    req = TxnOffsetCommitRequest(transactional_id="tx", group_id=group, producer_id=producer_id, producer_epoch=0,
                                 generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
                                 topics=[TxnOffsetCommitRequest.Topic(name=t, topic_id=Topics.id_of(t), partitions=ps)
                                         for t, ps in topics.items()])
    ctx = h.ctx(version)
    h.op(h.shard.txn_offset_commit(req, ctx, h.now))
    return h.response(ctx.token)


def marker(h: Harness, commit: bool, producer_id: int = PID) -> None:
    h.op(h.shard.write_txn_marker(producer_id, 0, commit, 0))


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_pending_offsets_are_unstable_until_the_commit_marker(h: Harness) -> None:
    h.commit("g", {("t", 0): 3})
    assert errors(txn_commit(h, "g", {("t", 0): 10, ("t", 1): 20})) == {("t", 0): 0, ("t", 1): 0}
    fetched = h.fetch("g", [("t", [0, 1, 2])])
    assert fetched[("t", 0)] == (-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert fetched[("t", 1)] == (-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert fetched[("t", 2)] == (-1, -1, "", 0)
    # Without require_stable the committed offset shows, the pending one does not.
    _, rows = h.shard.offset_fetch_group("g", [("t", [0, 1])], False)
    assert [(t, p, o) for t, p, o, *_ in rows] == [("t", 0, 3), ("t", 1, -1)]
    marker(h, commit=True)
    assert h.fetch("g", [("t", [0, 1])]) == {("t", 0): (10, -1, "", 0), ("t", 1): (20, -1, "", 0)}


def test_an_abort_marker_drops_the_pending_offsets(h: Harness) -> None:
    h.commit("g", {("t", 0): 3})
    txn_commit(h, "g", {("t", 0): 10})
    marker(h, commit=False)
    assert h.fetch("g", [("t", [0])]) == {("t", 0): (3, -1, "", 0)}


def test_restart_replays_pending_offsets_and_markers(h: Harness) -> None:
    txn_commit(h, "g", {("t", 0): 10})
    marker(h, commit=True)
    txn_commit(h, "g", {("t", 0): 11}, producer_id=8)
    marker(h, commit=False, producer_id=8)
    txn_commit(h, "g", {("t", 1): 12}, producer_id=9)  # no marker yet: still pending after a restart
    before = h.shard.snapshot()
    assert before["pending_txn_offsets"] == {9: {("g", "t", 1): (12, "")}}
    h.restart()
    assert h.shard.snapshot() == before
    assert h.fetch("g", [("t", [0, 1])]) == {("t", 0): (10, -1, "", 0),
                                             ("t", 1): (-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    marker(h, commit=True, producer_id=9)
    assert h.fetch("g", [("t", [1])]) == {("t", 1): (12, -1, "", 0)}


def test_v3_checks_the_member_and_generation_of_a_classic_group(h: Harness) -> None:
    member, token = h.join_new("g")
    h.sleep(h.config.group_initial_rebalance_delay_ms)
    generation = h.response(token).generation_id
    h.sync("g", member, generation, {member: b""})
    assert set(errors(txn_commit(h, "g", {("t", 0): 1}, generation=generation + 1, member_id=member)).values()) == {
        ErrorCode.ILLEGAL_GENERATION}
    assert set(errors(txn_commit(h, "g", {("t", 0): 1}, generation=generation, member_id="other")).values()) == {
        ErrorCode.UNKNOWN_MEMBER_ID}
    assert set(errors(txn_commit(h, "g", {("t", 0): 1}, generation=generation, member_id=member)).values()) == {0}
    # Before v3 nothing names the member: the commit is taken as a simple consumer's.
    assert set(errors(txn_commit(h, "g", {("t", 0): 2}, version=2)).values()) == {0}


def test_a_member_of_no_group_is_refused_and_unknown_partitions_fail_alone(h: Harness) -> None:
    assert set(errors(txn_commit(h, "nogroup", {("t", 0): 1}, generation=3, member_id="m")).values()) == {
        ErrorCode.ILLEGAL_GENERATION}
    assert errors(txn_commit(h, "g", {("t", 0): 1, ("missing", 0): 1})) == {
        ("t", 0): 0, ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_expiry_waits_for_pending_offsets_and_delete_group_removes_them(h: Harness) -> None:
    h.commit("g", {("t", 0): 3})
    txn_commit(h, "g", {("t", 0): 10, ("t", 1): 11})
    h.sleep(h.config.offsets_retention_ms + h.config.offsets_retention_check_interval_ms)
    assert h.fetch("g", [("t", [0])])[("t", 0)][3] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert "g" in h.shard.state.groups
    error, _ = h.shard.delete_group("g", h.now)
    assert error == 0
    assert not h.shard.state.pending_txn.has_group("g")


def test_v6_tells_a_stale_member_epoch_and_an_unknown_group_as_kafka_4_4_does(h: Harness) -> None:
    """KIP-1319 (Kafka's ConsumerGroup.validateOffsetCommit, transactional): a commit that names
    no member is taken even with members in the group; a member's epoch other than its own is
    STALE_MEMBER_EPOCH from v6 and ILLEGAL_GENERATION before; a generation for a group that does not
    exist is GROUP_ID_NOT_FOUND from v6."""
    member = Member(h, "m1")
    member.beat()
    assert member.epoch > 0
    offsets = {("t", 0): 1}
    assert set(errors(txn_commit(h, "g", offsets, version=6)).values()) == {0}
    assert set(errors(txn_commit(h, "g", offsets, version=6, generation=member.epoch, member_id="m1")).values()) == {0}
    stale = member.epoch + 1
    assert set(errors(txn_commit(h, "g", offsets, version=6, generation=stale, member_id="m1")).values()) == {
        ErrorCode.STALE_MEMBER_EPOCH}
    assert set(errors(txn_commit(h, "g", offsets, version=5, generation=stale, member_id="m1")).values()) == {
        ErrorCode.ILLEGAL_GENERATION}
    assert set(errors(txn_commit(h, "g", offsets, version=6, generation=member.epoch, member_id="m9")).values()) == {
        ErrorCode.UNKNOWN_MEMBER_ID}
    assert set(errors(txn_commit(h, "nogroup", offsets, version=6, generation=3, member_id="m")).values()) == {
        ErrorCode.GROUP_ID_NOT_FOUND}
