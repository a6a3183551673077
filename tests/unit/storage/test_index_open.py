"""Opening an index left at its preallocated length by a crash: the entries written are loaded,
the hole after them is recognised as the zero fill without being read, and bytes written after
a hole still mark the file corrupt."""

from __future__ import annotations

import os
import time
from pathlib import Path

from storage.index import OffsetIndex

MAX_BYTES = 10 * 1024 * 1024  # Kafka's segment.index.bytes default


def crashed_index(path: Path, entries: int) -> None:
    index = OffsetIndex(path, 0, MAX_BYTES)
    assert index.open()
    index.preallocate()
    for i in range(1, entries + 1):
        index.append(i * 10, i * 4096)
    index.close()  # no trim: what a kill -9 leaves


def test_entries_before_the_preallocated_hole_load(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    crashed_index(path, 600)
    assert path.stat().st_size == MAX_BYTES
    timings = []
    for _ in range(3):  # the best of three: a busy machine may pause any one of them
        index = OffsetIndex(path, 0, MAX_BYTES)
        started = time.perf_counter()
        assert index.open()
        timings.append(time.perf_counter() - started)
        assert index.last_entry() == (6000, 600 * 4096)
        assert len(index) == 600
        index.close()
    # Reading and scanning the 10 MB fill took ~45 ms per index here; the hole is not read now.
    assert min(timings) < 0.025, timings


def test_bytes_written_after_a_hole_mark_the_index_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    crashed_index(path, 3)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\x01\x02\x03\x04\x05\x06\x07\x08", 5 * 1024 * 1024)
    finally:
        os.close(fd)
    index = OffsetIndex(path, 0, MAX_BYTES)
    assert not index.open()
