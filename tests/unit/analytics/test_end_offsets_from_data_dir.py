from __future__ import annotations

from pathlib import Path

from analytics.job import end_offsets_from_data_dir
from storage.config import LogConfig
from storage.partition_log import PartitionLog


def test_lag_uses_the_topic_logs_found_in_the_data_dir(tmp_path: Path) -> None:
    for name, count in (("orders-0", 5), ("orders-1", 2), ("__consumer_offsets-3", 9)):
        log, _ = PartitionLog.open(tmp_path / name, LogConfig())
        log.append([(b"k", b"v", 1000 + i) for i in range(count)])
        log.flush()
        log.close()
    ends = end_offsets_from_data_dir(str(tmp_path))
    assert ends is not None
    assert sorted((e.topic, e.partition, e.end_offset) for e in ends) == [("orders", 0, 5), ("orders", 1, 2)]
    assert all(e.sampled_at_ms for e in ends)


def test_no_topic_logs_means_no_end_offsets(tmp_path: Path) -> None:
    assert end_offsets_from_data_dir(str(tmp_path)) is None
    assert end_offsets_from_data_dir("s3://bucket/kafka") is None
