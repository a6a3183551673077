"""Log compaction: keep the newest record per key in the closed segments.

Two passes over the cleanable range (closed segments whose records are older than
``min.compaction.lag.ms``; never the active segment):

1. From the first dirty offset (the last cleaning's end), map each key to its highest offset.
   Records of a transaction enter the map only when its COMMIT marker is seen; aborted
   transactions are noted so their records can go.
2. Rewrite the range, grouped into segments of at most ``segment.bytes``: a record stays if no
   higher offset holds its key. A tombstone (null value) stays through the first cleaning that
   sees it, which stamps a delete horizon (now + ``delete.retention.ms``) into its batch's base
   timestamp with attributes bit 6, and goes once a later cleaning runs past that horizon.
   Batches keep their base offset and last offset delta; unchanged batches are copied as is.

Each new segment is written as ``.cleaned`` files, synced, and swapped in under the log's lock
by renames only (``.cleaned`` -> ``.swap``, old -> ``.deleted``, ``.swap`` -> final), so a crash
at any point leaves a directory that recovery completes or rolls back. Reading and rewriting
happen without the lock; appends are blocked only for the renames.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from protocol.record_batch import (
    ControlType,
    Record,
    RecordBatch,
    build_batch,
    control_type_of,
    decode_keys,
    decode_records,
)
from storage import txn_index
from storage.layout import (
    CLEANED,
    DELETED,
    INDEX,
    LOG,
    SWAP,
    TIME_INDEX,
    TXN_INDEX,
    fsync_dir,
    remove_quietly,
    segment_path,
)
from storage.partition_log import PartitionLog
from storage.segment import INT32_MAX, Segment


@dataclass
class CleanStats:
    bytes_before: int = 0
    bytes_after: int = 0
    records_before: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    batches_rewritten: int = 0
    segments_before: int = 0
    segments_after: int = 0
    first_offset: int = 0
    end_offset: int = 0  # the first offset after the cleaned range: the next first dirty offset
    seconds: float = 0.0


def cleanable_segments(log: PartitionLog, now_ms: int) -> list[Segment]:
    """Closed segments, oldest first, up to the first one holding a record newer than the
    compaction lag."""
    lag = log.config.min_compaction_lag_ms
    out = []
    for seg in log.segments()[:-1]:
        if lag > 0 and seg.max_timestamp > now_ms - lag:
            break
        out.append(seg)
    return out


def dirty_ratio(log: PartitionLog, now_ms: int) -> float:
    segs = cleanable_segments(log, now_ms)
    total = sum(s.size for s in segs)
    dirty = sum(s.size for s in segs if s.next_offset > log.cleaner_checkpoint)
    return dirty / total if total else 0.0


def needs_cleaning(log: PartitionLog, now_ms: int) -> bool:
    return log.config.compact and dirty_ratio(log, now_ms) >= log.config.min_cleanable_dirty_ratio


def group_segments(segments: list[Segment], max_bytes: int, max_index_entries: int) -> list[list[Segment]]:
    """Consecutive runs that fit in one segment once cleaned (by their size before cleaning)."""
    groups: list[list[Segment]] = []
    for seg in segments:
        if groups:
            g = groups[-1]
            if (
                sum(s.size for s in g) + seg.size <= max_bytes
                and sum(len(s.offset_index) for s in g) + len(seg.offset_index) <= max_index_entries
                and seg.next_offset - 1 - g[0].base_offset <= INT32_MAX
            ):
                g.append(seg)
                continue
        groups.append([seg])
    return groups


def segment_batches(seg: Segment, fd: int) -> Iterator[RecordBatch]:
    """Every batch of a closed segment, CRC-checked, read through ``fd``."""
    for _position, batch in seg.batches(0, fd):
        yield batch


class Compaction:
    def __init__(self, log: PartitionLog, now_ms: int) -> None:
        self.log = log
        self.now = now_ms
        self.horizon = now_ms + log.config.delete_retention_ms
        self.offsets: dict[bytes, int] = {}
        self.aborted: set[int] = set()  # base offsets of batches of aborted transactions
        self.last_batch_of: dict[int, int] = {}  # producer id -> base offset of its last batch
        self.txn_kept: dict[int, bool] = {}
        self.stats = CleanStats()

    def build_map(self, segments: list[Segment], fds: list[int], first_dirty: int) -> None:
        pending: dict[int, list[tuple[int, list[tuple[bytes, int]]]]] = {}
        for seg, fd in zip(segments, fds):
            for batch in segment_batches(seg, fd):
                pid = batch.producer_id
                if pid >= 0:
                    self.last_batch_of[pid] = batch.base_offset
                dirty = batch.last_offset >= first_dirty
                if batch.is_control:
                    records = decode_records(batch)
                    kind = control_type_of(records[0]) if records else -1
                    if kind in (ControlType.ABORT, ControlType.COMMIT):
                        for txn_base, txn_keys in pending.pop(pid, []):
                            if kind == ControlType.ABORT:
                                self.aborted.add(txn_base)
                                continue
                            for key, off in txn_keys:
                                if off > self.offsets.get(key, -1):
                                    self.offsets[key] = off
                    continue
                if not dirty and not batch.is_transactional:
                    continue
                base = batch.base_offset
                keys: list[tuple[bytes, int]] = []
                if dirty:
                    for od, k, _null in decode_keys(batch):
                        if k is not None:
                            keys.append((k, base + od))
                if batch.is_transactional:
                    pending.setdefault(pid, []).append((base, keys))
                else:
                    for key, off in keys:
                        self.offsets[key] = off

    def filter(self, batch: RecordBatch) -> bytes | None:
        """The batch as it survives cleaning, or None if nothing of it remains."""
        stats = self.stats
        stats.records_before += batch.records_count
        horizon = batch.delete_horizon_ms
        pid = batch.producer_id
        if batch.is_control:
            had_records = self.txn_kept.pop(pid, False)
            if horizon is not None and self.now >= horizon and not had_records:
                stats.records_removed += batch.records_count
                return None
            if horizon is None:
                return self._rebuild(batch, decode_records(batch), self.horizon)
            return bytes(batch.raw)
        entries = decode_keys(batch)
        keep = []
        tombstones_kept = False
        if not (batch.is_transactional and batch.base_offset in self.aborted):
            latest = self.offsets
            base = batch.base_offset
            expired = horizon is not None and self.now >= horizon
            for od, key, null in entries:
                if key is None:  # not compactable; Kafka refuses them in compacted topics
                    keep.append(True)
                elif latest.get(key, -1) > base + od:
                    keep.append(False)
                elif null:
                    if expired:
                        stats.tombstones_removed += 1
                    else:
                        tombstones_kept = True
                    keep.append(not expired)
                else:
                    keep.append(True)
        kept_count = sum(keep)
        stats.records_removed += len(entries) - kept_count
        if batch.is_transactional and kept_count:
            self.txn_kept[pid] = True
        stamp = horizon is None and tombstones_kept
        if kept_count == len(entries) and not stamp:
            return bytes(batch.raw)
        if not kept_count:
            if pid >= 0 and self.last_batch_of.get(pid) == batch.base_offset:
                return self._rebuild(batch, [], horizon)  # keeps the producer's last sequence
            return None
        kept = [r for r, k in zip(decode_records(batch), keep) if k]
        return self._rebuild(batch, kept, self.horizon if stamp else horizon)

    def _rebuild(self, batch: RecordBatch, kept: list[Record], horizon: int | None) -> bytes:
        self.stats.batches_rewritten += 1
        stamps = [batch.base_timestamp + r.timestamp_delta for r in kept]
        if horizon is not None:
            base_ts = horizon
        else:
            base_ts = stamps[0] if stamps else -1
        records = [Record(r.offset_delta, ts - base_ts, r.key, r.value, r.headers) for r, ts in zip(kept, stamps)]
        if batch.log_append_time or not stamps:
            max_ts = batch.max_timestamp
        else:
            max_ts = max(stamps)
        return build_batch(
            records, batch.base_offset, base_timestamp=base_ts, max_timestamp=max_ts,
            last_offset_delta=batch.last_offset_delta, partition_leader_epoch=batch.partition_leader_epoch,
            producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence, compression=batch.compression,
            log_append_time=batch.log_append_time, transactional=batch.is_transactional,
            control=batch.is_control, delete_horizon=horizon is not None,
        )


def swap_steps(new: Segment, old: list[Segment]) -> list[Callable[[], None]]:
    """The renames that put ``new`` (written as ``.cleaned``) in place of ``old``, one file per
    step, in an order recovery can finish or undo after a crash between any two."""
    steps: list[Callable[[], None]] = []
    for suffix in (INDEX, TIME_INDEX, TXN_INDEX, LOG):  # the .log.swap rename is the commit point
        steps.append(partial(_rename, new.path(suffix), _with_temp(new, suffix, SWAP)))
    for seg in old:
        for path in seg.files():
            steps.append(partial(_rename, path, path.with_name(path.name + DELETED)))
    for suffix in (INDEX, TIME_INDEX, TXN_INDEX, LOG):
        steps.append(partial(_rename, _with_temp(new, suffix, SWAP), _with_temp(new, suffix, "")))
    steps.append(partial(new.set_temp_suffix, ""))
    steps.append(partial(fsync_dir, new.directory))
    return steps


def _with_temp(seg: Segment, suffix: str, temp: str) -> Path:
    return seg.path(suffix).with_name(seg.path(suffix).name.removesuffix(seg.temp_suffix) + temp)


def _rename(src: Path, dst: Path) -> None:
    if src.exists():
        os.replace(src, dst)


def write_cleaned(log: PartitionLog, job: Compaction, group: list[Segment], fds: list[int]) -> Segment:
    """Write the cleaned version of ``group`` as ``.cleaned`` files, synced."""
    log.check_fence()
    try:
        new = Segment.create(log.directory, group[0].base_offset, log.config, job.now, temp_suffix=CLEANED)
    except FileExistsError:
        # Output of a cleaning that never finished (the owner's recovery removes such files, but a
        # fenced node may have left one since): only this owner's cleaner writes here now.
        for suffix in (INDEX, TIME_INDEX, TXN_INDEX, LOG):
            remove_quietly(segment_path(log.directory, group[0].base_offset, suffix + CLEANED))
        log.check_fence()
        new = Segment.create(log.directory, group[0].base_offset, log.config, job.now, temp_suffix=CLEANED)
    try:
        for seg, fd in zip(group, fds):
            for batch in segment_batches(seg, fd):
                out = job.filter(batch)
                if out is not None:
                    new.append(out)
        new.deactivate()
        new.sync(with_indexes=True)
        # Aborted transactions stay in the index even when cleaning removed their records, as
        # Kafka's cleaner keeps them (a fetch from an older offset may still need them).
        aborted = [txn for seg in group for txn in txn_index.read(seg.path(TXN_INDEX)) or []]
        if aborted:
            txn_index.rewrite(new.path(TXN_INDEX), aborted)
    except BaseException:
        discard(new)
        raise
    return new


def discard(new: Segment) -> None:
    new.close_files()
    for path in new.files():
        remove_quietly(path)


def clean(log: PartitionLog, now_ms: int | None = None, *, force: bool = False) -> CleanStats | None:
    """Compact ``log`` if its policy is compact and its dirty ratio calls for it (or ``force``).
    Returns what was done, or None when there was nothing to do."""
    started = time.perf_counter()
    now = log.clock() if now_ms is None else now_ms
    if not log.config.compact or not (force or needs_cleaning(log, now)):
        return None
    segments = cleanable_segments(log, now)
    if not segments:
        return None
    fds = log.open_readers(segments)
    if fds is None:
        return None
    job = Compaction(log, now)
    stats = job.stats
    stats.first_offset = segments[0].base_offset
    stats.end_offset = segments[-1].next_offset
    try:
        job.build_map(segments, fds, log.cleaner_checkpoint)
        max_entries = log.config.segment_index_bytes // 8
        position = 0
        for group in group_segments(segments, log.config.segment_bytes, max_entries):
            group_fds = fds[position : position + len(group)]
            position += len(group)
            stats.segments_before += len(group)
            stats.bytes_before += sum(s.size for s in group)
            new = write_cleaned(log, job, group, group_fds)
            deleted = [p.with_name(p.name + DELETED) for s in group for p in s.files()]
            if not log.replace_segments(group, new, swap_steps(new, group)):
                discard(new)
                return None
            for path in deleted:
                remove_quietly(path)
            stats.segments_after += 1
            stats.bytes_after += new.size
    finally:
        for fd in fds:
            os.close(fd)
    log.cleaner_checkpoint = max(log.cleaner_checkpoint, stats.end_offset)
    stats.seconds = time.perf_counter() - started
    return stats
