"""Bringing a partition directory back to a consistent log when it is opened.

1. Leftovers of an interrupted compaction: ``.cleaned`` files are unfinished output and go;
   a ``.log.swap`` is finished output whose swap was interrupted, so the segments it replaces
   go and it takes their place; ``.deleted`` files go. So do the ``<file>.<pid>.tmp`` of a
   whole-file write cut short before its rename (``layout.write_atomically``: the epoch checkpoint,
   the log start offset, a replay snapshot): the file itself is still the previous one, whole.
2. Every segment that may hold unflushed data (all of them without a recovery point, else those
   reaching past it, and always the last) is read batch by batch with CRC checks. At the first
   short batch, bad CRC, garbage or offset going backwards the segment is cut there and every
   later segment is dropped. Indexes are recomputed during the scan and rewritten if they differ.
3. Segments below the recovery point are trusted: only their index files are sanity-checked.

In a cluster the opening node holds a ``Fence`` (its claim of the partition), checked right before
every change recovery makes (a removal, a rename, a cut, an index rewritten or resized, even an
index file created by opening it): a node stopped midway whose claim passed meanwhile to another
node stops there with ``FencedError``, and never repairs what the new owner is writing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from protocol.record_batch import CorruptBatchError, iter_batches
from storage.config import LogConfig
from storage.fencing import Fence
from storage.layout import (
    CLEANED,
    DELETED,
    INDEX,
    LOG,
    SWAP,
    TIME_INDEX,
    TXN_INDEX,
    fsync_dir,
    is_unfinished_write,
    parse_segment_file,
    remove_quietly,
    segment_name,
    segment_path,
)
from storage.segment import INT32_MAX, Segment


@dataclass
class Truncation:
    segment: str
    position: int
    bytes_dropped: int
    kind: str  # short, crc, length, magic, records, offsets
    reason: str
    next_offset: int  # the log end after the cut: the first offset that was lost


@dataclass
class DroppedSegment:
    segment: str
    base_offset: int
    size: int


@dataclass
class RecoveryReport:
    directory: str
    truncations: list[Truncation] = field(default_factory=list)
    dropped_segments: list[DroppedSegment] = field(default_factory=list)
    rebuilt_indexes: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    leftovers: list[tuple[str, str]] = field(default_factory=list)  # (file, what was done)
    segments: int = 0
    scanned_segments: int = 0
    scanned_bytes: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    # The leader epochs the scanned batches carry: (epoch, first offset), each above the last, and
    # the first offset scanned (None when every segment was trusted). What the batches say is the
    # truth the leader-epoch checkpoint is rebuilt from, as Kafka's recovery does.
    scanned_epochs: list[tuple[int, int]] = field(default_factory=list)
    scanned_from: int | None = None

    @property
    def clean(self) -> bool:
        """Nothing was lost (rebuilt indexes and tidied leftovers lose nothing)."""
        return not self.truncations and not self.dropped_segments

    @property
    def bytes_dropped(self) -> int:
        return sum(t.bytes_dropped for t in self.truncations) + sum(d.size for d in self.dropped_segments)

    def summary(self) -> str:
        parts = [f"{self.directory}: {self.segments} segments, offsets [{self.log_start_offset}, {self.log_end_offset})"]
        for t in self.truncations:
            parts.append(f"truncated {t.segment} at byte {t.position} ({t.bytes_dropped} bytes, {t.kind}: {t.reason})")
        for d in self.dropped_segments:
            parts.append(f"dropped {d.segment} ({d.size} bytes) after the corrupt point")
        for name, why in self.rebuilt_indexes:
            parts.append(f"rebuilt {name} ({why})")
        for name, what in self.leftovers:
            parts.append(f"{what}: {name}")
        return "; ".join(parts)


def _unfenced() -> None:
    pass


def recover(
    directory: Path, config: LogConfig, now_ms: int, recovery_point: int | None, fence: Fence | None = None
) -> tuple[list[Segment], RecoveryReport]:
    """Open every segment of ``directory`` (which must exist), repairing as described above.
    The last segment comes back active. The list may be empty. With a ``fence``, ``FencedError``
    as soon as a change is due without a valid claim (every file opened is closed first)."""
    check = fence.check if fence is not None else _unfenced
    segments: list[Segment] = []
    try:
        return _recover(directory, config, now_ms, recovery_point, check, segments)
    except BaseException:
        for seg in segments:
            seg.close_files()
        raise


def _recover(
    directory: Path, config: LogConfig, now_ms: int, recovery_point: int | None, check: Callable[[], None],
    segments: list[Segment],
) -> tuple[list[Segment], RecoveryReport]:
    report = RecoveryReport(directory=str(directory))
    _finish_interrupted_cleaning(directory, report, check)
    _remove_unfinished_writes(directory, report, check)
    bases = sorted(
        p[0] for p in map(parse_segment_file, os.listdir(directory)) if p and p[1] == LOG and not p[2]
    )
    _remove_orphan_indexes(directory, set(bases), report, check)
    expected_offset = -1
    for i, base in enumerate(bases):
        seg = Segment(directory, base, config, now_ms)
        had_indexes = seg.path(INDEX).exists() and seg.path(TIME_INDEX).exists()
        if not had_indexes:
            check()  # opening creates the missing index file
        index_sane, time_sane = seg.open_files()
        segments.append(seg)
        last = i == len(bases) - 1
        trusted = (
            recovery_point is not None
            and not last
            and bases[i + 1] <= recovery_point
            and had_indexes
            and index_sane
            and time_sane
            and _indexes_fit(seg, bases[i + 1])
        )
        if trusted:
            seg.stats_known = False
            seg.next_offset = bases[i + 1]
            check()
            seg.offset_index.trim()
            seg.time_index.trim()
            _release_indexes(seg)
            expected_offset = bases[i + 1]
            continue
        why = "missing" if not had_indexes else ("corrupt" if not (index_sane and time_sane) else "stale")
        # A segment ends where the next one begins: anything beyond that was appended by an owner
        # that had already been replaced (cluster mode: the new owner rolled a new segment at its
        # epoch, the old one kept writing into the file it had open).
        cut = _scan(seg, max(expected_offset, base), last, why, report, None if last else bases[i + 1], check)
        _release_indexes(seg)
        expected_offset = seg.next_offset
        if cut:
            for later in bases[i + 1 :]:
                check()
                _drop_segment(directory, later, report)
            break
    if segments:
        check()
        segments[-1].hold_log()
        segments[-1].activate()  # its indexes are opened again: appended to from now on
    report.segments = len(segments)
    return segments, report


def _release_indexes(seg: Segment) -> None:
    """A recovered segment's indexes are in memory: their descriptors are closed at once, so that
    opening a log needs a few descriptors however many segments it has (the last one's .log is
    opened again when it becomes the active segment)."""
    seg.offset_index.release()
    seg.time_index.release()
    seg.release_log()


def _indexes_fit(seg: Segment, next_base: int) -> bool:
    off, pos = seg.offset_index.last_entry()
    _ts, ts_off = seg.time_index.last_entry()
    return pos < max(seg.size, 1) and off < next_base and ts_off < next_base


def _scan(seg: Segment, expected_offset: int, active: bool, why: str, report: RecoveryReport,
          limit: int | None = None, check: Callable[[], None] = _unfenced) -> bool:
    """Validate every batch of ``seg``, rebuilding its state and indexes; cut at the first bad
    one. Returns True when the segment was cut. A batch at or beyond ``limit`` (the next
    segment's base offset) is cut too, but the segments after it stay: they are the log."""
    report.scanned_segments += 1
    report.scanned_bytes += seg.size
    if report.scanned_from is None:
        report.scanned_from = seg.base_offset
    epochs = report.scanned_epochs
    loaded_offsets = seg.offset_index.forget()
    loaded_times = seg.time_index.forget()
    seg.offset_index.write_through = seg.time_index.write_through = False
    size = seg.size
    error: CorruptBatchError | None = None
    stale: CorruptBatchError | None = None
    valid_end = 0
    try:
        for position, batch in seg.batches():
            if limit is not None and batch.base_offset >= limit:
                stale = CorruptBatchError(f"batch at offset {batch.base_offset} beyond the next segment ({limit}), "
                                          "appended by a replaced owner", position, "stale-owner")
                break
            if batch.base_offset < expected_offset or batch.last_offset - seg.base_offset > INT32_MAX:
                error = CorruptBatchError(
                    f"batch at offset {batch.base_offset} after offset {expected_offset - 1}", position, "offsets"
                )
                break
            seg.account(position, batch)
            epoch = batch.partition_leader_epoch
            if epoch >= 0 and (not epochs or epoch > epochs[-1][0]):
                epochs.append((epoch, batch.base_offset))
            expected_offset = batch.next_offset
            valid_end = position + batch.size
    except CorruptBatchError as exc:
        error = exc
    if error is not None and limit is not None and expected_offset >= limit:
        # Whatever follows a segment that reaches the next one's base offset is no part of the log,
        # a batch torn or not: a replaced owner's late append (cluster mode) cut short by a crash.
        # The segments after it are the log: they stay.
        stale = CorruptBatchError(f"{error.kind} bytes beyond the next segment ({limit}), appended by a replaced "
                                  "owner", error.position, "stale-owner")
        error = None
    expected_offsets = seg.offset_index.entries()
    expected_times = seg.time_index.entries()
    closed_times = expected_times
    if seg.max_timestamp >= 0 and (not expected_times or seg.max_timestamp > expected_times[-1][0]):
        closed_times = [*expected_times, (seg.max_timestamp, seg.offset_of_max_timestamp - seg.base_offset)]
    seg.offset_index.write_through = seg.time_index.write_through = True
    reason = why if why != "stale" else "did not match the log"
    if why != "stale" or loaded_offsets != expected_offsets:
        check()
        seg.offset_index.replace_all(expected_offsets)
        report.rebuilt_indexes.append((seg.path(INDEX).name, reason))
    if why != "stale" or loaded_times not in (expected_times, closed_times):
        check()
        seg.time_index.replace_all(expected_times if active else closed_times)
        report.rebuilt_indexes.append((seg.path(TIME_INDEX).name, reason))
    else:
        seg.time_index.set_entries(loaded_times)
    if not active:
        check()
        seg.offset_index.trim()
        seg.time_index.trim()
    if error is None and stale is None:
        return False
    cause = error or stale
    assert cause is not None
    check()
    seg.truncate_to(valid_end)
    seg.time_index.truncate_to_offset(seg.next_offset)
    report.truncations.append(
        Truncation(seg.name, valid_end, size - valid_end, cause.kind, cause.reason, seg.next_offset)
    )
    return error is not None


def _drop_segment(directory: Path, base: int, report: RecoveryReport) -> None:
    log = segment_path(directory, base, LOG)
    size = log.stat().st_size if log.exists() else 0
    for suffix in (INDEX, TIME_INDEX, TXN_INDEX, LOG):
        p = segment_path(directory, base, suffix)
        if p.exists():
            os.replace(p, p.with_name(p.name + DELETED))
    for suffix in (INDEX, TIME_INDEX, TXN_INDEX, LOG):
        remove_quietly(segment_path(directory, base, suffix + DELETED))
    report.dropped_segments.append(DroppedSegment(log.name, base, size))


def _finish_interrupted_cleaning(directory: Path, report: RecoveryReport, check: Callable[[], None]) -> None:
    names = sorted(os.listdir(directory))
    parsed = {n: p for n in names if (p := parse_segment_file(n))}
    for name, (_base, _suffix, temp) in parsed.items():
        if temp == CLEANED:
            check()
            remove_quietly(directory / name)
            report.leftovers.append((name, "removed unfinished compaction output"))
    for name, (base, suffix, temp) in parsed.items():
        if temp != SWAP or suffix != LOG:
            continue
        upto = max(base + 1, _next_offset(directory / name, base))
        for other, (obase, osuffix, otemp) in parsed.items():
            if obase == base and otemp == "" and not segment_path(directory, base, osuffix + SWAP).exists():
                # Already moved into place: every old file was renamed .deleted before that step
                # (an old one still here has its compacted counterpart in a .swap beside it).
                continue
            if otemp in ("", DELETED) and base <= obase < upto and (directory / other).exists():
                check()
                remove_quietly(directory / other)
                report.leftovers.append((other, "removed: replaced by a compacted segment"))
        for s in (INDEX, TIME_INDEX, TXN_INDEX, LOG):
            swap = segment_path(directory, base, s + SWAP)
            if swap.exists():
                check()
                os.replace(swap, segment_path(directory, base, s))
                report.leftovers.append((swap.name, "completed an interrupted compaction swap"))
        fsync_dir(directory)
    for name, (_base, _suffix, temp) in parsed.items():
        if temp in (SWAP, DELETED) and (directory / name).exists():
            check()
            remove_quietly(directory / name)
            report.leftovers.append((name, "removed leftover"))


def _remove_unfinished_writes(directory: Path, report: RecoveryReport, check: Callable[[], None]) -> None:
    """The temporary files of whole-file writes that never reached their rename. Only a partition's
    owner writes in its directory, and it is opening it now: none of them is still being written
    (a replaced owner still writing one is fenced, and its rename then fails, as it should)."""
    for name in sorted(os.listdir(directory)):
        if is_unfinished_write(name):
            check()
            remove_quietly(directory / name)
            report.leftovers.append((name, "removed an unfinished write"))


def _next_offset(path: Path, base: int) -> int:
    """Next offset after the valid batches of a segment file."""
    data = path.read_bytes()
    nxt = base
    try:
        for batch in iter_batches(data):
            nxt = batch.next_offset
    except CorruptBatchError:
        pass
    return nxt


def _remove_orphan_indexes(directory: Path, bases: set[int], report: RecoveryReport,
                           check: Callable[[], None]) -> None:
    for name in os.listdir(directory):
        if name.endswith(TXN_INDEX + ".tmp"):  # a rewrite of the transaction index cut short
            check()
            remove_quietly(directory / name)
            report.leftovers.append((name, "removed unfinished transaction index"))
            continue
        p = parse_segment_file(name)
        if p and not p[2] and p[1] in (INDEX, TIME_INDEX, TXN_INDEX) and p[0] not in bases:
            check()
            remove_quietly(directory / name)
            report.leftovers.append((name, f"removed index without {segment_name(p[0])}{LOG}"))
