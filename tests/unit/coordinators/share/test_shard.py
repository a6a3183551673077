"""The share coordinator's shard: Kafka's answers to each operation, ShareUpdate records between
snapshots as ``share.coordinator.snapshot.update.records.per.snapshot`` says, the cold-partition
snapshot timer, and replay: the records of any sequence of operations, encoded and decoded as
they are in ``__share_group_state`` and replayed into a fresh shard, rebuild the same state."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.coordinators.share.core.shard import COLD_SNAPSHOT_KEY, ShareCoordinatorShard, ShareResult
from broker.coordinators.share.core.state import StateBatch, combine
from protocol.errors import ErrorCode
from protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from protocol.messages.read_share_group_state import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from protocol.payloads import share_state_records
from protocol.payloads.share_state_records import SNAPSHOT, UPDATE

TOPIC = bytes(range(1, 17))
GROUP = "g"


def init(epoch: int = 0, start: int = 0, partition: int = 0) -> InitializeShareGroupStateRequest:
    D = InitializeShareGroupStateRequest.InitializeStateData
    return InitializeShareGroupStateRequest(group_id=GROUP, topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=partition, state_epoch=epoch, start_offset=start)])])


def write(batches: list[tuple[int, int, int, int]], start: int = -1, leader: int = 0, epoch: int = 0,
          partition: int = 0) -> WriteShareGroupStateRequest:
    D = WriteShareGroupStateRequest.WriteStateData
    P = D.PartitionData
    return WriteShareGroupStateRequest(group_id=GROUP, topics=[D(topic_id=TOPIC, partitions=[P(
        partition=partition, state_epoch=epoch, leader_epoch=leader, start_offset=start,
        state_batches=[P.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                       for f, last, s, c in batches])])])


def read(leader: int = -1, partition: int = 0) -> ReadShareGroupStateRequest:
    D = ReadShareGroupStateRequest.ReadStateData
    return ReadShareGroupStateRequest(group_id=GROUP, topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=partition, leader_epoch=leader)])])


def delete(partition: int = 0) -> DeleteShareGroupStateRequest:
    D = DeleteShareGroupStateRequest.DeleteStateData
    return DeleteShareGroupStateRequest(group_id=GROUP, topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=partition)])])


def summary(partition: int = 0) -> ReadShareGroupStateSummaryRequest:
    D = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
    return ReadShareGroupStateSummaryRequest(group_id=GROUP, topics=[D(topic_id=TOPIC, partitions=[
        D.PartitionData(partition=partition, leader_epoch=-1)])])


def error(result: ShareResult) -> int:
    reply = result.replies[0][1]
    return reply.results[0].partitions[0].error_code  # type: ignore[attr-defined]


def read_part(shard: ShareCoordinatorShard, partition: int = 0) -> ReadShareGroupStateResponse.ReadStateResult.PartitionResult:
    reply = shard.read_state(1, read(partition=partition), 0).replies[0][1]
    assert isinstance(reply, ReadShareGroupStateResponse)
    return reply.results[0].partitions[0]


def test_write_and_read_before_initialize_are_invalid_requests() -> None:
    shard = ShareCoordinatorShard(0)
    assert error(shard.write_state(1, write([(0, 0, 2, 1)]), 0)) == ErrorCode.INVALID_REQUEST
    assert error(shard.read_state(1, read(), 0)) == ErrorCode.INVALID_REQUEST
    assert not shard.states


def test_initialize_then_writes_are_read_back_merged() -> None:
    shard = ShareCoordinatorShard(0)
    result = shard.initialize_state(1, init(start=10), 5)
    assert error(result) == 0 and [r.record_type for r in result.records] == [SNAPSHOT]
    shard.write_state(1, write([(10, 14, 0, 1)]), 6)
    result = shard.write_state(1, write([(10, 11, 2, 1)], start=12), 7)
    assert [r.record_type for r in result.records] == [UPDATE]
    part = read_part(shard)
    assert part.error_code == 0 and part.start_offset == 12
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in part.state_batches] == [
        (12, 14, 0, 1)]


def test_an_older_epoch_is_fenced_and_a_newer_leader_epoch_is_written() -> None:
    shard = ShareCoordinatorShard(0)
    shard.initialize_state(1, init(epoch=3), 0)
    assert error(shard.write_state(1, write([], epoch=2), 0)) == ErrorCode.FENCED_STATE_EPOCH
    assert error(shard.initialize_state(1, init(epoch=2), 0)) == ErrorCode.FENCED_STATE_EPOCH
    result = shard.read_state(1, read(leader=4), 0)
    assert error(result) == 0 and len(result.records) == 1
    assert error(shard.write_state(1, write([], leader=3, epoch=3), 0)) == ErrorCode.FENCED_LEADER_EPOCH
    assert error(shard.read_state(1, read(leader=2), 0)) == ErrorCode.FENCED_LEADER_EPOCH


def test_a_snapshot_after_every_n_updates() -> None:
    shard = ShareCoordinatorShard(0, updates_per_snapshot=2)
    shard.initialize_state(1, init(), 0)
    kinds = [shard.write_state(1, write([(i, i, 2, 1)]), i).records[0].record_type for i in range(5)]
    assert kinds == [UPDATE, UPDATE, SNAPSHOT, UPDATE, UPDATE]
    assert shard.states[(GROUP, TOPIC, 0)].snapshot_epoch == 1


def test_cold_partitions_are_snapshotted_by_the_timer() -> None:
    shard = ShareCoordinatorShard(0, cold_snapshot_interval_ms=1000)
    assert [t.key for t in shard.on_loaded(0)] == [COLD_SNAPSHOT_KEY]
    shard.initialize_state(1, init(), 0)
    shard.initialize_state(1, init(partition=1), 0)
    shard.write_state(1, write([(0, 3, 2, 1)]), 0)
    result = shard.on_timer(COLD_SNAPSHOT_KEY, 1000)
    assert [(r.record_type, r.partition) for r in result.records] == [(SNAPSHOT, 0)]
    assert result.timers[0].deadline_ms == 2000  # type: ignore[union-attr]
    assert shard.on_timer(COLD_SNAPSHOT_KEY, 2000).records == []


def test_delete_tombstones_and_summary_reads_start_offset() -> None:
    shard = ShareCoordinatorShard(0)
    shard.initialize_state(1, init(epoch=1, start=7), 0)
    reply = shard.read_state_summary(1, summary(), 0).replies[0][1]
    assert isinstance(reply, ReadShareGroupStateSummaryResponse)
    assert (reply.results[0].partitions[0].start_offset, reply.results[0].partitions[0].state_epoch) == (7, 1)
    result = shard.delete_state(1, delete(), 0)
    assert error(result) == 0 and result.records[0].value is None
    assert not shard.states
    assert shard.delete_state(1, delete(), 0).records == []


def test_combine_newer_wins_and_cuts_at_start() -> None:
    old = [StateBatch(0, 9, 0, 1)]
    assert combine(old, [StateBatch(3, 4, 2, 1)], 2) == (
        StateBatch(2, 2, 0, 1), StateBatch(3, 4, 2, 1), StateBatch(5, 9, 0, 1))
    assert combine(old, [StateBatch(0, 9, 2, 1)], -1) == (StateBatch(0, 9, 2, 1),)


_batch = st.tuples(st.integers(0, 30), st.integers(0, 5), st.sampled_from([0, 2, 4]), st.integers(1, 4)).map(
    lambda t: (t[0], t[0] + t[1], t[2], t[3]))
_op = st.one_of(
    st.tuples(st.just("init"), st.integers(0, 1), st.integers(0, 3), st.integers(0, 20)),
    st.tuples(st.just("write"), st.integers(0, 1), st.lists(_batch, max_size=3), st.integers(-1, 25),
              st.integers(-1, 3)),
    st.tuples(st.just("read"), st.integers(0, 1), st.integers(-1, 4)),
    st.tuples(st.just("delete"), st.integers(0, 1)),
    st.tuples(st.just("cold"),),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_op, max_size=25), st.integers(1, 4))
def test_replaying_the_records_of_any_operations_rebuilds_the_state(ops: list[tuple], per_snapshot: int) -> None:
    shard = ShareCoordinatorShard(0, updates_per_snapshot=per_snapshot)
    log: list[tuple[bytes, bytes | None]] = []
    for now, op in enumerate(ops):
        kind = op[0]
        if kind == "init":
            result = shard.initialize_state(1, init(epoch=op[2], start=op[3], partition=op[1]), now)
        elif kind == "write":
            result = shard.write_state(1, write(op[2], start=op[3], leader=op[4], epoch=-1, partition=op[1]), now)
        elif kind == "read":
            result = shard.read_state(1, read(leader=op[2], partition=op[1]), now)
        elif kind == "delete":
            result = shard.delete_state(1, delete(op[1]), now)
        else:
            result = shard.on_timer(COLD_SNAPSHOT_KEY, now)
        log += [share_state_records.encode(r) for r in result.records]
    replayed = ShareCoordinatorShard(0, updates_per_snapshot=per_snapshot)
    for key, value in log:
        rec = share_state_records.decode(key, value)
        assert rec is not None
        replayed.replay(rec)
    assert replayed.states == shard.states
    assert replayed.update_counts == shard.update_counts
