"""A partition log on real files: appends, reads, rolls, timestamps, produced batches, threads."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.record_batch import CorruptBatchError, decode_records, iter_batches
from storage.config import LogConfig
from storage.errors import OffsetOutOfRangeError
from storage.partition_log import PartitionLog

SMALL = LogConfig(segment_bytes=4000, index_interval_bytes=300, segment_index_bytes=4096)


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def values(log: PartitionLog, start: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for batch in log.batches(start):
        for r in decode_records(batch):
            offset = batch.base_offset + r.offset_delta
            if offset >= start:
                out.append((offset, r.key, r.value))
    return out


def fill(log: PartitionLog, n: int, ts: int = 1000, per_batch: int = 3) -> None:
    for i in range(0, n, per_batch):
        log.append([(b"key-%d" % j, b"value-%d" % j, ts + j) for j in range(i, min(n, i + per_batch))])


def test_new_log_has_kafka_file_names(tmp_path: Path) -> None:
    log, report = PartitionLog.open(tmp_path / "t-0", SMALL)
    assert report.clean and log.end_offset == 0 and log.log_start_offset == 0
    assert sorted(os.listdir(tmp_path / "t-0")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
    ]
    assert (tmp_path / "t-0" / "00000000000000000000.index").stat().st_size == 4096  # preallocated
    assert (tmp_path / "t-0" / "00000000000000000000.timeindex").stat().st_size == 4092
    log.close()
    assert (tmp_path / "t-0" / "00000000000000000000.index").stat().st_size == 0  # trimmed


def test_append_assigns_offsets_and_reads_back(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, SMALL)
    assert log.append([(b"a", b"1", 10), (None, b"2", 11)]) == (0, 1)
    assert log.append([(b"b", None, 12)]) == (2, 2)
    assert log.end_offset == 3
    assert values(log) == [(0, b"a", b"1"), (1, None, b"2"), (2, b"b", None)]
    (first,) = iter_batches(log.read(1, 1))  # the batch holding offset 1, whole
    assert first.base_offset == 0 and first.partition_leader_epoch == 0
    assert log.read(3, 1000) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1000)
    log.close()


def test_rolls_at_segment_bytes_and_indexes_every_interval(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, SMALL)
    fill(log, 600)
    assert log.segment_count > 5
    segments = log.segments()
    assert all(s.size <= SMALL.segment_bytes for s in segments)
    assert [s.base_offset for s in segments] == sorted({s.base_offset for s in segments})
    for seg in segments[:-1]:
        assert seg.path(".index").stat().st_size == 8 * len(seg.offset_index)
        assert len(seg.offset_index) >= seg.size // 400  # one entry per ~interval of bytes
        for rel, pos in seg.offset_index.entries():
            (batch, *_) = iter_batches(seg.read(pos, 200), allow_partial=True)
            assert batch.last_offset == seg.base_offset + rel
    for offset in (0, 1, 299, 300, 598, 599):
        (batch, *_) = iter_batches(log.read(offset, 10), allow_partial=True)
        assert batch.base_offset <= offset <= batch.last_offset
    assert [o for o, _, _ in values(log, 250)] == list(range(250, 600))
    log.close()


def test_rolls_at_segment_ms_by_record_timestamps(tmp_path: Path) -> None:
    cfg = LogConfig(segment_ms=1000)
    log, _ = PartitionLog.open(tmp_path, cfg)
    log.append([(b"k", b"v", 5000)])
    log.append([(b"k", b"v", 5900)])
    assert log.segment_count == 1
    log.append([(b"k", b"v", 6001)])
    assert log.segment_count == 2 and log.segments()[-1].base_offset == 2
    log.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, SMALL)
    fill(log, 300, ts=10_000)
    assert log.offset_for_timestamp(0) == (0, 10_000)
    assert log.offset_for_timestamp(10_150) == (150, 10_150)
    assert log.offset_for_timestamp(10_299) == (299, 10_299)
    assert log.offset_for_timestamp(10_300) is None
    log.close()
    log, _ = PartitionLog.open(tmp_path, SMALL, recovery_point=300)  # trusted segments, lazy stats
    assert log.offset_for_timestamp(10_150) == (150, 10_150)
    log.close()


def test_append_batch_from_a_client_keeps_crc_valid(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, SMALL)
    log.append([(b"x", b"y", 1)])
    builder = DefaultRecordBatchBuilder(2, 0, False, 77, 0, 0, 1 << 20)
    for i in range(5):
        builder.append(i, timestamp=100 + i, key=b"k%d" % i, value=b"v", headers=[])
    assert log.append_batch(bytes(builder.build())) == (1, 5)
    stored = log.read(1, 1 << 20)
    theirs = DefaultRecordBatch(bytearray(stored))
    assert theirs.validate_crc() and theirs.base_offset == 1 and theirs.producer_id == 77
    assert [r.offset for r in theirs] == [1, 2, 3, 4, 5]
    bad = bytearray(builder.build())
    bad[-1] ^= 1
    with pytest.raises(CorruptBatchError):
        log.append_batch(bytes(bad))
    assert log.end_offset == 6
    log.close()


def test_delete_records_before_moves_log_start(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, SMALL)
    fill(log, 600)
    before = log.segment_count
    assert log.delete_records_before(350) == 350
    assert log.log_start_offset == 350 and log.segment_count < before
    assert log.segments()[0].base_offset <= 350
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100)
    assert values(log, 350)[0][0] == 350
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".deleted")]
    log.close()


def test_concurrent_appends_and_flushes(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, SMALL)
    errors: list[BaseException] = []

    def writer(tag: int) -> None:
        try:
            for i in range(300):
                log.append([(b"w%d" % tag, b"%d" % i, i)])
        except BaseException as exc:
            errors.append(exc)

    def flusher(stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:
            errors.append(exc)

    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    f = threading.Thread(target=flusher, args=(stop,))
    f.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    f.join()
    assert not errors
    assert log.flush() == log.end_offset == 1200
    got = values(log)
    assert [o for o, _, _ in got] == list(range(1200))
    for tag in range(4):
        assert [v for _, k, v in got if k == b"w%d" % tag] == [b"%d" % i for i in range(300)]
    log.close()
    reopened, report = PartitionLog.open(tmp_path, SMALL)
    assert report.clean and reopened.end_offset == 1200
    reopened.close()


def test_leader_epochs_are_checkpointed(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, SMALL)
    log.append([(b"a", b"1", 1)])
    log.leader_epoch = 4
    log.append([(b"a", b"2", 2), (b"a", b"3", 3)])
    log.append([(b"a", b"4", 4)])
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n4 1\n"
    assert [b.partition_leader_epoch for b in log.batches()] == [0, 4, 4]
    assert log.epochs.end_offset_for(3, log.end_offset) == (0, 1)
    log.close()
    again, _ = PartitionLog.open(tmp_path, SMALL)
    assert again.leader_epoch == 4
    again.close()


_AT_THE_LIMIT = """
import errno, os, resource, sys
from pathlib import Path
from storage.config import LogConfig
from storage.partition_log import PartitionLog

log, _ = PartitionLog.open(Path(sys.argv[1]), LogConfig())
log.append([(b"before", b"1", 1000)])
log.flush()
# Take every descriptor the process may still open, as a broker holding as many connections as
# its limit allows would have.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 256), hard))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError as exc:
    assert exc.errno == errno.EMFILE, exc
log.append([(b"at-the-limit", b"2", 1001)])
print(log.flush(), log.end_offset)
"""


def test_a_flush_at_the_open_files_limit_syncs_through_the_held_descriptor(tmp_path: Path) -> None:
    """A broker with as many connections as its descriptor limit allows still makes its appends
    durable: the flush, which syncs through a descriptor of its own, falls back to the segment's."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", _AT_THE_LIMIT, str(tmp_path / "t-0")], cwd=root,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2"]  # the recovery point reached the end
    log, report = PartitionLog.open(tmp_path / "t-0", LogConfig())
    assert report.clean
    assert [(o, k) for o, k, _v in values(log)] == [(0, b"before"), (1, b"at-the-limit")]
    log.close()
