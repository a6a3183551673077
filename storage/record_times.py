"""Timestamps of records in a topic partition's log, read straight from a data dir without a
broker, recovery or writes: lag in seconds for reports (``kcoord analyze``).

The broker's lag metrics ask the same question of an open log
(``broker/coordinators/group/service/lag_metrics.first_timestamp_at``); this answers it from the files alone,
reading batch headers and only the one batch that holds the record.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from protocol.errors import DecodeError
from protocol.record_batch import decode_records, read_batch
from storage.layout import INDEX, LOG, parse_segment_file, segment_path
from storage.segment_scan import batch_headers, index_position


def _first_in_segment(fh: BinaryIO, start: int, size: int, offset: int, end: int) -> tuple[int | None, bool]:
    """(timestamp of the first record at or after ``offset`` below ``end``, whether the scan
    reached ``end``) within one segment file."""
    for pos, h, length in batch_headers(fh, start, size):
        base, last = h[0], h[0] + h[6]
        if base >= end:
            return None, True
        if last >= offset:
            fh.seek(pos)
            batch = read_batch(fh.read(length), verify_crc=False)
            if not batch.is_control:  # transaction markers are not records a consumer reads
                for r in decode_records(batch):
                    at = base + r.offset_delta
                    if offset <= at < end:
                        ts = batch.max_timestamp if batch.log_append_time else batch.base_timestamp + r.timestamp_delta
                        return ts, True
    return None, False


def first_timestamp_at(directory: str | os.PathLike[str], offset: int, end: int) -> int | None:
    """Timestamp (ms) of the first record at or after ``offset`` and below ``end`` in the
    partition directory's log; None when there is none (or the files cannot be read)."""
    root = Path(directory)
    try:
        names = os.listdir(root)
    except OSError:
        return None
    bases = sorted(p[0] for p in map(parse_segment_file, names) if p and p[1] == LOG and not p[2])
    # Earlier segments hold only offsets below the last segment starting at or before ``offset``.
    first = max((i for i, b in enumerate(bases) if b <= offset), default=0)
    for base in bases[first:]:
        path = segment_path(root, base, LOG)
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                start = index_position(segment_path(root, base, INDEX), size, offset - base) if offset > base else 0
                ts, done = _first_in_segment(fh, start, size, offset, end)
        except (OSError, DecodeError, ValueError):
            return None
        if done:
            return ts
    return None
