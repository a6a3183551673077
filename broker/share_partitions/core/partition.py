"""One share partition: a share group's view of one topic partition.

Records from ``start_offset`` on are in flight: each is available, acquired by one member until
its lock expires, acknowledged or archived. Acquiring counts a delivery; a record released (by
the member, by its lock expiring or by its member leaving) is available again unless it has been
delivered ``delivery_limit`` times, in which case it is archived (a poison record is not
delivered forever). The start offset moves past every record that is acknowledged or archived;
``next_offset`` is the first offset never acquired.

What went wrong with deliveries (records archived at the delivery limit, locks that expired) is
gathered in ``trouble`` until the shell takes it (``take_trouble``) after each fetch,
acknowledgement or expiry round, for the rebalance journal: one event per share partition and
round, never one per record.

When the group has a dead-letter queue (KIP-1191, ``Limits.dead_letters``), a record archived
because a member rejected it or because it reached the delivery limit goes in two phases, as in
Kafka 4.4: first ARCHIVING (never delivered again, and holding the start offset), noted as a
``DeadLetter`` until the shell takes it (``take_dead_letters``); the shell writes that state, then
the dead letter to the queue, then calls ``archive`` (ARCHIVING becomes ARCHIVED) and writes that.
A share partition loaded with records still ARCHIVING (a node stopped between the phases) notes
them again (``resume_archiving``): the dead letter is written at least once, never lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from protocol.errors import ErrorCode

AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVING = 3  # KIP-1191: archived, its dead letter not yet written
ARCHIVED = 4

# Acknowledge types of ShareFetch/ShareAcknowledge.
GAP = 0
ACCEPT = 1
RELEASE = 2
REJECT = 3
RENEW = 4


class BatchRange(NamedTuple):
    """A stored batch, as the shell read it: its offsets, whether it is a control batch and, for a
    ``read_committed`` group, whether its transaction was aborted."""

    first: int
    last: int
    control: bool
    aborted: bool = False


class Acquired(NamedTuple):
    first: int
    last: int
    delivery_count: int


# Why a record went to the dead-letter queue: Kafka's messages, byte for byte (its
# __dlq.errors.message header).
CLIENT_REJECT = "Offset rejected by client."
DELIVERY_COUNT_EXCEEDED = "Offset delivery count exceeded the threshold."


class DeadLetter(NamedTuple):
    offset: int
    delivery_count: int
    reason: str  # CLIENT_REJECT or DELIVERY_COUNT_EXCEEDED


@dataclass
class InFlight:
    state: int
    delivery_count: int = 0
    member: str = ""
    deadline_ms: int = 0


@dataclass
class Limits:
    lock_ms: int = 30000
    delivery_limit: int = 5
    max_in_flight: int = 2000
    # The group has a dead-letter queue: archived records are noted as dead letters.
    dead_letters: bool = False
    # RENEW acknowledgements are taken (share.renew.acknowledge.enable): refused otherwise.
    renew: bool = True


# How many offsets of each kind of trouble a round keeps (the counts stay whole).
TROUBLE_OFFSETS = 1000

# How a record came to be released: by its member (ShareFetch/ShareAcknowledge RELEASE), by its
# lock expiring, or because its member's share session ended.
RELEASED, LOCK_EXPIRED, MEMBER_GONE = "released", "lock-expired", "member-gone"


@dataclass
class DeliveryTrouble:
    """What went wrong with this share partition's deliveries since the shell last took it."""

    archived: int = 0  # records archived because they reached the delivery limit
    archived_offsets: list[int] = field(default_factory=list)
    archived_via: dict[str, int] = field(default_factory=dict)  # how they were last released
    expired: int = 0  # acquisition locks that expired
    expired_offsets: list[int] = field(default_factory=list)
    members: dict[str, int] = field(default_factory=dict)  # who held those records: how many
    max_delivery_count: int = 0

    def __bool__(self) -> bool:
        return bool(self.archived or self.expired)


@dataclass
class SharePartition:
    start_offset: int = -1  # -1 until the first fetch (or the durable state) sets it
    next_offset: int = -1
    records: dict[int, InFlight] = field(default_factory=dict)
    # Since this process loaded the share partition (soft state, for the metrics): records
    # delivered again, locks that expired, records archived at the delivery limit.
    redelivered: int = 0
    lock_expiries: int = 0
    archived_at_limit: int = 0
    # Offsets whose durable state (delivery state as written, delivery count) changed since the
    # shell last wrote this share partition: what a ShareUpdate record carries.
    changed: set[int] = field(default_factory=set)
    trouble: DeliveryTrouble = field(default_factory=DeliveryTrouble)
    dead_letters: list[DeadLetter] = field(default_factory=list)

    def take_dead_letters(self) -> list[DeadLetter]:
        """The records archived for the dead-letter queue since the last call, in order."""
        taken, self.dead_letters = self.dead_letters, []
        return taken

    def archive(self, offsets: list[int]) -> bool:
        """Their dead letters are written (or given up): ARCHIVING records become ARCHIVED.
        Whether anything changed."""
        changed = False
        for offset in offsets:
            rec = self.records.get(offset)
            if rec is not None and rec.state == ARCHIVING:
                rec.state = ARCHIVED
                self.changed.add(offset)
                changed = True
        if changed:
            self.advance()
        return changed

    def resume_archiving(self, delivery_limit: int) -> None:
        """Loaded from the durable state: records still ARCHIVING (their dead letter may not have
        been written) are noted again, the reason told by the delivery count as Kafka tells it."""
        pending = {d.offset for d in self.dead_letters}
        for offset in sorted(self.records):
            rec = self.records[offset]
            if rec.state == ARCHIVING and offset not in pending:
                reason = DELIVERY_COUNT_EXCEEDED if rec.delivery_count >= delivery_limit else CLIENT_REJECT
                self.dead_letters.append(DeadLetter(offset, rec.delivery_count, reason))

    def take_trouble(self) -> DeliveryTrouble | None:
        """What went wrong since the last call (None: nothing)."""
        if not self.trouble:
            return None
        taken, self.trouble = self.trouble, DeliveryTrouble()
        return taken

    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    def initialize(self, offset: int) -> None:
        self.start_offset = self.next_offset = offset

    def read_from(self) -> int:
        """Where the shell should read: the first available in-flight record, else new data."""
        available = [offset for offset, rec in self.records.items() if rec.state == AVAILABLE]
        return min(available) if available else self.next_offset

    def in_flight(self) -> int:
        return sum(1 for r in self.records.values() if r.state in (AVAILABLE, ACQUIRED))

    def acquire(self, member: str, batches: list[BatchRange], visible_end: int, max_records: int, now_ms: int,
                limits: Limits, whole_batches: bool = False) -> list[Acquired]:
        """Acquires for ``member`` up to ``max_records`` of the records in ``batches`` below
        ``visible_end``: released ones first come first, then new ones (while fewer than
        ``limits.max_in_flight`` records are in flight). ``whole_batches`` (ShareFetch's
        batch-optimized acquire mode, Kafka's default) stops only at a batch boundary: a batch
        begun is acquired whole, even past ``max_records``."""
        got: list[int] = []
        deadline = now_ms + limits.lock_ms
        in_flight = self.in_flight()  # counted once: new records add to it below
        for batch in batches:
            if whole_batches and len(got) >= max_records:
                break
            for offset in range(max(batch.first, self.start_offset), min(batch.last + 1, visible_end)):
                if not whole_batches and len(got) >= max_records:
                    break
                rec = self.records.get(offset)
                if batch.control or (batch.aborted and rec is None):
                    if offset >= self.next_offset:
                        # A transaction marker is no record to deliver, nor (read_committed) a
                        # record of an aborted transaction: Kafka archives both.
                        self.records[offset] = InFlight(ARCHIVED)
                        self.changed.add(offset)
                        self.next_offset = offset + 1
                    continue
                if rec is not None:
                    if rec.state != AVAILABLE:
                        continue
                elif offset >= self.next_offset:
                    if in_flight >= limits.max_in_flight:
                        break
                    in_flight += 1
                    rec = self.records[offset] = InFlight(AVAILABLE)
                    self.next_offset = offset + 1
                else:
                    continue  # below next_offset and not in flight: already done
                rec.state, rec.member, rec.deadline_ms = ACQUIRED, member, deadline
                rec.delivery_count += 1
                if rec.delivery_count > 1:
                    self.redelivered += 1
                got.append(offset)
                self.changed.add(offset)
        self.advance()
        return self._ranges(got)

    def _ranges(self, offsets: list[int]) -> list[Acquired]:
        out: list[Acquired] = []
        for offset in offsets:
            count = self.records[offset].delivery_count
            if out and out[-1].last == offset - 1 and out[-1].delivery_count == count:
                out[-1] = Acquired(out[-1].first, offset, count)
            else:
                out.append(Acquired(offset, offset, count))
        return out

    def _release(self, offset: int, rec: InFlight, limits: Limits, via: str) -> None:
        holder = rec.member
        rec.member, rec.deadline_ms = "", 0
        rec.state = ARCHIVED if rec.delivery_count >= limits.delivery_limit else AVAILABLE
        if rec.state == ARCHIVED:
            self.archived_at_limit += 1
            if limits.dead_letters:
                rec.state = ARCHIVING
                self.dead_letters.append(DeadLetter(offset, rec.delivery_count, DELIVERY_COUNT_EXCEEDED))
            t = self.trouble
            t.archived += 1
            if len(t.archived_offsets) < TROUBLE_OFFSETS:
                t.archived_offsets.append(offset)
            t.archived_via[via] = t.archived_via.get(via, 0) + 1
            t.members[holder] = t.members.get(holder, 0) + 1
            t.max_delivery_count = max(t.max_delivery_count, rec.delivery_count)

    def acknowledge(self, member: str, first: int, last: int, types: list[int], limits: Limits,
                    now_ms: int = 0) -> int:
        """Applies one acknowledgement batch: one type for the whole range, or one per offset.
        INVALID_RECORD_STATE when a record is not acquired by ``member`` (nothing changes then)."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        todo = []
        for i, offset in enumerate(range(first, last + 1)):
            if offset < self.start_offset:
                continue  # already done (acknowledged or archived): Kafka answers it without error
            kind = types[0] if len(types) == 1 else types[i]
            if kind == GAP:
                rec = self.records.get(offset)
                if rec is not None and rec.state == ACQUIRED and rec.member == member:
                    todo.append((offset, rec, GAP))
                continue
            rec = self.records.get(offset)
            if rec is None or rec.state != ACQUIRED or rec.member != member:
                return ErrorCode.INVALID_RECORD_STATE
            if kind == RENEW and not limits.renew:
                return ErrorCode.INVALID_RECORD_STATE  # "Renewing acquisition locks is not enabled for the group."
            todo.append((offset, rec, kind))
        for offset, rec, kind in todo:
            self.changed.add(offset)
            if kind in (ACCEPT, GAP):
                rec.state, rec.member, rec.deadline_ms = (ACKNOWLEDGED if kind == ACCEPT else ARCHIVED), "", 0
            elif kind == REJECT:
                rec.state, rec.member, rec.deadline_ms = ARCHIVED, "", 0
                if limits.dead_letters:
                    rec.state = ARCHIVING
                    self.dead_letters.append(DeadLetter(offset, rec.delivery_count, CLIENT_REJECT))
            elif kind == RELEASE:
                self._release(offset, rec, limits, RELEASED)
            elif kind == RENEW:
                rec.deadline_ms = now_ms + limits.lock_ms
            else:
                return ErrorCode.INVALID_REQUEST
        self.advance()
        return ErrorCode.NONE

    def release_member(self, member: str, limits: Limits) -> bool:
        """Every record ``member`` holds goes back (its session closed or it left the group)."""
        changed = False
        for offset, rec in self.records.items():
            if rec.state == ACQUIRED and rec.member == member:
                self._release(offset, rec, limits, MEMBER_GONE)
                self.changed.add(offset)
                changed = True
        self.advance()
        return changed

    def expire(self, now_ms: int, limits: Limits) -> int:
        """Locks past their deadline are released; returns how many."""
        n = 0
        t = self.trouble
        for offset, rec in self.records.items():
            if rec.state == ACQUIRED and rec.deadline_ms <= now_ms:
                t.expired += 1
                if len(t.expired_offsets) < TROUBLE_OFFSETS:
                    t.expired_offsets.append(offset)
                t.members[rec.member] = t.members.get(rec.member, 0) + 1
                t.max_delivery_count = max(t.max_delivery_count, rec.delivery_count)
                self._release(offset, rec, limits, LOCK_EXPIRED)
                self.changed.add(offset)
                n += 1
        self.lock_expiries += n
        if n:
            self.advance()
        return n

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def advance(self) -> None:
        while True:
            rec = self.records.get(self.start_offset)
            if rec is None or rec.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            del self.records[self.start_offset]
            self.start_offset += 1
        if self.next_offset < self.start_offset:
            self.next_offset = self.start_offset

    def move_start(self, offset: int) -> None:
        """The partition's log starts later (retention, deletion): what is gone is gone."""
        if offset > self.start_offset:
            for o in [o for o in self.records if o < offset]:
                del self.records[o]
            self.start_offset = offset
            self.next_offset = max(self.next_offset, offset)

    def in_flight_counts(self) -> tuple[int, int]:
        """(acquired, available) records."""
        acquired = sum(1 for r in self.records.values() if r.state == ACQUIRED)
        return acquired, sum(1 for r in self.records.values() if r.state == AVAILABLE)
