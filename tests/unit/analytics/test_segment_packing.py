"""Segments are read by Spark tasks in packs of about PACK_BYTES: a data dir of small partitions is
one task per read, a large one still spreads over several."""

from __future__ import annotations

from analytics.segments import SegmentFile
from analytics.source import PACK_BYTES, pack_segments

MB = 1 << 20


def seg(i: int, size: int) -> SegmentFile:
    return SegmentFile(f"__consumer_offsets-{i}/00000000000000000000.log", i, 0, size)


def test_fifty_small_partitions_are_one_task() -> None:
    (pack,) = pack_segments([seg(i, 4096) for i in range(50)])
    assert [p for _, p in pack.files] == list(range(50))


def test_large_inputs_spread_over_tasks_of_at_most_the_pack_size() -> None:
    packs = pack_segments([seg(i, 20 * MB) for i in range(10)] + [seg(10, 3 * PACK_BYTES)])
    assert [len(p.files) for p in packs] == [1] * 11  # 20 + 20 MB would exceed 32 MB; a big file stands alone
    packs = pack_segments([seg(i, 8 * MB) for i in range(10)])
    assert [len(p.files) for p in packs] == [4, 4, 2]
    assert [f for p in packs for f in p.files] == [(s.path, s.log_partition) for s in (seg(i, 0) for i in range(10))]
