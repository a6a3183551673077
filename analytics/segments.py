"""Finding ``__consumer_offsets`` segment files and walking the record batches inside them.

A data dir (kcoord's or a Kafka broker's), one ``__consumer_offsets-N`` directory or one
``.log`` file may be given, as a local path or any URI pyarrow's file systems open (file://,
s3://, gs://, hdfs:// where libhdfs is installed). Index files are never read: brokers
rebuild them, so only the ``.log`` bytes are trusted.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from protocol import record_batch
from protocol.record_batch import CorruptBatchError, RecordBatch
from storage.layout import LOG, OFFSETS_TOPIC, SHARE_STATE_TOPIC, parse_partition_dir, parse_segment_file

TOPIC = OFFSETS_TOPIC

_LEN_PREFIX = struct.Struct(">qi")


@dataclass(frozen=True)
class SegmentFile:
    """One ``.log`` file to read; ``log_partition`` is -1 when the path does not name it."""

    path: str
    log_partition: int
    base_offset: int
    size: int


@dataclass
class SegmentHealth:
    """What walking one segment found besides its batches; ``problems`` are for people."""

    batches: int = 0
    bytes_read: int = 0
    problems: list[str] = field(default_factory=list)


class NoSegments(Exception):
    """The path holds nothing that looks like a segment of the log asked for (``__consumer_offsets``
    unless told)."""


def partition_of(path: str, topic: str = OFFSETS_TOPIC) -> int:
    """The partition of ``topic`` a segment belongs to, from its directory's name."""
    parts = path.rstrip("/").split("/")
    parsed = parse_partition_dir(parts[-2]) if len(parts) > 1 else None
    return parsed[1] if parsed is not None and parsed[0] == topic else -1


def _other_log(name: str, topic: str) -> bool:
    """``name`` is a partition directory of the coordinator log other than ``topic``."""
    parsed = parse_partition_dir(name)
    return parsed is not None and parsed[0] in (OFFSETS_TOPIC, SHARE_STATE_TOPIC) and parsed[0] != topic


def log_segment_base(name: str) -> int | None:
    """The base offset a live ``.log`` segment file's name gives, else None."""
    parsed = parse_segment_file(name)
    return parsed[0] if parsed is not None and parsed[1:] == (LOG, "") else None


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _remote(path: str) -> tuple[Any, str, str]:
    """(pyarrow file system, path inside it, prefix that turns its paths back into URIs)."""
    from pyarrow import fs

    filesystem, inner = fs.FileSystem.from_uri(path)
    prefix = path[: len(path) - len(inner)] if path.endswith(inner) else ""
    return filesystem, inner, prefix


def open_bytes(path: str) -> bytes:
    """The whole file. Local paths need nothing but the standard library."""
    if _is_local(path):
        with open(_local(path), "rb") as fh:
            return fh.read()
    filesystem, inner, _ = _remote(path)
    with filesystem.open_input_file(inner) as fh:
        return bytes(fh.read())


def _walk(path: str) -> tuple[str, list[tuple[str, int]]] | None:
    """("file" or "dir", [(path, size)]) of everything under ``path``; None if it is missing."""
    if _is_local(path):
        local = _local(path)
        if os.path.isfile(local):
            return "file", [(path, os.path.getsize(local))]
        if not os.path.isdir(local):
            return None
        files: list[tuple[str, int]] = []
        for dirpath, _, names in os.walk(local):
            files.extend((os.path.join(dirpath, n), os.path.getsize(os.path.join(dirpath, n))) for n in names)
        return "dir", files
    from pyarrow import fs

    try:
        filesystem, inner, prefix = _remote(path)
        root = filesystem.get_file_info(inner)
        if root.type == fs.FileType.NotFound:
            return None
        if root.type == fs.FileType.File:
            return "file", [(path, root.size or 0)]
        infos = filesystem.get_file_info(fs.FileSelector(inner, recursive=True))
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid and ArrowIOError
        raise NoSegments(f"{path}: cannot list it ({exc}); local paths and the URIs pyarrow opens "
                         "(file://, s3://, gs://, abfs://, hdfs:// with libhdfs) are supported") from None
    return "dir", [(prefix + i.path, i.size or 0) for i in infos if i.type == fs.FileType.File]


def path_exists(path: str) -> bool:
    """``path`` is there, as a file or a directory (local or behind a pyarrow file system)."""
    return _walk(path) is not None


def list_segments(path: str, topic: str = TOPIC) -> list[SegmentFile]:
    """Every segment of ``topic`` (``__consumer_offsets`` unless told) under ``path`` in
    (partition, base offset) order.

    Directories of other topics, files being cleaned or deleted (``.cleaned``, ``.swap``,
    ``.deleted``, ``-delete`` directories) and index or checkpoint files are left out. A file
    named directly is read whatever its name.
    """
    walked = _walk(path)
    if walked is None:
        raise NoSegments(f"{path}: no such file or directory")
    kind, files = walked
    if kind == "file":
        parent = path.rstrip("/").rsplit("/", 2)
        if len(parent) > 1 and _other_log(parent[-2], topic):
            raise NoSegments(f"{path}: a segment of {parent[-2]}, not of {topic}")
        base = log_segment_base(path.rsplit("/", 1)[-1])
        return [SegmentFile(path, partition_of(path, topic), base or 0, files[0][1])]
    root_name = path.rstrip("/").rsplit("/", 1)[-1]
    found: list[SegmentFile] = []
    for file_path, size in files:
        parts = file_path.rsplit("/", 2)
        base = log_segment_base(parts[-1])
        if base is None:
            continue
        log_partition = partition_of(file_path, topic)
        # Inside a data dir only the topic asked for counts; files directly in the directory
        # given are read whatever it is called (a copied partition dir, say), unless its name
        # says it is the other coordinator log's partition.
        if log_partition < 0 and (len(parts) < 2 or parts[-2] != root_name or _other_log(root_name, topic)):
            continue
        found.append(SegmentFile(file_path, log_partition, base, size))
    if not found:
        raise NoSegments(f"{path}: no {topic} segment files (NNNNNNNNNNNNNNNNNNNN.log) found")
    found.sort(key=lambda s: (s.log_partition, s.base_offset, s.path))
    return found


def iter_batches(data: bytes, health: SegmentHealth, verify_crc: bool = True) -> Iterator[RecordBatch]:
    """The batches of one segment in file order, going on past what can be skipped.

    A batch whose CRC does not match is skipped; a tail too short for its stated length (a
    torn write) or bytes that are not a batch stop the walk. Either way ``health`` says where.
    A zero-filled tail (a preallocated segment) ends the data quietly.
    """
    pos = 0
    end = len(data)
    while pos < end:
        try:
            for batch in record_batch.iter_batches(data, pos, verify_crc=verify_crc):
                health.batches += 1
                pos = batch.end
                yield batch
            break
        except CorruptBatchError as exc:
            pos = exc.position
            base_offset, length = _LEN_PREFIX.unpack_from(data, pos) if end - pos >= 12 else (-1, -1)
            where = f"at position {pos}" + (f", offset {base_offset}" if base_offset >= 0 else "")
            if exc.kind == "crc":
                health.problems.append(f"CRC mismatch in the batch {where}: batch skipped")
                pos += record_batch.LOG_OVERHEAD + length
                continue
            if base_offset == 0 and length == 0 and not any(data[pos:pos + 4096]):
                break
            if exc.kind == "short":
                health.problems.append(f"truncated: {end - pos} bytes {where} are not a whole batch "
                                       "(a torn write?); the rest of the file is skipped")
            elif exc.kind == "magic" and data[pos + 16] in (0, 1):
                health.problems.append(f"message format v{data[pos + 16]} (pre-0.11) {where}: "
                                       "not supported; the rest of the file is skipped")
            else:
                health.problems.append(f"not a record batch {where} ({exc}); the rest of the file is skipped")
            break
    health.bytes_read = pos
