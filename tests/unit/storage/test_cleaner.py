"""Compaction on real files: latest value per key survives, tombstones follow the delete
horizon, the active segment and young records are left alone, and a crash between any two
steps of the swap leaves a log that opens with the same latest values."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.record_batch import build_end_txn_marker, build_simple_batch, decode_records, iter_batches
from storage import txn_index
from storage.cleaner import Compaction, clean, cleanable_segments, dirty_ratio, swap_steps, write_cleaned
from storage.config import LogConfig
from storage.layout import TXN_INDEX
from storage.partition_log import PartitionLog

CFG = LogConfig(
    segment_bytes=3000, index_interval_bytes=200, segment_index_bytes=4096, cleanup_policy="compact",
    delete_retention_ms=1000,
)
NOW = 1_000_000


def latest(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for batch in log.batches():
        for r in decode_records(batch):
            out[r.key] = r.value
    return {k: v for k, v in out.items() if v is not None}


def all_records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(b.base_offset + r.offset_delta, r.key, r.value) for b in log.batches() for r in decode_records(b)]


def make_log(path: Path, updates: int = 400, keys: int = 10) -> PartitionLog:
    log, _ = PartitionLog.open(path, CFG, clock=lambda: NOW)
    for i in range(updates):
        log.append([(b"key-%d" % (i % keys), b"value-%d" % i, 1000 + i)])
    return log


def test_keeps_latest_value_per_key_and_offsets(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    before = latest(log)
    active = log.segments()[-1]
    assert dirty_ratio(log, NOW) == 1.0
    stats = clean(log, NOW)
    assert stats is not None and stats.records_removed > 300 and stats.bytes_after < stats.bytes_before
    assert latest(log) == before
    assert log.segments()[-1] is active and log.end_offset == 400
    got = all_records(log)
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)  # offsets kept, in order
    closed_keys = [k for o, k, _ in got if o < active.base_offset]
    assert len(closed_keys) == len(set(closed_keys))  # one record per key in the cleaned part
    assert dirty_ratio(log, NOW) == 0.0 and clean(log, NOW) is None  # nothing dirty left
    assert not [n for n in os.listdir(tmp_path) if n.endswith((".cleaned", ".swap", ".deleted"))]
    log.close()
    reopened, report = PartitionLog.open(tmp_path, CFG)
    assert report.clean and latest(reopened) == before and reopened.end_offset == 400
    reopened.close()


def test_batches_keep_base_offset_and_last_offset_delta(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG, clock=lambda: NOW)
    log.append([(b"a", b"1", 1), (b"b", b"1", 2), (b"a", b"2", 3)])  # offsets 0-2
    log.roll()
    log.append([(b"z", b"z", 4)])
    clean(log, NOW, force=True)
    (batch, _) = log.batches()
    assert (batch.base_offset, batch.last_offset_delta, batch.records_count) == (0, 2, 2)
    assert [(r.offset_delta, r.key) for r in decode_records(batch)] == [(1, b"b"), (2, b"a")]
    assert batch.crc_ok()
    log.close()


def test_tombstones_survive_until_the_delete_horizon(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG, clock=lambda: NOW)
    log.append([(b"gone", b"v", 1), (b"kept", b"v", 2)])
    log.append([(b"gone", None, 3)])
    log.roll()
    log.append([(b"other", b"x", 4)])
    clean(log, NOW, force=True)
    tomb = [b for b in log.batches() if any(r.value is None for r in decode_records(b))]
    assert len(tomb) == 1 and tomb[0].delete_horizon_ms == NOW + CFG.delete_retention_ms
    assert (b"gone", None) in [(r.key, r.value) for r in decode_records(tomb[0])]
    assert tomb[0].base_timestamp + decode_records(tomb[0])[0].timestamp_delta == 3  # timestamp kept
    clean(log, NOW + 999, force=True)
    assert any(k == b"gone" for _, k, _ in all_records(log))  # before the horizon: still there
    stats = clean(log, NOW + 1000, force=True)
    assert stats is not None and stats.tombstones_removed == 1
    assert [k for _, k, _ in all_records(log)] == [b"kept", b"other"]
    log.close()


def test_min_compaction_lag_and_active_segment(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=3000, cleanup_policy="compact", min_compaction_lag_ms=500)
    log, _ = PartitionLog.open(tmp_path, cfg, clock=lambda: NOW)
    for ts in (100, 200):
        log.append([(b"k", b"%d" % ts, ts)])
        log.roll()
    log.append([(b"k", b"active", 300)])
    assert [s.base_offset for s in cleanable_segments(log, 650)] == [0]  # offset 1 is too young
    assert cleanable_segments(log, 10_000)[-1].base_offset == 1  # never the active segment
    clean(log, 10_000, force=True)
    assert [v for _, _, v in all_records(log)] == [b"200", b"active"]
    log.close()


def test_aborted_transaction_records_go_and_do_not_hide_older_values(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG, clock=lambda: NOW)
    log.append([(b"k", b"committed", 1)])
    txn = build_simple_batch([(b"k", b"aborted", 2)], producer_id=5, producer_epoch=0, base_sequence=0,
                             transactional=True)
    log.append_batch(txn)
    log.append_batch(build_end_txn_marker(0, producer_id=5, producer_epoch=0, commit=False,
                                          coordinator_epoch=1, timestamp=3))
    log.roll()
    log.append([(b"x", b"y", 4)])
    clean(log, NOW, force=True)
    kinds = [(b.is_transactional, b.is_control, b.records_count) for b in log.batches()]
    assert (b"k", b"committed") in [(k, v) for _, k, v in all_records(log)]
    assert (True, False, 1) not in kinds  # the aborted data is gone
    log.close()


@pytest.mark.parametrize("stop", range(23))
def test_crash_at_each_swap_step_leaves_a_loadable_log(tmp_path: Path, stop: int) -> None:
    log = make_log(tmp_path, updates=200, keys=7)
    log.append([(b"key-3", None, 5000)])
    before = latest(log)
    end = log.end_offset
    segments = cleanable_segments(log, NOW)
    group = segments[:3]
    fds = log.open_readers(segments)
    assert fds is not None
    job = Compaction(log, NOW)
    job.build_map(segments, fds, 0)
    aborted = txn_index.AbortedTxn(9, group[1].base_offset, group[1].base_offset + 1, group[1].base_offset + 2)
    txn_index.rewrite(group[1].path(TXN_INDEX), [aborted])
    new = write_cleaned(log, job, group, fds[:3])
    steps = swap_steps(new, group)
    assert len(steps) == 22  # 4 renames to .swap, 3 x 4 to .deleted, 4 into place, rename in memory, fsync
    for step in steps[:stop]:
        step()
    # the process dies here: nothing else is closed or flushed
    reopened, report = PartitionLog.open(tmp_path, CFG)
    assert report.clean, report.summary()
    assert latest(reopened) == before and reopened.end_offset == end
    got = all_records(reopened)
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
    names = os.listdir(tmp_path)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    # The aborted transaction is still indexed (by the old segment, the compacted one, or both
    # when recovery keeps an old segment the compacted one has no records of), and nothing else is.
    indexes = [n for n in names if n.endswith(TXN_INDEX)]
    assert indexes and all(txn_index.read(tmp_path / n) == [aborted] for n in indexes)
    stats = clean(reopened, NOW, force=True)  # and it can be cleaned again afterwards
    assert stats is not None and latest(reopened) == before
    reopened.close()
    for fd in fds:
        os.close(fd)


def test_compressed_batches_are_rewritten_with_their_codec(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG, clock=lambda: NOW)
    log.append([(b"a", b"1" * 50, 1), (b"b", b"1", 2), (b"a", b"2" * 50, 3)], compression=1)
    log.roll()
    log.append([(b"z", b"z", 4)])
    clean(log, NOW, force=True)
    (batch, _) = iter_batches(log.read(0, 1 << 20) + log.read(3, 100))
    assert batch.compression == 1 and batch.records_count == 2 and batch.crc_ok()
    log.close()
