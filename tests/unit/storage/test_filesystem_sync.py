"""syncfs through ctypes, and the two halves of a flush that one syncfs completes for many logs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from storage import filesystem_sync
from storage.config import LogConfig
from storage.errors import FencedError
from storage.fencing import Fence
from storage.partition_log import PartitionLog

SMALL = LogConfig(segment_bytes=4000, index_interval_bytes=300, segment_index_bytes=4096)
needs_syncfs = pytest.mark.skipif(not filesystem_sync.available(), reason="no syncfs that reports errors here")


@pytest.mark.parametrize(("release", "expected"), [
    ("6.1.0-18-amd64", (6, 1)),
    ("5.8.0", (5, 8)),
    ("5.4.0-150-generic", (5, 4)),
    ("4.19.0+", (4, 19)),
    ("6.18.44-fc-v669", (6, 18)),
    ("garbage", (0, 0)),
])
def test_kernel_release(release: str, expected: tuple[int, int]) -> None:
    assert filesystem_sync.kernel_release(release) == expected


@needs_syncfs
def test_syncfs_syncs_and_reports_a_bad_descriptor(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 4096)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        filesystem_sync.syncfs(fd)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as raised:
        filesystem_sync.syncfs(fd)  # closed now
    assert raised.value.errno == 9  # EBADF


def append(log: PartitionLog, n: int) -> None:
    for i in range(n):
        log.append([(b"k%d" % i, b"v" * 200, i)])


def test_a_claim_covers_what_was_appended_before_it(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    append(log, 5)
    claim = log.claim_flush()
    assert claim is not None
    append(log, 3)  # after the claim: the claim does not vouch for these
    assert claim.done() == 5
    assert log.recovery_point == 5
    assert log.flush() == 8  # the flush lock was let go
    log.close()


def test_an_undone_claim_leaves_its_segments_to_the_next_flush(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    append(log, 40)  # several segments of 4,000 bytes: rolled ones wait for their first flush
    rolled = log.segments()[:-1]
    assert rolled and all(s.unsynced for s in rolled)
    claim = log.claim_flush()
    assert claim is not None
    assert not any(s.unsynced for s in rolled)
    claim.undo()
    assert all(s.unsynced for s in rolled)
    assert log.recovery_point == 0
    assert log.flush() == 40
    assert not any(s.unsynced for s in log.segments())
    log.close()


def test_a_claim_holds_off_other_flushes_until_it_is_settled(tmp_path: Path) -> None:
    """A flush while a claim is open would report the claim's segments durable before the
    syncfs that makes them so has returned."""
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    append(log, 2)
    claim = log.claim_flush()
    assert claim is not None
    flushed: list[int] = []
    other = threading.Thread(target=lambda: flushed.append(log.flush()))
    other.start()
    other.join(timeout=0.2)
    assert other.is_alive() and flushed == []
    claim.done()
    other.join(timeout=30)
    assert flushed == [2]
    log.close()


def test_a_closed_log_has_nothing_to_claim(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    append(log, 1)
    log.close()
    assert log.claim_flush() is None


def test_a_fenced_log_refuses_a_claim_and_keeps_its_lock_free(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    append(log, 1)
    fence = Fence("t-0", 7)
    log.fence = fence
    fence.revoke()
    with pytest.raises(FencedError):
        log.claim_flush()
    with pytest.raises(FencedError):
        log.claim_flush()  # not deadlocked on its own flush lock
    log.abandon()


def test_a_log_fenced_during_the_sync_does_not_move_its_recovery_point(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    append(log, 3)
    fence = Fence("t-0", 7)
    log.fence = fence
    claim = log.claim_flush()
    assert claim is not None
    fence.revoke()
    with pytest.raises(FencedError):
        claim.done()
    assert log.recovery_point == 0
    with pytest.raises(FencedError):
        log.claim_flush()  # the lock was let go
    log.abandon()


def test_the_filesystem_type_comes_from_the_mount_with_the_same_device(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        dev = os.fstat(fd).st_dev
        mountinfo = tmp_path / "mountinfo"
        mountinfo.write_text(
            "22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n"
            f"29 1 {os.major(dev)}:{os.minor(dev)} / / rw,relatime shared:1 - xfs /dev/vda1 rw\n"
        )
        assert filesystem_sync.filesystem_type(fd, str(mountinfo)) == "xfs"
        mountinfo.write_text(f"40 1 {os.major(dev)}:{os.minor(dev)} / /data rw - nfs4 server:/export rw\n")
        assert filesystem_sync.filesystem_type(fd, str(mountinfo)) == "nfs4"
        assert "nfs4" not in filesystem_sync.LOCAL_FILESYSTEMS
        mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
        assert filesystem_sync.filesystem_type(fd, str(mountinfo)) is None
        assert filesystem_sync.filesystem_type(fd, str(tmp_path / "missing")) is None
    finally:
        os.close(fd)
