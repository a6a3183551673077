"""When a shard writes its replay snapshot, and what its next load reads: real logs on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.coordinators.group.core.base.context import CoordinatorConfig
from broker.coordinators.group.core.base.records import OffsetCommitRecord, encode_record
from broker.coordinators.group.core.shard import GroupCoordinatorShard
from broker.coordinators.group.service import coordinator as shards
from broker.coordinators.group.service import replay_snapshot
from broker.coordinators.group.service.coordinator import SNAPSHOT_TAIL_RECORDS, GroupCoordinatorService
from broker.coordinators.group.service.replay_snapshot import ReplaySnapshot
from broker.log_runtime.runtime import LogRuntime, Partition
from protocol.messages.offsets_log import OffsetCommitValue
from storage.cleaner import clean
from storage.config import LogConfig
from storage.partition_log import PartitionLog

OFFSETS = LogConfig.offsets_topic(segment_bytes=4000)


class AnyTopic:
    def partition_count(self, topic: str) -> int | None:
        return 64


def commits(log: PartitionLog, keys: range, offset: int) -> None:
    entries = []
    for k in keys:
        value = OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=5, expire_timestamp=-1)
        key, raw = encode_record(OffsetCommitRecord(f"g{k % 7}", "t", k, value))
        entries.append((key, raw, 5))
    for i in range(0, len(entries), 10):
        log.append(entries[i : i + 10])
    log.flush()


class LoadedShard:
    """Partition 0 of a one-partition group coordinator, and what its last load read."""

    def __init__(self, manager: GroupCoordinatorService) -> None:
        self.manager = manager
        self.slot = manager.runtimes[0]

    @property
    def shard(self) -> GroupCoordinatorShard:
        return self.slot.shard

    @property
    def part(self) -> Partition | None:
        return self.slot.part

    @property
    def snapshot(self) -> ReplaySnapshot | None:
        return self.manager.loads[0].snapshot

    @snapshot.setter
    def snapshot(self, snapshot: ReplaySnapshot | None) -> None:
        self.manager.loads[0].snapshot = snapshot

    @property
    def snapshot_records(self) -> int:
        return self.manager.loads[0].snapshot_records

    @property
    def log_records(self) -> int:
        return self.manager.loads[0].log_records

    def snapshot_due(self, tail_records: int) -> bool:
        return self.manager.snapshot_due(self.slot, tail_records)

    def write_snapshot(self) -> ReplaySnapshot | None:
        return self.manager.write_snapshot(self.slot)


def loaded_shard(data: Path) -> LoadedShard:
    runtime = LogRuntime(data, LogConfig(), sync_flush=True, flush_interval_ms=1000, cleaner_backoff_ms=None)
    manager = GroupCoordinatorService(runtime, 1, CoordinatorConfig(num_partitions=1), AnyTopic(), OFFSETS,
                           on_transition=lambda t: None)
    shard = LoadedShard(manager)
    trio.run(shard.slot.load)
    assert shard.part is not None
    if shard.part.log.recovery_point == 0:
        # Opened without a recovery-point checkpoint (written only by the log runtime's close),
        # nothing counts as durable until a flush, and a snapshot covers only durable bytes.
        assert not shard.snapshot_due(1)
        shard.part.log.flush()
    return shard


def test_due_when_the_tail_is_long_enough_and_loads_use_what_was_written(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "__consumer_offsets-0", OFFSETS)
    commits(log, range(40), 1)
    log.close()
    shard = loaded_shard(tmp_path)
    assert shard.snapshot is None and shard.log_records == 40
    assert not shard.snapshot_due(41)
    assert shard.snapshot_due(40)
    written = shard.write_snapshot()
    assert written is not None and written.end_offset == 40 and written.records == 40
    shard.snapshot = written
    assert not shard.snapshot_due(1)
    assert shard.write_snapshot() is None  # nothing new

    part = shard.part
    assert part is not None
    commits(part.log, range(15), 2)
    # 15 new offsets: enough for a shutdown snapshot, not for a background one (which waits for
    # SNAPSHOT_TAIL_RECORDS, and for half of what the snapshot holds).
    assert shard.snapshot_due(1)
    assert not shard.snapshot_due(SNAPSHOT_TAIL_RECORDS)
    assert not shard.snapshot_due(10)  # 15 < 40 / 2
    commits(part.log, range(10), 3)
    assert shard.snapshot_due(10)
    shard.manager.write_snapshots()
    assert shard.snapshot is not None and shard.snapshot.end_offset == 65
    shard.manager.logs.close()

    again = loaded_shard(tmp_path)
    assert again.snapshot is not None and again.snapshot.end_offset == 65
    # The last commit of each of the 40 keys, and the first of each of the 7 groups (it created it).
    assert (again.snapshot_records, again.log_records) == (47, 0)
    loaded = again.shard.snapshot()
    path = replay_snapshot.path_of(again.part.log)  # type: ignore[union-attr]
    again.manager.logs.close()
    path.unlink()
    full = loaded_shard(tmp_path)
    assert full.snapshot is None and full.log_records == 65
    assert full.shard.snapshot() == loaded
    full.manager.logs.close()


def test_compaction_makes_a_new_snapshot_due(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "__consumer_offsets-0", OFFSETS)
    for n in range(6):
        commits(log, range(40), n)
    log.close()
    shard = loaded_shard(tmp_path)
    shard.snapshot = shard.write_snapshot()
    assert shard.snapshot is not None and not shard.snapshot_due(1)
    part = shard.part
    assert part is not None
    part.log.roll()
    assert clean(part.log, force=True) is not None
    assert shard.snapshot_due(1)
    assert shard.snapshot is None  # it no longer matches the log
    assert replay_snapshot.path_of(part.log).exists()  # until the next one replaces it
    shard.manager.logs.close()


def test_a_snapshot_that_cannot_be_taken_is_reported_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A periodic snapshot only shortens the next load: one that fails (out of file descriptors,
    say) is logged and tried again at the next check; the shards keep running."""
    log, _ = PartitionLog.open(tmp_path / "__consumer_offsets-0", OFFSETS)
    commits(log, range(SNAPSHOT_TAIL_RECORDS), 1)
    log.close()
    shard = loaded_shard(tmp_path)
    attempts: list[int] = []

    def out_of_descriptors(slot: object) -> ReplaySnapshot | None:
        attempts.append(1)
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(shard.manager, "write_snapshot", out_of_descriptors)
    monkeypatch.setattr(shards, "SNAPSHOT_CHECK_S", 0.01)

    async def two_checks() -> None:
        with trio.move_on_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(shard.manager._write_snapshots_periodically)
                while len(attempts) < 2:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()

    trio.run(two_checks)
    assert len(attempts) >= 2 and shard.snapshot is None
    shard.manager.logs.close()
