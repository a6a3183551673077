"""Idempotent producers: per-partition sequence checks and producer id allocation.

Kafka's rules (ProducerStateManager / ProducerAppendInfo), for non-transactional batches:

* a retried batch whose (epoch, first sequence, last sequence) matches one of the producer's
  last five batches on the partition is a duplicate: it is answered with the original offsets
  and not stored again;
* an older epoch is fenced (INVALID_PRODUCER_EPOCH);
* a newer epoch must start at sequence 0;
* within an epoch the first sequence must follow the last one (wrapping after 2^31-1),
  anything else is OUT_OF_ORDER_SEQUENCE_NUMBER;
* a producer the partition has never seen (or has forgotten) may start at any sequence.

The table is rebuilt at startup from the batch headers of the log, so retries that straddle a
restart are still recognised.
"""

from __future__ import annotations

import fcntl
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from protocol.errors import ErrorCode
from storage.layout import write_atomically

MAX_CACHED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1
PRODUCER_ID_BLOCK = 1000


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record: sequences wrap to 0 after 2^31-1."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    last_timestamp: int = -1
    # The epoch of the transaction coordinator that wrote the producer's last marker here (-1: none).
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class Check(NamedTuple):
    """What to do with a batch: ``error_code`` 0 and no ``duplicate`` means append it."""

    error_code: int = 0
    message: str | None = None
    duplicate: BatchMetadata | None = None


APPEND = Check()


class ProducerStateTable:
    """The idempotence state of one partition. Pure: no I/O, no clock."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self.producers)

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> Check:
        if producer_id < 0:
            return APPEND
        if first_seq < 0:
            return Check(ErrorCode.INVALID_RECORD, f"producer {producer_id} sent a batch without a sequence number")
        entry = self.producers.get(producer_id)
        if entry is None:
            return APPEND
        if epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == first_seq and b.last_seq == last_seq:
                    return Check(duplicate=b)
        if epoch < entry.epoch:
            return Check(ErrorCode.INVALID_PRODUCER_EPOCH,
                         f"epoch {epoch} of producer {producer_id} is older than its current epoch {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                return Check(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             f"producer {producer_id} starts epoch {epoch} at sequence {first_seq}, expected 0")
            return APPEND
        if not entry.batches or in_sequence(entry.last_seq, first_seq):
            return APPEND
        return Check(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                     f"producer {producer_id} epoch {epoch}: sequence {first_seq} does not follow "
                     f"{entry.last_seq}")

    def record(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, first_offset: int,
               last_offset: int, timestamp: int) -> None:
        """Note an appended batch (also used to rebuild the table from the log)."""
        if producer_id < 0:
            return
        entry = self.producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch < entry.epoch:
            return
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def check_marker(self, producer_id: int, epoch: int, transaction_version: int, ongoing: bool) -> Check:
        """Whether a COMMIT/ABORT marker at ``epoch`` may be written (Kafka's
        ProducerAppendInfo.appendEndTxnMarker), by the transaction version the coordinator sent
        with it: from version 2 the coordinator bumps the epoch before every marker, so a marker
        must be strictly newer than the producer's epoch here (one at the same epoch would mix two
        transactions), except a marker written again for a transaction already ended here
        (``ongoing`` false: a coordinator's retry or reload) or at the last epoch; before version 2
        markers carry the transaction's own epoch and may not be older. A producer this partition
        does not know is not checked."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return APPEND
        current = entry.epoch
        if transaction_version >= 2:
            if epoch > current or (epoch == current and (not ongoing or epoch == INT16_MAX)):
                return APPEND
            relation = "<="
        else:
            if epoch >= current:
                return APPEND
            relation = "<"
        return Check(ErrorCode.INVALID_PRODUCER_EPOCH,
                     f"marker epoch {epoch} of producer {producer_id} is {relation} its current epoch "
                     f"{current} (transaction version {transaction_version})")

    def note_marker(self, producer_id: int, epoch: int, coordinator_epoch: int = -1, timestamp: int = -1) -> None:
        """A transaction marker at ``epoch``: a newer epoch (the coordinator fenced the producer)
        replaces the producer's, so batches of the older epoch are refused from now on. As in
        Kafka, the marker's coordinator epoch and timestamp become the producer's latest."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch > entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch, last_timestamp=entry.last_timestamp)
        if entry is not None:
            if coordinator_epoch >= 0:
                entry.coordinator_epoch = coordinator_epoch
            if timestamp >= 0:
                entry.last_timestamp = timestamp

    def expire(self, now_ms: int, max_age_ms: int) -> int:
        """Forget producers silent for longer than ``max_age_ms`` (producer.id.expiration.ms)."""
        old = [pid for pid, e in self.producers.items() if now_ms - e.last_timestamp > max_age_ms]
        for pid in old:
            del self.producers[pid]
        return len(old)

    def max_producer_id(self) -> int:
        return max(self.producers, default=-1)


class ProducerIdAllocator:
    """Producer ids unique across restarts: blocks are reserved in a small file before use, so a
    crash skips the rest of a block rather than handing an id out twice. ``shared``: the nodes of a
    cluster reserve their blocks in the same file, each under an exclusive lock and starting from
    what the file says now, so no two nodes hand out the same id."""

    def __init__(self, path: Path, shared: bool = False) -> None:
        self.path = path
        self.shared = shared
        self._next = 0
        self._limit = 0
        if path.exists():
            text = path.read_text().strip()
            self._next = self._limit = int(text) if text.isdigit() else 0

    def at_least(self, producer_id: int) -> None:
        """Never hand out ``producer_id`` or anything below it (ids found in the logs)."""
        if producer_id >= self._next:
            self._next = producer_id + 1
            self._limit = max(self._limit, self._next)

    def next_id(self) -> int:
        if self._next >= self._limit:
            if self.shared:
                self._reserve_shared()
            else:
                self._limit = self._next + PRODUCER_ID_BLOCK
                write_atomically(self.path, f"{self._limit}\n".encode())
        pid = self._next
        self._next += 1
        return pid

    def _reserve_shared(self) -> None:
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
            text = self.path.read_text().strip() if self.path.exists() else ""
            self._next = max(self._next, int(text) if text.isdigit() else 0)
            self._limit = self._next + PRODUCER_ID_BLOCK
            write_atomically(self.path, f"{self._limit}\n".encode())
        finally:
            os.close(fd)
