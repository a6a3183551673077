"""Kafka's small text files next to the logs, byte-compatible so a Kafka broker can open our
directories and we can open Kafka's. Every write goes to ``.tmp`` first and is renamed over.

* ``leader-epoch-checkpoint`` (per partition): version 0, count, ``<epoch> <start offset>`` lines.
* ``partition.metadata`` (per partition): ``version: 0`` and ``topic_id: <22-char base64url>``.
* broker-level offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``): version 0, count,
  ``<topic> <partition> <offset>`` lines.
* ``meta.properties``: Java properties (``node.id``, ``cluster.id``, ``version``, ...).
* ``kcoord-log-start-offset`` (per partition, in a cluster only): version 0 and the partition's log
  start offset. The nodes of a cluster share one data dir, so none writes the broker-level
  ``log-start-offset-checkpoint``; the partition's owner keeps its log start (moved by
  DeleteRecords) beside its segments instead. Kafka ignores the file.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

from storage.layout import write_atomically
from storage.properties import PropertiesError, parse_properties

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
META_PROPERTIES = "meta.properties"
PARTITION_LOG_START = "kcoord-log-start-offset"


class CheckpointError(ValueError):
    """A checkpoint file that does not parse."""


def _read_versioned(path: Path, fields: int) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise CheckpointError(f"{path.name}: expected version 0")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path.name}: bad entry count {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count or any(len(e) != fields for e in entries):
        raise CheckpointError(f"{path.name}: expected {count} entries of {fields} fields")
    return entries


def _write_versioned(path: Path, rows: list[str]) -> None:
    write_atomically(path, ("0\n" + f"{len(rows)}\n" + "".join(r + "\n" for r in rows)).encode())


def read_leader_epochs(partition_dir: Path) -> list[tuple[int, int]]:
    """``(leader epoch, start offset)`` pairs; empty if the file does not exist."""
    path = partition_dir / LEADER_EPOCH_CHECKPOINT
    if not path.exists():
        return []
    try:
        return [(int(e), int(o)) for e, o in _read_versioned(path, 2)]
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def write_leader_epochs(partition_dir: Path, entries: list[tuple[int, int]]) -> None:
    _write_versioned(partition_dir / LEADER_EPOCH_CHECKPOINT, [f"{e} {o}" for e, o in entries])


def topic_id_to_str(topic_id: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 without padding (22 characters)."""
    if len(topic_id) != 16:
        raise ValueError("a topic id is 16 bytes")
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


def topic_id_from_str(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise CheckpointError(f"topic id {text!r} is not 16 bytes")
    return raw


def read_partition_metadata(partition_dir: Path) -> bytes | None:
    """The topic id recorded for the partition, or None without a file."""
    path = partition_dir / PARTITION_METADATA
    if not path.exists():
        return None
    fields = dict(
        (k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in path.read_text().splitlines()) if k
    )
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise CheckpointError(f"{path}: expected version 0 and a topic_id")
    return topic_id_from_str(fields["topic_id"])


def write_partition_metadata(partition_dir: Path, topic_id: bytes) -> None:
    write_atomically(
        partition_dir / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n".encode()
    )


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` from a broker-level checkpoint; empty if missing."""
    if not path.exists():
        return {}
    try:
        return {(t, int(p)): int(o) for t, p, o in _read_versioned(path, 3)}
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    _write_versioned(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])


def read_partition_log_start(partition_dir: Path) -> int | None:
    """The log start offset kept in the partition's directory (cluster mode), or None."""
    path = partition_dir / PARTITION_LOG_START
    if not path.exists():
        return None
    lines = path.read_text(encoding="utf-8").split()
    if len(lines) != 2 or lines[0] != "0" or not lines[1].isdigit():
        raise CheckpointError(f"{path}: expected version 0 and an offset")
    return int(lines[1])


def write_partition_log_start(partition_dir: Path, offset: int) -> None:
    write_atomically(partition_dir / PARTITION_LOG_START, f"0\n{offset}\n".encode())


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    path = log_dir / META_PROPERTIES
    if not path.exists():
        return {}
    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except PropertiesError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def write_meta_properties(log_dir: Path, props: dict[str, str]) -> None:
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    body = f"#\n#{stamp}\n" + "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
    write_atomically(log_dir / META_PROPERTIES, body.encode())
