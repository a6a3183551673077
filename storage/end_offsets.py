"""End offsets of topic partitions read straight from a data dir, without a broker and without
recovery or writes: for lag reports (``kcoord analyze``) and tools."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from protocol.record_batch import HEADER_SIZE
from storage.layout import LOG, OFFSETS_TOPIC, parse_partition_dir, parse_segment_file, segment_path
from storage.segment_scan import batch_headers, index_position

TopicPartition = tuple[str, int]


def _segment_end(path: Path) -> int | None:
    """Next offset after the last whole batch of one ``.log`` file, None if it holds none."""
    size = path.stat().st_size
    if size < HEADER_SIZE:
        return None
    start = index_position(path.with_suffix(".index"), size)
    end: int | None = None
    with open(path, "rb") as fh:
        for begin in (start, 0) if start else (0,):
            for _pos, h, _length in batch_headers(fh, begin, size):
                end = h[0] + h[6] + 1
            if end is not None:
                break
    return end


def partition_end_offset(directory: Path) -> int:
    """Log end offset of one partition directory, read only (no recovery, no writes)."""
    bases = sorted((p[0] for p in map(parse_segment_file, os.listdir(directory)) if p and p[1] == LOG and not p[2]),
                   reverse=True)
    for base in bases:
        end = _segment_end(segment_path(directory, base, LOG))
        if end is not None:
            return end
    return bases[0] if bases else 0


def topic_end_offsets(data_dir: str | os.PathLike[str]) -> dict[TopicPartition, int]:
    """``{(topic, partition): log end offset}`` for every live partition in a data dir, read
    without a running broker (for lag reports). ``__consumer_offsets`` is left out."""
    root = Path(data_dir)
    out: dict[TopicPartition, int] = {}
    for entry in os.scandir(root):
        tp = parse_partition_dir(entry.name) if entry.is_dir() else None
        if tp is None or tp[0] == OFFSETS_TOPIC:
            continue
        with contextlib.suppress(OSError):
            out[tp] = partition_end_offset(Path(entry.path))
    return dict(sorted(out.items()))
