"""Opening a damaged partition directory: the torn or corrupt tail goes, is reported exactly,
and everything before it reads back intact; indexes are rebuilt when missing or wrong."""

from __future__ import annotations

import os
from pathlib import Path

from protocol.record_batch import decode_records
from storage.config import LogConfig
from storage.partition_log import PartitionLog

CFG = LogConfig(segment_bytes=4000, index_interval_bytes=300, segment_index_bytes=4096)


def write_log(directory: Path, n: int = 300) -> list[tuple[int, int]]:
    """n records, 3 per batch; returns (position, size) of the batches of the last segment."""
    log, _ = PartitionLog.open(directory, CFG)
    for i in range(0, n, 3):
        log.append([(b"key-%d" % j, b"value-%d" % j, 1000 + j) for j in range(i, i + 3)])
    last = log.segments()[-1]
    where = [(p, f[1] + 12) for p, f in last.scan_headers()]
    log.close()
    return where


def offsets(log: PartitionLog) -> list[int]:
    return [b.base_offset + r.offset_delta for b in log.batches() for r in decode_records(b)]


def segment_files(directory: Path, suffix: str) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(suffix))


def test_clean_reopen_reports_nothing(tmp_path: Path) -> None:
    write_log(tmp_path)
    log, report = PartitionLog.open(tmp_path, CFG)
    assert report.clean and not report.rebuilt_indexes and not report.leftovers
    assert report.log_end_offset == 300 and offsets(log) == list(range(300))
    log.close()


def test_a_whole_file_write_cut_before_its_rename_is_removed_and_the_file_kept(tmp_path: Path) -> None:
    """``write_atomically`` writes ``<file>.<pid>.tmp`` and renames it over the file: a crash in
    between leaves the previous file whole and the temporary beside it, which recovery removes
    (and nothing else whose name merely ends in .tmp)."""
    write_log(tmp_path)
    checkpoint = tmp_path / "leader-epoch-checkpoint"
    kept = checkpoint.read_bytes()
    (tmp_path / "leader-epoch-checkpoint.4242.tmp").write_bytes(b"0\n1\n0 0\n0 2")  # cut short
    (tmp_path / "log-start-offset.17.tmp").write_bytes(b"")
    (tmp_path / "notes.tmp").write_bytes(b"not one of ours")
    log, report = PartitionLog.open(tmp_path, CFG)
    assert sorted(report.leftovers) == [("leader-epoch-checkpoint.4242.tmp", "removed an unfinished write"),
                                        ("log-start-offset.17.tmp", "removed an unfinished write")]
    assert sorted(p.name for p in tmp_path.glob("*.tmp")) == ["notes.tmp"]
    assert checkpoint.read_bytes() == kept and log.end_offset == 300
    log.close()


def test_torn_tail_is_truncated_and_reported(tmp_path: Path) -> None:
    batches = write_log(tmp_path)
    last_log = segment_files(tmp_path, ".log")[-1]
    pos, size = batches[-1]
    os.truncate(last_log, pos + size - 7)  # a write cut short
    log, report = PartitionLog.open(tmp_path, CFG)
    (cut,) = report.truncations
    assert (cut.segment, cut.position, cut.bytes_dropped, cut.kind) == (last_log.name, pos, size - 7, "short")
    assert cut.next_offset == 297 and not report.dropped_segments
    assert offsets(log) == list(range(297))
    assert log.append([(b"k", b"v", 1)]) == (297, 297)
    log.close()
    again, report = PartitionLog.open(tmp_path, CFG)
    assert report.clean and offsets(again) == list(range(298))
    again.close()


def test_flipped_byte_in_last_batch_fails_its_crc(tmp_path: Path) -> None:
    batches = write_log(tmp_path)
    last_log = segment_files(tmp_path, ".log")[-1]
    pos, size = batches[-1]
    with open(last_log, "r+b") as f:
        f.seek(pos + size - 3)
        byte = f.read(1)
        f.seek(pos + size - 3)
        f.write(bytes([byte[0] ^ 0x40]))
    log, report = PartitionLog.open(tmp_path, CFG)
    (cut,) = report.truncations
    assert (cut.position, cut.bytes_dropped, cut.kind) == (pos, size, "crc")
    assert offsets(log) == list(range(297))
    log.close()


def test_garbage_after_the_last_batch(tmp_path: Path) -> None:
    batches = write_log(tmp_path)
    last_log = segment_files(tmp_path, ".log")[-1]
    end = batches[-1][0] + batches[-1][1]
    with open(last_log, "ab") as f:
        f.write(os.urandom(5000))
    log, report = PartitionLog.open(tmp_path, CFG)
    (cut,) = report.truncations
    assert cut.position == end and cut.bytes_dropped == 5000
    assert offsets(log) == list(range(300)) and last_log.stat().st_size == end
    log.close()


def test_corruption_in_an_older_segment_drops_the_later_ones(tmp_path: Path) -> None:
    write_log(tmp_path)
    logs = segment_files(tmp_path, ".log")
    assert len(logs) >= 3
    victim = logs[1]
    sizes = [p.stat().st_size for p in logs]
    with open(victim, "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 4)
    log, report = PartitionLog.open(tmp_path, CFG)
    (cut,) = report.truncations
    assert cut.segment == victim.name
    assert [d.segment for d in report.dropped_segments] == [p.name for p in logs[2:]]
    assert report.bytes_dropped == sizes[1] - cut.position + sum(sizes[2:])
    assert offsets(log) == list(range(cut.next_offset))
    assert log.segment_count == 2 and segment_files(tmp_path, ".log") == logs[:2]
    assert not segment_files(tmp_path, ".deleted")
    log.close()


def test_deleted_index_files_are_rebuilt(tmp_path: Path) -> None:
    write_log(tmp_path)
    first_index = segment_files(tmp_path, ".index")[0]
    expected = first_index.read_bytes()
    first_index.unlink()
    segment_files(tmp_path, ".timeindex")[-1].unlink()
    log, report = PartitionLog.open(tmp_path, CFG)
    assert report.clean
    rebuilt = dict(report.rebuilt_indexes)
    assert rebuilt[first_index.name] == "missing"
    assert first_index.read_bytes() == expected
    assert offsets(log) == list(range(300)) and log.offset_for_timestamp(1299) == (299, 1299)
    log.close()


def test_corrupt_index_is_rebuilt_even_below_the_recovery_point(tmp_path: Path) -> None:
    write_log(tmp_path)
    first_index = segment_files(tmp_path, ".index")[0]
    expected = first_index.read_bytes()
    first_index.write_bytes(expected[:8] + b"\x00\x00\x00\x01" * 6)  # non-monotonic junk
    log, report = PartitionLog.open(tmp_path, CFG, recovery_point=300)
    assert report.clean and dict(report.rebuilt_indexes)[first_index.name] == "corrupt"
    assert first_index.read_bytes() == expected
    assert report.scanned_segments == 2  # the repaired one and the active one
    assert offsets(log) == list(range(300))
    log.close()


def test_crash_with_preallocated_indexes(tmp_path: Path) -> None:
    """Without close the active segment's indexes are still zero-filled to full size."""
    log, _ = PartitionLog.open(tmp_path, CFG)
    for i in range(40):
        log.append([(b"k%d" % i, b"v" * 40, 1000 + i)])
    log.flush()
    active_index = log.segments()[-1].path(".index")
    entries = log.segments()[-1].offset_index.entries()
    assert entries and active_index.stat().st_size == 4096
    # no close(): the process "dies" here
    again, report = PartitionLog.open(tmp_path, CFG)
    assert report.clean and again.end_offset == 40
    assert again.segments()[-1].offset_index.entries() == entries
    again.close()
    assert active_index.stat().st_size == 8 * len(entries)


def test_truncation_forgets_leader_epochs_that_began_in_the_lost_tail(tmp_path: Path) -> None:
    log, _ = PartitionLog.open(tmp_path, CFG)
    log.append([(b"a", b"1", 1)])
    log.leader_epoch = 7
    log.append([(b"a", b"2", 2)])
    tail = log.segments()[-1]
    cut_at = next(p for p, f in tail.scan_headers() if f[0] == 1)
    log.close()
    os.truncate(tail.path(".log"), cut_at + 30)
    again, report = PartitionLog.open(tmp_path, CFG)
    assert report.truncations[0].next_offset == 1
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert again.leader_epoch == 0
    again.close()


def test_batches_larger_than_a_read_chunk(tmp_path: Path) -> None:
    big = os.urandom(5 << 20)
    log, _ = PartitionLog.open(tmp_path, LogConfig())
    log.append([(b"small", b"1", 1)])
    log.append([(b"big", big, 2)])
    log.append([(b"small", b"2", 3)])
    log.append([(b"big", big, 4)])
    size = log.size_bytes
    log.close()
    (log_file,) = segment_files(tmp_path, ".log")
    again, report = PartitionLog.open(tmp_path, LogConfig())
    assert report.clean and offsets(again) == [0, 1, 2, 3]
    again.close()
    os.truncate(log_file, size - 1000)  # the second big batch is torn
    again, report = PartitionLog.open(tmp_path, LogConfig())
    (cut,) = report.truncations
    assert cut.kind == "short" and cut.next_offset == 3 and cut.bytes_dropped == len(big) + 77 - 1000
    assert [v for b in again.batches() for r in decode_records(b) for v in [r.value]] == [b"1", big, b"2"]
    again.close()


def test_any_cut_or_flip_in_the_last_segment_keeps_exactly_the_batches_before_it(tmp_path: Path) -> None:
    import shutil

    source = tmp_path / "source"
    batches = write_log(source, 90)
    name = segment_files(source, ".log")[-1].name
    starts = [p for p, _ in batches]
    first_offset = 90 - 3 * len(batches)

    def reopen_after(damage: int, flip: bool) -> list[int]:
        work = tmp_path / f"work-{damage}-{flip}"
        shutil.copytree(source, work)
        if flip:
            with open(work / name, "r+b") as f:
                f.seek(damage)
                b = f.read(1)[0]
                f.seek(damage)
                f.write(bytes([b ^ 0x10]))
        else:
            os.truncate(work / name, damage)
        log, _ = PartitionLog.open(work, CFG)
        got = offsets(log)
        log.close()
        shutil.rmtree(work)
        return got

    end = starts[-1] + batches[-1][1]
    for cut in range(0, end, 11):
        whole = sum(1 for p, s in batches if p + s <= cut)
        assert reopen_after(cut, flip=False) == list(range(first_offset + 3 * whole))
    for at in range(0, end, 13):
        hit = max(i for i, p in enumerate(starts) if p <= at)
        if 12 <= at - starts[hit] < 16 or at - starts[hit] < 8:
            continue  # leader epoch and base offset are outside the CRC, as in Kafka
        assert reopen_after(at, flip=True) == list(range(first_offset + 3 * hit))
