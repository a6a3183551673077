"""Retention of ``delete``-policy logs by age and by size, oldest segments first."""

from __future__ import annotations

import os
from pathlib import Path

from storage.config import LogConfig
from storage.partition_log import PartitionLog
from storage.retention import apply_retention


def build(path: Path, cfg: LogConfig) -> PartitionLog:
    log, _ = PartitionLog.open(path, cfg, clock=lambda: 0)
    for i in range(10):
        log.append([(b"k", b"v" * 100, 1000 * i)])
        log.roll()
    return log


def test_retention_by_time(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(retention_ms=3500))
    assert apply_retention(log, now_ms=9000) == [0, 1, 2, 3, 4, 5]  # timestamps up to 5000 are > 3.5 s old
    assert log.log_start_offset == 6 and log.end_offset == 10
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".deleted")]
    assert apply_retention(log, now_ms=100_000) == [6, 7, 8, 9]  # all expired: the empty active stays
    assert log.segment_count == 1 and log.end_offset == 10 and log.log_start_offset == 10
    log.close()


def test_retention_by_bytes(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(retention_ms=-1, retention_bytes=500))
    per = log.segments()[0].size
    # Kafka's rule: drop whole segments while what remains is still at least retention.bytes
    assert apply_retention(log, now_ms=0) == list(range((10 * per - 500) // per))
    assert 500 <= log.size_bytes < 500 + per
    log.close()


def test_compacted_logs_are_not_trimmed_by_retention(tmp_path: Path) -> None:
    log = build(tmp_path, LogConfig(retention_ms=1, cleanup_policy="compact"))
    assert apply_retention(log, now_ms=10**9) == []
    log.close()
