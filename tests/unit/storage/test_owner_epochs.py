"""A new owner of a shared partition log: its epoch in every batch and the checkpoint, a new
segment, and recovery that cuts what the replaced owner appended after the hand-over."""

from __future__ import annotations

from pathlib import Path

from protocol.record_batch import decode_records, iter_batches
from storage.checkpoints import read_leader_epochs
from storage.config import LogConfig
from storage.partition_log import PartitionLog


def _epochs_on_disk(directory: Path) -> list[tuple[int, int]]:
    out = []
    for log in sorted(directory.glob("*.log")):
        out += [(b.base_offset, b.partition_leader_epoch) for b in iter_batches(log.read_bytes(), verify_crc=False)]
    return out


def test_a_new_owner_writes_at_its_epoch_in_a_new_segment(tmp_path: Path) -> None:
    old, _ = PartitionLog.open(tmp_path, LogConfig())
    old.begin_epoch(5)
    old.append([(b"k", b"v1", 1)])
    old.flush()
    new, _ = PartitionLog.open(tmp_path, LogConfig())
    assert new.begin_epoch(9) == 9
    new.append([(b"k", b"v2", 2)])
    new.flush()
    assert new.segment_count == 2
    assert read_leader_epochs(tmp_path) == [(5, 0), (9, 1)]
    assert _epochs_on_disk(tmp_path) == [(0, 5), (1, 9)]
    # An epoch at or below what the log has seen is raised above it.
    assert new.begin_epoch(3) == 10
    new.close()
    old.close()


def test_recovery_cuts_what_a_replaced_owner_appended_after_the_hand_over(tmp_path: Path) -> None:
    old, _ = PartitionLog.open(tmp_path, LogConfig())
    old.begin_epoch(1)
    old.append([(b"k", b"before", 1)])
    old.flush()
    new, _ = PartitionLog.open(tmp_path, LogConfig())
    new.begin_epoch(2)
    new.append([(b"k", b"new-owner", 2)])
    new.flush()
    # The replaced owner, paused until now, writes into the segment it still has open.
    old.append([(b"k", b"stale", 3)])
    old.flush()
    new.close()
    old.close()
    log, report = PartitionLog.open(tmp_path, LogConfig())
    values = [r.value for b in log.batches() for r in decode_records(b)]
    assert values == [b"before", b"new-owner"]
    assert any(t.kind == "stale-owner" for t in report.truncations)
    log.close()


def test_an_empty_active_segment_is_replaced_so_a_replaced_owner_writes_where_nobody_reads(tmp_path: Path) -> None:
    old, _ = PartitionLog.open(tmp_path, LogConfig())
    old.begin_epoch(1)
    new, _ = PartitionLog.open(tmp_path, LogConfig())
    new.begin_epoch(2)
    old.append([(b"k", b"stale", 1)])
    old.flush()
    new.append([(b"k", b"fresh", 2)])
    new.flush()
    new.close()
    old.close()
    log, _ = PartitionLog.open(tmp_path, LogConfig())
    assert [r.value for b in log.batches() for r in decode_records(b)] == [b"fresh"]
    log.close()
