"""The record timestamp lag in seconds is measured from, looked up in a real partition log, and the
group allow-list of the lag metrics."""

from __future__ import annotations

from pathlib import Path

from broker.coordinators.group.service.lag_metrics import GroupFilter, first_timestamp_at
from protocol.record import Record
from protocol.record_batch import build_batch, build_end_txn_marker
from storage.config import LogConfig
from storage.partition_log import PartitionLog

SMALL = LogConfig(segment_bytes=4000, index_interval_bytes=300, segment_index_bytes=4096)


def test_timestamp_of_the_record_at_an_offset_inside_batches_and_segments(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    for i in range(0, 300, 3):  # several segments, three records a batch
        log.append([(None, b"v" * 40, 10_000 + j * 7) for j in range(i, i + 3)])
    hw = log.end_offset
    assert len(log.segments()) > 2
    for offset in (0, 1, 2, 3, 151, 298, 299):
        assert first_timestamp_at(log, offset, hw) == 10_000 + offset * 7
    assert first_timestamp_at(log, hw, hw) is None  # consumed everything
    assert first_timestamp_at(log, 10, 10) is None  # at the high watermark: nothing durable to read
    log.delete_records_before(30)
    assert first_timestamp_at(log, 5, hw) == 10_000 + 30 * 7  # below the log start: its first record


def test_log_append_time_batches_stamp_every_record_with_the_batch_time(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    records = [Record(i, i, None, b"x", []) for i in range(4)]
    log.append_batch(build_batch(records, base_timestamp=500, max_timestamp=9_999, log_append_time=True))
    assert first_timestamp_at(log, 2, log.end_offset) == 9_999


def test_a_transaction_marker_is_not_the_record_a_consumer_waits_for(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path / "t-0", SMALL)
    log.append([(None, b"a", 100)])
    log.append_batch(build_end_txn_marker(0, producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=0,
                                          timestamp=200))
    log.append([(None, b"b", 300)])
    assert first_timestamp_at(log, 1, log.end_offset) == 300


def test_group_filter_matches_whole_ids_of_any_pattern() -> None:
    wanted = GroupFilter("billing, audit-.*")
    assert wanted("billing") and wanted("audit-eu")
    assert not wanted("billing-2") and not wanted("x-audit-eu")
    assert not GroupFilter("")("anything")
    assert GroupFilter(".*")("anything")
