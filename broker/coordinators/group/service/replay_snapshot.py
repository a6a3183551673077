"""The replay snapshot: a cache that lets a shard load without reading its whole log.

It holds, for one ``__consumer_offsets`` partition, the records below an offset whose replay
matters (``replay_plan.select``: the last record of every key, the commits that create groups,
every group record), as record batches with their original offsets. Loading replays those, then
the log from the snapshot's end offset on: by the replay plan's rule the shard ends up exactly as
replaying every record of the log would leave it.

It is built from the log's bytes only (the previous snapshot plus the log after it, up to the
log's recovery point), never from a shard's memory, so it holds nothing that is not durable in the
log. It records what it covers (``storage.log_coverage``: segments, sizes, the last batch's CRC)
and its format version; a snapshot that is unreadable, of another version or partition, or whose
coverage the log no longer matches (compaction, retention, a truncated tail) is ignored and the
log is replayed in full. Deleting the file is always safe.

Format version 1 carries no transaction state: it is written only for logs without transactional
or control batches below its end offset. A version that stores pending transactional offsets
must use a new number; a reader refuses any version it does not know.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from broker.coordinators.group.service.replay_plan import Selected, replay_log, select
from protocol.payloads.offsets_log_records import decode_record
from protocol.record import Record
from protocol.record_batch import RecordBatch, build_batch, decode_records, iter_batches
from storage.checked_file import CheckedFileError, read_checked, write_checked
from storage.log_coverage import CoverageFormatError, LogCoverage
from storage.partition_log import PartitionLog

FILE_NAME = "kcoord-replay-snapshot"
KIND = b"KRS1"
FORMAT_VERSION = 1
_HEAD = struct.Struct(">hiqi")  # format version, partition, records, coverage length
_RECORDS_PER_BATCH = 1000
_MAX_DELTA = 2**31 - 1


class SnapshotRejected(Exception):
    """A snapshot file that must not be used; the message says why."""


class _TransactionState(Exception):
    """The log holds what format 1 cannot carry."""


@dataclass(frozen=True, slots=True)
class ReplaySnapshot:
    partition: int
    coverage: LogCoverage
    records: int
    body: bytes  # record batches

    @property
    def end_offset(self) -> int:
        return self.coverage.end_offset

    def batches(self) -> Iterator[RecordBatch]:
        # The file's CRC covers every byte of the body.
        return iter_batches(self.body, verify_crc=False)

    def to_bytes(self) -> bytes:
        coverage = self.coverage.to_bytes()
        return _HEAD.pack(FORMAT_VERSION, self.partition, self.records, len(coverage)) + coverage + self.body

    @classmethod
    def from_bytes(cls, data: bytes) -> ReplaySnapshot:
        if len(data) < _HEAD.size:
            raise SnapshotRejected("shorter than its header")
        version, partition, records, coverage_len = _HEAD.unpack_from(data, 0)
        if version != FORMAT_VERSION:
            raise SnapshotRejected(f"format version {version}, this broker reads {FORMAT_VERSION}")
        start = _HEAD.size
        try:
            coverage = LogCoverage.from_bytes(data[start : start + coverage_len])
        except CoverageFormatError as exc:
            raise SnapshotRejected(f"coverage: {exc}") from None
        return cls(partition, coverage, records, data[start + coverage_len :])


def path_of(log: PartitionLog) -> Path:
    return log.directory / FILE_NAME


def read(log: PartitionLog, partition: int) -> ReplaySnapshot | None:
    """The partition's snapshot if there is one the log still matches; None when there is none.
    Raises ``SnapshotRejected`` for one that exists but must be ignored."""
    try:
        payload = read_checked(path_of(log), KIND)
    except (CheckedFileError, OSError) as exc:
        raise SnapshotRejected(str(exc)) from None
    if payload is None:
        return None
    snapshot = ReplaySnapshot.from_bytes(payload)
    if snapshot.partition != partition:
        raise SnapshotRejected(f"written for partition {snapshot.partition}")
    if not log.covers(snapshot.coverage):
        raise SnapshotRejected(f"the log below offset {snapshot.end_offset} changed since it was written")
    return snapshot


class Loaded(NamedTuple):
    snapshot_records: int  # read from the snapshot
    log_records: int  # read from the log after it
    replayed: int


def load(snapshot: ReplaySnapshot | None, log: PartitionLog, replay: Callable[[Any, int], None],
         replay_txn: Callable[[Any, int], None] | None = None,
         on_marker: Callable[[int, bool], None] | None = None) -> Loaded:
    """Replays the partition into ``replay(record, offset)``: every record of the snapshot (they
    are the ones that matter below its end offset, so the state after them is the state after the
    log up to there), then the log after it through the replay plan. The plan of the log's tail
    alone knows no group the snapshot made, so it may replay a commit it could have skipped,
    never skip one it must replay. Transactional records and markers (only ever in the log: format
    1 snapshots hold none) go to ``replay_txn`` and ``on_marker`` as in ``replay_log``."""
    snapshot_records = replayed = 0
    start = 0
    if snapshot is not None:
        start = snapshot.end_offset
        for batch in snapshot.batches():
            base = batch.base_offset
            for record in decode_records(batch):
                snapshot_records += 1
                rec = decode_record(record.key, record.value) if record.key is not None else None
                if rec is not None:
                    replay(rec, base + record.offset_delta)
                    replayed += 1
    log_records, from_log = replay_log(partial(_between, log, start, None), replay, replay_txn, on_marker)
    return Loaded(snapshot_records, log_records, replayed + from_log)


def _between(log: PartitionLog, start: int, end: int | None) -> Iterator[RecordBatch]:
    """The log's batches from ``start`` (where a batch begins) to ``end`` (excluded)."""
    for batch in log.batches(start):
        if end is not None and batch.base_offset >= end:
            return
        if batch.base_offset >= start:
            yield batch


def build(log: PartitionLog, partition: int, previous: ReplaySnapshot | None) -> ReplaySnapshot | None:
    """A snapshot up to the log's recovery point (what is durable), from ``previous`` (if the log
    still matches it) and the log after it. None when there is nothing new to cover, when the log
    holds transactional or control batches (format 1 does not carry their state) or when it
    changed while being read."""
    end = log.recovery_point
    if previous is not None and not log.covers(previous.coverage):
        previous = None
    start = previous.end_offset if previous is not None else 0
    if end <= start:
        return None
    coverage = log.coverage(end)
    if coverage is None:
        return None

    def source() -> Iterator[RecordBatch]:
        earlier: Iterable[RecordBatch] = previous.batches() if previous is not None else ()
        for batch in itertools.chain(earlier, _between(log, start, end)):
            if batch.is_transactional or batch.is_control:
                raise _TransactionState
            yield batch

    try:
        selected = list(select(source))
    except _TransactionState:
        return None
    if not log.covers(coverage):
        return None
    return ReplaySnapshot(partition, coverage, len(selected), encode_batches(selected))


def encode_batches(selected: list[Selected]) -> bytes:
    """Record batches holding ``selected`` with their offsets and timestamps."""
    out: list[bytes] = []
    i = 0
    while i < len(selected):
        first = selected[i]
        chunk: list[Record] = []
        while (i < len(selected) and len(chunk) < _RECORDS_PER_BATCH
               and selected[i].offset - first.offset <= _MAX_DELTA):
            sel = selected[i]
            chunk.append(Record(sel.offset - first.offset, sel.timestamp - first.timestamp, sel.key, sel.value, []))
            i += 1
        out.append(build_batch(chunk, first.offset, base_timestamp=first.timestamp))
    return b"".join(out)


def write(log: PartitionLog, snapshot: ReplaySnapshot) -> None:
    log.check_fence()  # one writer per partition directory: its owner
    write_checked(path_of(log), KIND, snapshot.to_bytes())
