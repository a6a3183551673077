"""File and directory names of Kafka's log layout, and the durable-rename primitives."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

# The internal topic that holds the group coordinator's records.
OFFSETS_TOPIC = "__consumer_offsets"
# The internal topic that holds the share coordinator's records (KIP-932).
SHARE_STATE_TOPIC = "__share_group_state"
LOG = ".log"
INDEX = ".index"
TIME_INDEX = ".timeindex"
TXN_INDEX = ".txnindex"
SEGMENT_SUFFIXES = (LOG, INDEX, TIME_INDEX, TXN_INDEX)
CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"
DELETE_DIR_SUFFIX = "-delete"
# What ``write_atomically`` writes before its rename: ``<file>.<pid>.tmp``.
WRITING = ".tmp"


def segment_name(base_offset: int) -> str:
    """Kafka names segment files by base offset, zero-padded to 20 digits."""
    return f"{base_offset:020d}"


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / (segment_name(base_offset) + suffix)


def parse_segment_file(name: str) -> tuple[int, str, str] | None:
    """``(base offset, suffix, temporary suffix)`` of a segment file name, else None."""
    temp = ""
    for t in (CLEANED, SWAP, DELETED):
        if name.endswith(t):
            temp = t
            name = name[: -len(t)]
            break
    stem, dot, ext = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit() or "." + ext not in SEGMENT_SUFFIXES:
        return None
    return int(stem), "." + ext, temp


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a live partition directory name; None for anything else
    (``-delete`` and ``-future`` directories, stray files)."""
    topic, dash, part = name.rpartition("-")
    if not dash or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)


def fsync_dir(directory: Path) -> None:
    """Makes renames and creations in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def is_unfinished_write(name: str) -> bool:
    """A ``write_atomically`` temporary: what a write cut short before its rename leaves."""
    stem, dot, pid = name.removesuffix(WRITING).rpartition(".")
    return name.endswith(WRITING) and bool(dot and stem and pid.isdigit())


def write_atomically(path: Path, data: bytes) -> None:
    """Write to ``<path>.<pid>.tmp``, fsync, rename over ``path``, fsync the directory. The pid
    keeps processes that share a directory (a cluster's nodes on one volume writing
    meta.properties as they start together) from renaming each other's file away."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}{WRITING}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
