"""A log's coverage holds while the bytes below its end offset stay as they were, and a checked
file refuses anything but what was written."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.checked_file import CheckedFileError, read_checked, write_checked
from storage.config import LogConfig
from storage.log_coverage import CoverageFormatError, LogCoverage
from storage.partition_log import PartitionLog

CONFIG = LogConfig(segment_bytes=400, cleanup_policy="compact")


def filled(tmp_path: Path, batches: int = 8) -> PartitionLog:
    log, _ = PartitionLog.open(tmp_path / "p-0", CONFIG)
    for i in range(batches):
        log.append([(b"k%d" % (i % 3), b"v" * 40, 1000 + i), (b"x", b"y", 1000 + i)])
    log.flush()
    return log


def test_coverage_ends_only_at_a_batch_end(tmp_path: Path) -> None:
    log = filled(tmp_path)
    assert log.segment_count > 1
    assert log.coverage(0) is None
    assert log.coverage(3) is None  # inside the second batch
    assert log.coverage(log.end_offset + 2) is None
    coverage = log.coverage(6)
    assert coverage is not None and coverage.end_offset == 6
    assert log.covers(coverage)
    whole = log.coverage(log.end_offset)
    assert whole is not None and len(whole.segments) == log.segment_count
    log.close()


def test_appends_keep_it_and_roundtrip_through_bytes(tmp_path: Path) -> None:
    log = filled(tmp_path, 2)
    coverage = log.coverage(log.end_offset)
    assert coverage is not None
    log.append([(b"k9", b"v", 5000)])
    log.roll()
    log.append([(b"k9", b"w", 5001)])
    assert log.covers(coverage)
    assert LogCoverage.from_bytes(coverage.to_bytes()) == coverage
    with pytest.raises(CoverageFormatError):
        LogCoverage.from_bytes(coverage.to_bytes()[:-1])
    log.close()


def test_removed_or_cut_segments_break_it(tmp_path: Path) -> None:
    log = filled(tmp_path)
    coverage = log.coverage(log.end_offset)
    assert coverage is not None
    log.delete_oldest_segments(1)
    assert not log.covers(coverage)
    log.close()

    log = filled(tmp_path / "again")
    coverage = log.coverage(log.end_offset)
    assert coverage is not None
    directory = log.directory
    log.close()
    last = sorted(directory.glob("*.log"))[-1]
    with open(last, "r+b") as f:
        f.truncate(last.stat().st_size - 1)
    log, report = PartitionLog.open(directory, CONFIG)
    assert not report.clean
    assert not log.covers(coverage)
    log.close()


def test_a_copy_of_the_log_is_not_the_log(tmp_path: Path) -> None:
    """Same bytes in other files (a directory copied elsewhere): not trusted."""
    log = filled(tmp_path)
    coverage = log.coverage(log.end_offset)
    assert coverage is not None
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in log.directory.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    other, _ = PartitionLog.open(copy, CONFIG)
    assert other.end_offset == log.end_offset
    assert not other.covers(coverage)
    other.close()
    log.close()


def test_checked_file_refuses_damage(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert read_checked(path, b"ABCD") is None
    write_checked(path, b"ABCD", b"payload bytes")
    assert read_checked(path, b"ABCD") == b"payload bytes"
    assert not (tmp_path / "f.tmp").exists()
    with pytest.raises(CheckedFileError, match="kind"):
        read_checked(path, b"WXYZ")
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckedFileError, match="CRC"):
        read_checked(path, b"ABCD")
    path.write_bytes(bytes(raw[:-3]))
    with pytest.raises(CheckedFileError, match="payload bytes"):
        read_checked(path, b"ABCD")
    path.write_bytes(b"AB")
    with pytest.raises(CheckedFileError, match="header"):
        read_checked(path, b"ABCD")
