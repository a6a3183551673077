"""End offsets of topic partitions read straight from a data dir, without a broker and without
recovery or writes: for lag reports (``kcoord analyze``) and tools."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from protocol.record_batch import HEADER, HEADER_SIZE, LOG_OVERHEAD
from storage.layout import LOG, OFFSETS_TOPIC, parse_partition_dir, parse_segment_file, segment_path

TopicPartition = tuple[str, int]


def _last_index_position(path: Path, log_size: int) -> int:
    """Position of the last usable ``.index`` entry (0 without one). Entries are (relative
    offset, position) int32 pairs; preallocated space is zero-filled."""
    try:
        data = path.read_bytes()
    except OSError:
        return 0
    best = 0
    for i in range(0, len(data) - len(data) % 8, 8):
        pos = int.from_bytes(data[i + 4 : i + 8], "big")
        if pos <= best or pos >= log_size:
            break
        best = pos
    return best


def _segment_end(path: Path) -> int | None:
    """Next offset after the last whole batch of one ``.log`` file, None if it holds none."""
    size = path.stat().st_size
    if size < HEADER_SIZE:
        return None
    start = _last_index_position(path.with_suffix(".index"), size)
    end: int | None = None
    with open(path, "rb") as fh:
        for begin in (start, 0) if start else (0,):
            pos = begin
            while pos + HEADER_SIZE <= size:
                fh.seek(pos)
                head = fh.read(HEADER_SIZE)
                if len(head) < HEADER_SIZE:
                    break
                h = HEADER.unpack_from(head)
                length = h[1] + LOG_OVERHEAD
                if length < HEADER_SIZE or pos + length > size:
                    break
                end = h[0] + h[6] + 1
                pos += length
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
