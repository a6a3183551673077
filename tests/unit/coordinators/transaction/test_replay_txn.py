"""Startup replay of __consumer_offsets bytes holding transactional offset batches and markers."""

from __future__ import annotations

from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.records import OffsetCommitRecord, encode_record
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service.replay_plan import replay_log
from protocol.messages.offsets_log import OffsetCommitValue
from protocol.record_batch import build_end_txn_marker, build_simple_batch, iter_batches


class Topics:
    def partition_count(self, topic: str) -> int | None:
        return 4

    def topic_names(self) -> list[str]:
        return ["t"]


def commit(group: str, partition: int, offset: int) -> tuple[bytes, bytes | None, int]:
    value = OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=1, expire_timestamp=-1)
    return (*encode_record(OffsetCommitRecord(group, "t", partition, value)), 1)


def test_replay_applies_committed_drops_aborted_and_keeps_open_transactions_pending() -> None:
    log = bytearray()
    offset = 0

    def add(raw: bytes) -> None:
        nonlocal offset
        batch = next(iter_batches(raw))
        out = bytearray(raw)
        out[0:8] = offset.to_bytes(8, "big")
        log.extend(out)
        offset += batch.last_offset_delta + 1

    add(build_simple_batch([commit("g", 0, 1), commit("g", 1, 1)]))
    add(build_simple_batch([commit("g", 0, 5)], producer_id=5, producer_epoch=0, transactional=True))
    add(build_simple_batch([commit("g", 1, 6)], producer_id=6, producer_epoch=0, transactional=True))
    add(build_simple_batch([commit("g", 2, 7)], producer_id=7, producer_epoch=0, transactional=True))
    add(build_end_txn_marker(0, producer_id=5, producer_epoch=0, commit=True, coordinator_epoch=0, timestamp=1))
    add(build_end_txn_marker(0, producer_id=6, producer_epoch=0, commit=False, coordinator_epoch=0, timestamp=1))
    add(build_simple_batch([commit("h", 0, 9)]))

    shard = GroupCoordinatorShard(0, CoordinatorConfig(), Topics(), lambda p: p)  # type: ignore[arg-type]
    replay_log(lambda: iter_batches(bytes(log)), shard.replay, shard.replay_txn_offset, shard.replay_marker)
    snap = shard.snapshot()
    assert {k: v.offset for k, v in snap["offsets"]["g"].items()} == {("t", 0): 5, ("t", 1): 1}
    assert snap["pending_txn_offsets"] == {7: {("g", "t", 2): (7, "")}}
    _, rows = shard.offset_fetch_group("g", [("t", [2])], True)
    assert rows[0][5] == 88  # UNSTABLE_OFFSET_COMMIT
