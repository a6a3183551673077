"""Reading a segment file's batch headers straight from disk, without opening the log: what the
data-dir readers (end offsets, record times) share. Stops at the first incomplete or impossible
header, as recovery would cut the file there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from protocol.record_batch import HEADER, HEADER_SIZE, LOG_OVERHEAD


def index_position(path: Path, log_size: int, relative: int | None = None) -> int:
    """Position of the last usable ``.index`` entry, or of the last at or before ``relative``
    (0 without one). Entries are (relative offset, position) int32 pairs; preallocated space is
    zero-filled."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    best = 0
    for i in range(0, len(data) - len(data) % 8, 8):
        rel = int.from_bytes(data[i : i + 4], "big")
        pos = int.from_bytes(data[i + 4 : i + 8], "big")
        if (relative is not None and rel > relative) or pos <= best or pos >= log_size:
            break
        best = pos
    return best


def batch_headers(fh: BinaryIO, start: int, size: int) -> Iterator[tuple[int, tuple[Any, ...], int]]:
    """(position, unpacked ``HEADER``, whole length) of each batch from ``start`` on."""
    pos = start
    while pos + HEADER_SIZE <= size:
        fh.seek(pos)
        head = fh.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE:
            return
        h = HEADER.unpack_from(head)
        length = h[1] + LOG_OVERHEAD
        if length < HEADER_SIZE or pos + length > size:
            return
        yield pos, h, length
        pos += length
