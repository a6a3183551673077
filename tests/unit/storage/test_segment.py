"""Segment files and their sparse indexes."""

from __future__ import annotations

import struct
from pathlib import Path

from protocol.record_batch import build_simple_batch
from storage.config import LogConfig
from storage.index import OffsetIndex, TimeIndex
from storage.layout import parse_partition_dir, parse_segment_file, segment_name
from storage.segment import Segment

CFG = LogConfig(index_interval_bytes=150, segment_index_bytes=800)


def test_names() -> None:
    assert segment_name(1234) == "00000000000000001234"
    assert parse_segment_file("00000000000000001234.log") == (1234, ".log", "")
    assert parse_segment_file("00000000000000001234.timeindex.swap") == (1234, ".timeindex", ".swap")
    assert parse_segment_file("00000000000000001234.log.deleted") == (1234, ".log", ".deleted")
    assert parse_segment_file("leader-epoch-checkpoint") is None
    assert parse_segment_file("1234.log") is None
    assert parse_partition_dir("__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir("my-topic-0") == ("my-topic", 0)
    assert parse_partition_dir("my-topic-0.8f2a6c-delete") is None
    assert parse_partition_dir("my-topic-0-future") is None


def test_segment_indexes_follow_kafkas_rule(tmp_path: Path) -> None:
    seg = Segment.create(tmp_path, 100, CFG, now_ms=0)
    seg.activate()
    positions = []
    for i in range(20):
        positions.append(seg.size)
        seg.append(build_simple_batch([(b"k", b"v" * 40, 5000 + i * 10)], 100 + i))
    size = positions[1]  # every batch has the same size here
    # an entry is made for the batch that follows more than 150 bytes since the last entry
    per_entry = 150 // size + 1
    expected = [(i, positions[i]) for i in range(per_entry, 20, per_entry)]
    assert seg.offset_index.entries() == expected
    assert [off for _, off in seg.time_index.entries()] == [rel for rel, _ in expected]
    assert seg.offset_index.lookup(100) == 0 and seg.offset_index.lookup(100 + per_entry) == positions[per_entry]
    assert seg.find(107) == (positions[7], size)
    assert seg.find(120) is None
    assert seg.time_index.lookup(5000 + 10 * per_entry) == 100 + per_entry
    assert seg.path(".index").stat().st_size == 800  # preallocated while active
    seg.deactivate()
    raw = seg.path(".index").read_bytes()
    assert raw == b"".join(struct.pack(">ii", rel, pos) for rel, pos in expected)
    times = seg.path(".timeindex").read_bytes()
    assert len(times) == 12 * (len(expected) + 1)  # plus the closing entry with the max timestamp
    assert struct.unpack(">qi", times[-12:]) == (5190, 19)
    seg.close()


def test_index_load_stops_at_zero_fill_and_flags_garbage(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">iiii", 5, 4200, 9, 8400) + bytes(80))
    index = OffsetIndex(path, 0, 1000)
    assert index.open() and index.entries() == [(5, 4200), (9, 8400)]
    index.close()
    path.write_bytes(struct.pack(">iiii", 5, 4200, 3, 100))
    index = OffsetIndex(path, 0, 1000)
    assert not index.open() and index.entries() == [(5, 4200)]
    index.close()
    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(struct.pack(">qiqi", 10, 1, 10, 2))  # timestamps must strictly increase
    tindex = TimeIndex(tpath, 0, 1000)
    assert not tindex.open() and tindex.entries() == [(10, 1)]
    tindex.close()
