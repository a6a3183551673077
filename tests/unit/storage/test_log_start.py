"""DeleteRecords in storage: the log start is on disk before the log shows it, comes back on the
next open (a single broker's log-start-offset-checkpoint; a cluster owner's file beside the
segments), is never moved back by a later checkpoint, and is refused to a fenced owner."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.checkpoints import PARTITION_LOG_START, read_offset_checkpoint, read_partition_log_start
from storage.config import LogConfig
from storage.errors import FencedError, OffsetOutOfRangeError
from storage.fencing import Fence
from storage.log_manager import LogManager, LogStartMove

CFG = LogConfig(segment_bytes=1000)


def fill(mgr: LogManager, topic: str, count: int) -> None:
    log = mgr.get_or_create(topic, 0)
    for i in range(count):
        log.append([(b"k", b"v" * 40, i)])
    log.flush()


def test_the_checkpoint_holds_the_new_start_before_the_log_does(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, CFG)
    fill(mgr, "t", 100)
    log = mgr.get_or_create("t", 0)
    segments = log.segment_count
    assert mgr.move_log_start("t", 0, log, 57) == 57
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint")[("t", 0)] == 57
    assert log.log_start_offset == 57 and log.segment_count < segments
    assert log.segments()[0].base_offset <= 57 < log.segments()[0].next_offset
    assert mgr.move_log_start("t", 0, log, 10) == 57  # never back
    with pytest.raises(OffsetOutOfRangeError):
        mgr.move_log_start("t", 0, log, 101)
    mgr.checkpoint()
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint")[("t", 0)] == 57
    # Killed without a clean close: the start comes back from the checkpoint.
    again = LogManager(tmp_path, CFG)
    reopened = again.get_or_create("t", 0)
    assert reopened.log_start_offset == 57 and reopened.end_offset == 100
    again.close()


def test_a_cluster_owner_keeps_the_start_beside_the_segments(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, CFG, shared=True)
    fence = Fence("t-0", 5)
    log = mgr.get_or_create("t", 0, fence=fence)
    for i in range(50):
        log.append([(b"k", b"v" * 40, i)])
    log.flush()
    assert mgr.move_log_start("t", 0, log, 33) == 33
    assert read_partition_log_start(tmp_path / "t-0") == 33
    assert not (tmp_path / "log-start-offset-checkpoint").exists()
    # The next owner opens the partition from its files.
    other = LogManager(tmp_path, CFG, shared=True)
    assert other.get_or_create("t", 0, fence=Fence("t-0", 6)).log_start_offset == 33
    fence.revoke()
    with pytest.raises(FencedError):
        mgr.move_log_start("t", 0, log, 40)
    assert read_partition_log_start(tmp_path / "t-0") == 33
    assert (tmp_path / "t-0" / PARTITION_LOG_START).read_text() == "0\n33\n"


def test_retention_counted_before_a_deletion_removes_nothing_newer(tmp_path: Path) -> None:
    """Retention counts the segments to drop from what it saw; DeleteRecords drops some first: the
    count, applied to the segments left, must not reach segments above the log start."""
    mgr = LogManager(tmp_path, CFG)
    fill(mgr, "t", 100)
    log = mgr.get_or_create("t", 0)
    seen = log.segments()
    assert len(seen) > 4
    mgr.move_log_start("t", 0, log, seen[3].base_offset)
    left = [s.base_offset for s in log.segments()]
    assert left[0] == seen[3].base_offset
    assert log.delete_oldest_segments(2, seen[0].base_offset) == []
    assert [s.base_offset for s in log.segments()] == left and log.log_start_offset == seen[3].base_offset


def test_several_partitions_move_with_one_checkpoint_write(tmp_path: Path) -> None:
    mgr = LogManager(tmp_path, CFG)
    for topic in ("a", "b", "c"):
        fill(mgr, topic, 20)
    logs = {t: mgr.get_or_create(t, 0) for t in ("a", "b", "c")}
    mgr.move_log_start("c", 0, logs["c"], 15)
    results = mgr.move_log_starts([LogStartMove("a", 0, logs["a"], 5), LogStartMove("b", 0, logs["b"], 21),
                                   LogStartMove("c", 0, logs["c"], 3)])
    assert results[0] == 5 and isinstance(results[1], OffsetOutOfRangeError) and results[2] == 15
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("a", 0): 5, ("c", 0): 15,
                                                                                 ("b", 0): 0}
