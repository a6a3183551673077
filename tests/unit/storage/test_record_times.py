"""The timestamp of the first record at or after an offset, read from a partition directory's
files alone (several segments, offset indexes, transaction markers), as the lag metrics read it
from an open log."""

from __future__ import annotations

from pathlib import Path

from broker.coordinators.group.service.lag_metrics import first_timestamp_at as from_open_log
from protocol.record_batch import build_end_txn_marker
from storage.config import LogConfig
from storage.partition_log import PartitionLog
from storage.record_times import first_timestamp_at

CFG = LogConfig(segment_bytes=4000, index_interval_bytes=300, segment_index_bytes=4096)


def test_every_offset_reads_the_timestamp_the_open_log_reads(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG)
    for i in range(0, 300, 3):
        log.append([(b"k", b"value-%d" % j, 1000 + 10 * j) for j in range(i, i + 3)])
    # A transaction marker at 300 is no record a consumer reads: the next record's time counts.
    log.append_batch(build_end_txn_marker(0, producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0,
                                          timestamp=99))
    log.append([(b"k", b"after-marker", 5000)])
    end = log.end_offset
    log.flush()
    assert len(log.segments()) > 2  # the lookup crosses segments and uses their indexes
    for offset in range(0, end):
        assert first_timestamp_at(tmp_path, offset, end) == from_open_log(log, offset, end), offset
    assert first_timestamp_at(tmp_path, 300, end) == 5000
    assert first_timestamp_at(tmp_path, 120, end) == 1000 + 10 * 120
    assert first_timestamp_at(tmp_path, end, end) is None  # nothing left to consume
    assert first_timestamp_at(tmp_path / "missing", 0, end) is None
    log.close()
