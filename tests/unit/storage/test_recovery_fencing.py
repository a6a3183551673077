"""Opening a partition under a claim that has passed: a node stopped while it opened a log (its
lease expired meanwhile, another node claimed the partition and writes it) repairs nothing when
it resumes. Every change recovery would make (a torn tail cut, indexes rebuilt or resized, a
leftover removed, a compaction swap finished, the epoch checkpoint rewritten) is checked against
the claim right before it is made, so the new owner's files stay byte for byte as it wrote them."""

from __future__ import annotations

import hashlib
import os
import resource
from pathlib import Path

import pytest

from protocol.record_batch import build_simple_batch
from storage.config import LogConfig
from storage.errors import FencedError
from storage.fencing import Fence
from storage.layout import CLEANED, DELETED, INDEX, LOG, TIME_INDEX, segment_path
from storage.leader_epochs import LeaderEpochCache
from storage.log_manager import LogManager
from storage.partition_log import PartitionLog
from storage.recovery import recover

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=200, segment_index_bytes=4096)


def files(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def lapsed(epoch: int = 7) -> Fence:
    """The claim of a node that was stopped: its lease could have expired (nobody revoked it)."""
    return Fence("t-0", epoch, valid=lambda: False)


def new_owner_mid_append(tmp_path: Path) -> tuple[Path, PartitionLog]:
    """A partition a new owner claimed and writes: several segments, and half of its next batch
    already in its active segment (a large write under way, seen from another process)."""
    manager = LogManager(tmp_path, SMALL, shared=True)
    fence = Fence("t-0", 8)
    log = manager.get_or_create("t", 0, fence=fence)
    log.begin_epoch(8)
    for i in range(40):
        log.append([(b"k%d" % i, b"value-%d" % i + b"x" * 100, 1000 + i)])
    log.flush()
    raw = build_simple_batch([(None, b"y" * 300, 2000 + i) for i in range(20)], log.end_offset)
    active = log.active_segment.path(LOG)
    with open(active, "ab") as f:
        f.write(raw[: len(raw) // 2])
    return tmp_path / "t-0", log


def test_a_recovery_whose_claim_has_passed_leaves_the_new_owners_files_alone(tmp_path: Path) -> None:
    directory, log = new_owner_mid_append(tmp_path)
    before = files(directory)
    with pytest.raises(FencedError):
        recover(directory, SMALL, 0, None, lapsed())
    assert files(directory) == before
    with pytest.raises(FencedError):
        PartitionLog.open(directory, SMALL, fence=lapsed())
    assert files(directory) == before
    # Unfenced (a single broker, or the claim still valid) the same directory is repaired.
    segments, report = recover(directory, SMALL, 0, None, Fence("t-0", 9))
    assert report.truncations and files(directory) != before
    for seg in segments:
        seg.close_files()
    log.abandon()


def test_leftovers_stay_for_the_owner_to_remove(tmp_path: Path) -> None:
    """Compaction output, .deleted files and indexes without a log are the owner's to tidy."""
    directory, log = new_owner_mid_append(tmp_path)
    base = log.segments()[0].base_offset
    segment_path(directory, base, LOG + CLEANED).write_bytes(b"unfinished compaction output")
    segment_path(directory, base, INDEX + DELETED).write_bytes(b"\0" * 8)
    segment_path(directory, 999_999, INDEX).write_bytes(b"\0" * 8)
    before = files(directory)
    with pytest.raises(FencedError):
        recover(directory, SMALL, 0, None, lapsed())
    assert files(directory) == before
    log.abandon()


def test_an_unfinished_whole_file_write_stays_for_the_owner_to_remove(tmp_path: Path) -> None:
    """The only leftover: a write the owner may still be about to rename."""
    directory, log = new_owner_mid_append(tmp_path)
    (directory / "leader-epoch-checkpoint.4242.tmp").write_bytes(b"0\n")
    before = files(directory)
    with pytest.raises(FencedError):
        recover(directory, SMALL, 0, None, lapsed())
    assert files(directory) == before
    log.abandon()


def test_the_epoch_checkpoint_is_not_cut_back_by_a_passed_claim(tmp_path: Path) -> None:
    """An opener that saw a shorter log than the epochs recorded (it listed the segments before the
    new owner rolled one) would drop the new owner's epoch from the checkpoint on its way out."""
    directory, log = new_owner_mid_append(tmp_path)
    checkpoint = directory / "leader-epoch-checkpoint"
    recorded = checkpoint.read_bytes()
    epochs = LeaderEpochCache.load(directory, lapsed().check)
    assert epochs.entries and epochs.entries[-1][0] == 8
    with pytest.raises(FencedError):
        epochs.truncate_from_end(epochs.entries[-1][1])
    with pytest.raises(FencedError):
        epochs.assign(9, log.end_offset)
    assert checkpoint.read_bytes() == recorded
    log.abandon()


def test_a_claim_rebuilds_the_epoch_checkpoint_from_the_batches(tmp_path: Path) -> None:
    """A checkpoint that lost an entry (an earlier owner's late rewrite) is corrected from the
    leader epochs the batches carry when the next owner opens the log: OffsetForLeaderEpoch then
    answers from what storage holds, not from a damaged file."""
    manager = LogManager(tmp_path, SMALL, shared=True)
    directory = tmp_path / "t-0"
    for epoch in (5, 8, 13):
        log = manager.get_or_create("t", 0, fence=Fence("t-0", epoch))
        log.begin_epoch(epoch)
        for i in range(10):
            log.append([(b"k%d" % i, b"epoch-%d" % epoch, 1000 + i)])
        log.close()
        manager.forget("t", 0)
    checkpoint = directory / "leader-epoch-checkpoint"
    assert LeaderEpochCache.load(directory).entries == [(5, 0), (8, 10), (13, 20)]
    checkpoint.write_text("0\n1\n5 0\n")  # epochs 8 and 13 lost
    log = manager.get_or_create("t", 0, fence=Fence("t-0", 21))
    assert log.epochs.entries == [(5, 0), (8, 10), (13, 20)]
    assert LeaderEpochCache.load(directory).entries == [(5, 0), (8, 10), (13, 20)]
    log.close()


def descriptors_into(directory: Path) -> list[str]:
    """The files of ``directory`` this process holds open."""
    held = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(directory) + os.sep):
            held.append(Path(target).name)
    return sorted(held)


def test_only_the_active_segment_holds_descriptors(tmp_path: Path) -> None:
    """A partition of any number of segments is opened within a few descriptors: the active
    segment holds its three files, a rolled one none (its indexes are in memory, its .log is opened
    for each read). Kafka keeps a file channel per segment, and a broker with tens of thousands of
    small segments runs out of descriptors. Written, reopened (recovered) and read alike."""
    directory = tmp_path / "t-0"
    log, _ = PartitionLog.open(directory, SMALL)
    for i in range(200):
        log.append([(b"k%d" % (i % 5), b"value-%d" % i + b"x" * 100, 1000 + i)])
    log.flush()

    def expected(log: PartitionLog) -> list[str]:
        active = log.active_segment
        return sorted([active.path(LOG).name, active.path(INDEX).name, active.path(TIME_INDEX).name])

    assert log.segment_count > 10
    assert descriptors_into(directory) == expected(log)
    log.close()
    assert descriptors_into(directory) == []
    log, report = PartitionLog.open(directory, SMALL)
    assert report.clean and descriptors_into(directory) == expected(log)
    # Every record still reads back, through the indexes kept in memory and each file opened anew.
    assert sum(b.records_count for b in log.batches()) == 200
    assert log.read(0, 1 << 20)
    assert descriptors_into(directory) == expected(log)
    log.close()


def test_a_log_of_more_segments_than_descriptors_opens(tmp_path: Path) -> None:
    """Opening (recovering) a log needs no descriptor per segment: one of 300 segments opens, is
    written and read under an open-file limit 64 above what the process holds already."""
    directory = tmp_path / "t-0"
    one_batch_each = LogConfig(segment_bytes=256)
    log, _ = PartitionLog.open(directory, one_batch_each)
    for i in range(300):
        log.append([(b"k", b"v" * 120, 1000 + i)])
    log.flush()
    assert log.segment_count == 300
    log.close()
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 64, before[1]))
    try:
        log, _report = PartitionLog.open(directory, one_batch_each)
        log.append([(b"k", b"after", 5000)])
        log.flush()
        assert sum(b.records_count for b in log.batches()) == 301
        log.close()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


def test_a_rolled_segment_replaced_on_disk_is_not_read(tmp_path: Path) -> None:
    """A rolled segment opens its .log again for each read, and only the file it opened: one
    replaced underneath (another node compacted it after this one lost the partition) raises
    rather than serving bytes this log never indexed."""
    directory = tmp_path / "t-0"
    log, _ = PartitionLog.open(directory, SMALL)
    for i in range(60):
        log.append([(b"k", b"v" * 120, 1000 + i)])
    log.flush()
    first = log.segments()[0]
    path = first.path(LOG)
    path.with_name("copy").write_bytes(path.read_bytes())
    os.replace(path.with_name("copy"), path)
    with pytest.raises(OSError):
        log.read(0, 1 << 20)
    log.close()
