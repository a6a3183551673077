"""An idempotent producer's batches that follow a refused one on the same connection are refused too,
until the refused one comes again.

A producer pipelines up to five requests per connection. When one of them is refused with an error
it retries (this node does not own the partition at that moment, its log failed and is being
reopened, a write found fenced), a request behind it can reach the partition once the node serves
it again: that batch then leaves a gap of the refused sequence numbers and is answered
OUT_OF_ORDER_SEQUENCE_NUMBER. librdkafka takes that answer as skipped sequences, bumps its epoch and
sends again, under new sequence numbers, every record it holds unacknowledged, including ones that
an earlier, failed request had stored: duplicates no broker can recognise. Refusing the followers
with the same retriable error instead keeps the producer's sequences: it sends the refused batch
again, then the rest, in order.

A refused batch stops holding the ones after it once it is in the partition's producer state (it
reached the log before its refusal, or came again through another connection), when it or an
earlier batch comes again, with a new producer epoch, or after ``FORGET_AFTER_S`` (a producer that
gave the records up bumps its epoch itself).
"""

from __future__ import annotations

import struct
import time
from typing import NamedTuple

from broker.topics.producer_state import ProducerStateTable
from protocol.errors import ErrorCode

# Errors a producer retries with the same sequence numbers (librdkafka's and the Java client's).
RETRIED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR,
                     ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS,
                     ErrorCode.REQUEST_TIMED_OUT})
FORGET_AFTER_S = 60.0
_HEADER = struct.Struct(">qhi")  # producer id, producer epoch, base sequence: at byte 43 of a v2 batch
_MAGIC_AT, _PRODUCER_AT, _HEADER_SIZE = 16, 43, 61


class Sequence(NamedTuple):
    producer_id: int
    epoch: int
    first: int


def batch_sequence(raw: bytes | None) -> Sequence | None:
    """The idempotent producer's id, epoch and first sequence of a record batch (None for a batch of
    no producer, an old message format or a truncated one: those are checked elsewhere)."""
    if raw is None or len(raw) < _HEADER_SIZE or raw[_MAGIC_AT] != 2:
        return None
    producer_id, epoch, first = _HEADER.unpack_from(raw, _PRODUCER_AT)
    if producer_id < 0 or first < 0:
        return None
    return Sequence(producer_id, epoch, first)


Key = tuple[int, str, int, int]  # connection, topic, partition, producer id


class RefusedBatches:
    def __init__(self) -> None:
        # key -> (epoch, first sequences of the refused batches, the error, when the first was refused)
        self.marks: dict[Key, tuple[int, list[int], int, float]] = {}

    def held(self, conn: int, topic: str, partition: int, seq: Sequence, producers: ProducerStateTable) -> int:
        """The error refusing this batch because an earlier one of its producer, refused on this
        connection, is neither stored nor sent again yet; 0 when none is. ``producers``: the
        partition's producer state, which shows what has been stored since (a refused write may
        have reached the log, or been sent again through another connection)."""
        if not self.marks:
            return 0
        key = (conn, topic, partition, seq.producer_id)
        mark = self.marks.get(key)
        if mark is None:
            return 0
        epoch, firsts, code, at = mark
        if seq.epoch != epoch or time.monotonic() - at >= FORGET_AFTER_S:
            del self.marks[key]
            return 0
        entry = producers.producers.get(seq.producer_id)
        stored = entry.last_seq if entry is not None and entry.epoch == epoch else -1
        if any(stored < first < seq.first for first in firsts):
            return code
        # In order from here: what this batch resends or follows is settled.
        left = [first for first in firsts if first > seq.first and first > stored]
        if left:
            self.marks[key] = (epoch, left, code, at)
        else:
            del self.marks[key]
        return 0

    def refused(self, conn: int, topic: str, partition: int, seq: Sequence, code: int) -> None:
        """A batch was refused with ``code``: if the producer sends it again, the ones after it wait
        for it."""
        if code not in RETRIED:
            return
        now = time.monotonic()
        if len(self.marks) > 1024:
            self.marks = {k: m for k, m in self.marks.items() if now - m[3] < FORGET_AFTER_S}
        key = (conn, topic, partition, seq.producer_id)
        mark = self.marks.get(key)
        if mark is None or mark[0] != seq.epoch:
            self.marks[key] = (seq.epoch, [seq.first], code, now)
        elif seq.first not in mark[1]:
            mark[1].append(seq.first)
