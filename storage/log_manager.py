"""All partition logs under one ``log.dir``: ``<dir>/<topic>-<partition>/``.

Opens existing logs with their broker-level checkpoints (recovery point, log start offset,
cleaner offset), creates new ones, writes the checkpoints back, and deletes a topic the way
Kafka does: each partition directory is renamed to ``<topic>-<partition>.<id>-delete`` (so a
crash leaves no half-deleted live partition) and then removed.

In a cluster a partition directory is renamed away only under its owner's fence, checked right
before the rename: by the owner of a deleted topic's partition (``delete_partition``), or by the
owner of a topic created again under the same name, which finds the old topic's directory where
its partition goes (its ``partition.metadata`` names a deleted topic) and opens a fresh one.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from storage.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    read_partition_log_start,
    read_partition_metadata,
    write_offset_checkpoint,
    write_partition_log_start,
    write_partition_metadata,
)
from storage.config import LogConfig
from storage.errors import FencedError, OffsetOutOfRangeError, StorageError
from storage.fencing import Fence
from storage.layout import DELETE_DIR_SUFFIX, fsync_dir, parse_partition_dir, partition_dir_name
from storage.partition_log import Clock, PartitionLog, wall_clock_ms
from storage.recovery import RecoveryReport

TopicPartition = tuple[str, int]


class LogStartMove(NamedTuple):
    """One partition's log start to move (DeleteRecords) to ``offset``."""

    topic: str
    partition: int
    log: PartitionLog
    offset: int


class LogOpener(Protocol):
    """Opens (recovering or creating) the log in a partition directory: ``PartitionLog.open``, or
    a stand-in with the same signature where a test needs a log it controls."""

    def __call__(self, directory: str | os.PathLike[str], config: LogConfig, *, recovery_point: int | None = None,
                 log_start_offset: int | None = None, clock: Clock = wall_clock_ms,
                 fence: Fence | None = None) -> tuple[PartitionLog, RecoveryReport]:
        ...


class LogManager:
    def __init__(self, log_dir: str | os.PathLike[str], config: LogConfig, *, clock: Clock = wall_clock_ms,
                 opener: LogOpener = PartitionLog.open, shared: bool = False) -> None:
        """``shared``: several brokers (a cluster) use this directory, each owning some partitions.
        The broker-level checkpoints would then be one file written by all of them, each with its
        own partial view, so none is read or written: every log is verified when it is opened."""
        self.shared = shared
        self.log_dir = Path(log_dir)
        self.config = config
        self.clock = clock
        self.opener = opener
        self.reports: dict[TopicPartition, RecoveryReport] = {}
        # Partitions whose opening replaced a deleted topic's directory (for the caller to report).
        self.replaced: set[TopicPartition] = set()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._lock = threading.Lock()
        # One writer of the checkpoint files at a time (retention and DeleteRecords both write them).
        self._write_lock = threading.Lock()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.log_dir.glob(f"*{DELETE_DIR_SUFFIX}"):
            shutil.rmtree(leftover, ignore_errors=True)
        self._recovery_points: dict[TopicPartition, int] = {}
        self._log_starts: dict[TopicPartition, int] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        if not shared:
            self._recovery_points = read_offset_checkpoint(self.log_dir / RECOVERY_POINT_CHECKPOINT)
            self._log_starts = read_offset_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT)
            self._cleaner_offsets = read_offset_checkpoint(self.log_dir / CLEANER_OFFSET_CHECKPOINT)

    def existing_partitions(self) -> list[TopicPartition]:
        """Partitions that have a directory on disk, sorted."""
        found = []
        for entry in os.scandir(self.log_dir):
            tp = parse_partition_dir(entry.name) if entry.is_dir() else None
            if tp:
                found.append(tp)
        return sorted(found)

    def open_all(self, config_for: Callable[[str], LogConfig] | None = None) -> dict[TopicPartition, RecoveryReport]:
        """Open every partition on disk; returns each one's recovery report."""
        for topic, partition in self.existing_partitions():
            self.get_or_create(topic, partition, config_for(topic) if config_for else None)
        return dict(self.reports)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        with self._lock:
            return self._logs.get((topic, partition))

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig | None = None, topic_id: bytes | None = None,
        fence: Fence | None = None, deleted: Collection[bytes] = (),
    ) -> PartitionLog:
        """The open log of a partition, opening (and recovering) or creating it as needed.

        With a ``fence`` (a cluster node's claim of the partition) the log is always opened afresh
        from its files, whatever this process had open before (which is let go of untouched), and
        carries the fence: nothing of an earlier tenure (segment list, end offset, indexes, epoch
        cache) survives into a new one. Raises ``FencedError`` if the claim is already over. A
        directory found there whose ``partition.metadata`` names one of the ``deleted`` topic ids
        (a topic deleted, its name since taken by another) is renamed away under the fence first."""
        tp = (topic, partition)
        discarded: Path | None = None
        with self._lock:
            log = self._logs.get(tp)
            if log is not None and fence is None:
                return log
            if log is not None:
                del self._logs[tp]
                log.abandon()
            if fence is not None:
                fence.check()
            directory = self.log_dir / partition_dir_name(topic, partition)
            inode = self._inode(directory) if fence is not None and deleted else None
            if inode is not None and self.recorded_topic_id(directory) in deleted:
                # A deleted topic's partition under the same name, not removed yet (its owner died
                # first, or is this node, which kept the claim across the deletion): it is no part
                # of this topic. Only the partition's owner gets here.
                discarded = self._rename_away(directory, fence, inode)
                self.replaced.add(tp)
            created = not directory.exists()
            start = read_partition_log_start(directory) if self.shared else self._log_starts.get(tp)
            log, report = self.opener(
                directory, config or self.config, recovery_point=self._recovery_points.get(tp),
                log_start_offset=start, clock=self.clock, fence=fence,
            )
            log.cleaner_checkpoint = max(log.log_start_offset, self._cleaner_offsets.get(tp, 0))
            if fence is not None:
                log.fence = fence
                try:
                    fence.check()
                except BaseException:
                    log.abandon()
                    raise
            if topic_id is not None and (created or read_partition_metadata(directory) is None):
                write_partition_metadata(directory, topic_id)
            if created:
                fsync_dir(self.log_dir)
            self._logs[tp] = log
            self.reports[tp] = report
        if discarded is not None:
            shutil.rmtree(discarded, ignore_errors=True)
        return log

    @staticmethod
    def recorded_topic_id(directory: Path) -> bytes | None:
        """The topic id in the directory's ``partition.metadata`` (None without a readable one)."""
        try:
            return read_partition_metadata(directory)
        except (CheckpointError, OSError, ValueError):
            return None

    def _rename_away(self, directory: Path, fence: Fence | None, inode: int | None = None) -> Path:
        """Renames a partition directory to ``<name>.<id>-delete`` (durably): from then on it is no
        partition's, and whoever removes it changes nothing a partition holds. With a ``fence``,
        checked right before the rename: ``FencedError`` and nothing renamed without the claim.

        ``inode`` is the directory that was inspected (its topic id read): if what the rename took
        is another one, this process was stopped between its check and the rename for longer than
        its lease, and a new owner has replaced the directory meanwhile. It is put back at once and
        ``FencedError`` raised, so that nothing of it is removed."""
        target = self.log_dir / f"{directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        if fence is not None:
            fence.check()
        os.replace(directory, target)
        if inode is not None and os.stat(target).st_ino != inode:
            os.rename(target, directory)
            fsync_dir(self.log_dir)
            raise FencedError(f"{directory.name}: replaced by a new owner before the rename; put back")
        fsync_dir(self.log_dir)
        return target

    @staticmethod
    def _inode(directory: Path) -> int | None:
        try:
            return os.stat(directory).st_ino
        except FileNotFoundError:
            return None

    def forget(self, topic: str, partition: int) -> None:
        """Stop tracking an open log (its owner closes it); the next ``get_or_create`` reopens and
        recovers it from disk. Its checkpoints are kept."""
        with self._lock:
            log = self._logs.pop((topic, partition), None)
            if log is not None and not self.shared:
                tp = (topic, partition)
                self._recovery_points[tp] = log.recovery_point
                self._log_starts[tp] = log.log_start_offset
                self._cleaner_offsets[tp] = log.cleaner_checkpoint

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def delete_topic(self, topic: str) -> list[int]:
        """Close and remove every partition directory of ``topic``; returns the partitions. For a
        single broker, which owns every partition; a cluster node removes only the partitions it
        owns, one by one (``delete_partition``)."""
        partitions = [p for t, p in self.existing_partitions() if t == topic]
        with self._lock:
            logs = [self._logs.pop((topic, p), None) for p in partitions]
            for p in partitions:
                self._drop_checkpoints((topic, p))
        doomed = []
        for p, log in zip(partitions, logs):
            if log is not None:
                log.close()
            src = self.log_dir / partition_dir_name(topic, p)
            dst = self.log_dir / f"{partition_dir_name(topic, p)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
            os.replace(src, dst)
            doomed.append(dst)
        if doomed:
            fsync_dir(self.log_dir)
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        self.checkpoint()
        return partitions

    def delete_partition(self, topic: str, partition: int, fence: Fence, deleted: Collection[bytes]) -> bool:
        """Removes the directory of a deleted topic's partition, as the holder of ``fence`` (this
        node's claim of the partition), checked right before the rename: without a valid claim it
        raises ``FencedError`` with every file as it was. Only a directory whose
        ``partition.metadata`` names one of the ``deleted`` topic ids goes: one recorded with a live
        topic's id (a topic created again under that name), or with none, stays. Returns whether a
        directory went."""
        tp = (topic, partition)
        directory = self.log_dir / partition_dir_name(topic, partition)
        with self._lock:
            fence.check()
            inode = self._inode(directory)
            if inode is None or self.recorded_topic_id(directory) not in deleted:
                return False
            log = self._logs.pop(tp, None)
            if log is not None and log.fence is fence:
                log.close()  # flushed under this claim's fence
            elif log is not None:
                log.abandon()  # an earlier tenure's: not ours to flush
            self._drop_checkpoints(tp)
            doomed = self._rename_away(directory, fence, inode)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def _drop_checkpoints(self, tp: TopicPartition) -> None:
        for table in (self._recovery_points, self._log_starts, self._cleaner_offsets):
            table.pop(tp, None)
        self.reports.pop(tp, None)

    def checkpoint(self) -> None:
        """Write the broker-level checkpoints for every open log."""
        if self.shared:
            return
        with self._write_lock:
            with self._lock:
                for tp, log in self._logs.items():
                    self._recovery_points[tp] = log.recovery_point
                    # Never back: a log start DeleteRecords made durable is applied to the log
                    # only after this file holds it.
                    self._log_starts[tp] = max(self._log_starts.get(tp, 0), log.log_start_offset)
                    self._cleaner_offsets[tp] = log.cleaner_checkpoint
                recovery, starts = dict(self._recovery_points), dict(self._log_starts)
                cleaner = dict(self._cleaner_offsets)
            write_offset_checkpoint(self.log_dir / RECOVERY_POINT_CHECKPOINT, recovery)
            write_offset_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT, starts)
            write_offset_checkpoint(self.log_dir / CLEANER_OFFSET_CHECKPOINT, cleaner)

    def move_log_start(self, topic: str, partition: int, log: PartitionLog, offset: int) -> int:
        """``move_log_starts`` for one partition: returns its log start offset or raises."""
        (result,) = self.move_log_starts([LogStartMove(topic, partition, log, offset)])
        if isinstance(result, BaseException):
            raise result
        return result

    def move_log_starts(self, moves: Sequence[LogStartMove]) -> list[int | StorageError | OSError]:
        """DeleteRecords: make each move's offset its partition's log start, durably first (Kafka's
        ``log-start-offset-checkpoint``, written once for all of them; in a cluster each owner's
        file beside the segments, written under its fence), then in the logs, which drop the
        segments wholly below. Nothing reads a new start before it is on disk. Per move: the log
        start offset, ``OffsetOutOfRangeError`` past the log end, ``FencedError`` for a partition no
        longer owned here, or the error that kept it from disk. Blocking."""
        results: list[int | StorageError | OSError] = []
        durable: list[int] = []
        for i, move in enumerate(moves):
            log = move.log
            if move.offset <= log.log_start_offset:
                results.append(log.log_start_offset)
                continue
            if move.offset > log.end_offset:
                results.append(OffsetOutOfRangeError(move.offset, log.log_start_offset, log.end_offset))
                continue
            results.append(move.offset)
            if self.shared:
                try:
                    log.check_fence()
                    write_partition_log_start(log.directory, move.offset)
                except (StorageError, OSError) as exc:
                    results[i] = exc
                    continue
            durable.append(i)
        if not self.shared and durable:
            try:
                self._write_log_starts([moves[i] for i in durable])
            except OSError as exc:
                for i in durable:
                    results[i] = exc
                return results
        for i in durable:
            try:
                results[i] = moves[i].log.delete_records_before(moves[i].offset)
            except (StorageError, OSError) as exc:  # durable already: the next open applies it
                results[i] = exc
        return results

    def _write_log_starts(self, moves: Sequence[LogStartMove]) -> None:
        """``log-start-offset-checkpoint`` with these moves in it (and, never lower, every other
        partition's log start)."""
        with self._write_lock:
            with self._lock:
                for move in moves:
                    tp = (move.topic, move.partition)
                    self._log_starts[tp] = max(self._log_starts.get(tp, 0), move.offset)
                for tp, log in self._logs.items():
                    self._log_starts[tp] = max(self._log_starts.get(tp, 0), log.log_start_offset)
                starts = dict(self._log_starts)
            write_offset_checkpoint(self.log_dir / LOG_START_OFFSET_CHECKPOINT, starts)

    def close(self) -> None:
        """Flush and close every log, then write checkpoints that make the next open quick."""
        for log in self.logs().values():
            log.close()
        self.checkpoint()
        with self._lock:
            self._logs.clear()
