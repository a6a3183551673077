"""ListOffsets v0's old meaning (Kafka before 4.0): offsets of segment starts written at or before
a time, and the log end, newest first, at most ``max_num_offsets``."""

from __future__ import annotations

from broker.handlers.list_offsets import EARLIEST, LATEST, offsets_before

# Three segments starting at 0, 100 and 250, last written at t=1000, 2000 and 3000; log end 300.
SEGMENTS = [(0, 1000), (100, 2000), (250, 3000)]


def query(timestamp: int, max_num: int, *, log_start: int = 0, last_has_size: bool = True) -> list[int]:
    return offsets_before(SEGMENTS, log_start, 300, last_has_size, 9000, timestamp, max_num)


def test_latest_and_earliest() -> None:
    assert query(LATEST, 1) == [300]
    assert query(LATEST, 10) == [300, 250, 100, 0]
    assert query(EARLIEST, 10) == [0]
    assert query(EARLIEST, 10, log_start=42) == [42]


def test_a_time_picks_the_segments_written_by_then() -> None:
    assert query(2500, 10) == [100, 0]
    assert query(2000, 1) == [100]
    assert query(999, 10) == []
    assert query(9000, 2) == [300, 250]


def test_an_empty_newest_segment_is_the_log_end() -> None:
    segments = [(0, 1000), (300, 2000)]
    assert offsets_before(segments, 0, 300, False, 9000, LATEST, 10) == [300, 0]


def test_max_num_offsets_zero_or_negative_gives_nothing() -> None:
    assert query(LATEST, 0) == []
    assert query(LATEST, -1) == []
