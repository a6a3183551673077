"""The pending transactional offsets of one shard, and what a transactional write asks the shell to
write (a transactional batch of offset commits, or a marker).

``PendingTxnOffsets`` is the whole of the pending state: producer id -> (group, topic, partition)
-> the OffsetCommit record written. It changes only by replay (of transactional batches, plain
commits and markers), so a restart rebuilds it from the log, and a snapshot of a shard must carry it.

When transactional and plain commits of one partition interleave, the most recent *record* wins,
not the last marker: a COMMIT marker applies a pending offset only when no offset written after it
has been applied since (Kafka compares record offsets). Otherwise a plain commit made while a
transaction was open would be overwritten by the older transactional one at the marker, and after
compaction (which keeps only the newest record of the key) a restart would show the plain one: a
read would have shown a value that the log does not hold. Replay happens in log order, so an order
number given at replay stands in for the record offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from protocol.payloads.offsets_log_records import OffsetCommitRecord

PendingKey = tuple[str, str, int]  # (group, topic, partition)


@dataclass(frozen=True)
class TxnOffsetBatch:
    """Offset commit records to write as one transactional batch of ``producer_id``/``producer_epoch``."""

    producer_id: int
    producer_epoch: int
    records: tuple[OffsetCommitRecord, ...]


@dataclass(frozen=True)
class TxnMarkerWrite:
    """A COMMIT/ABORT control batch for ``producer_id``; ``groups`` are the groups it settles."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    groups: tuple[str, ...] = field(default=())


class PendingTxnOffsets:
    def __init__(self) -> None:
        self.by_producer: dict[int, dict[PendingKey, OffsetCommitRecord]] = {}
        # group -> producer ids with pending offsets of the group (KIP-447 lookups are per group).
        self.open_by_group: dict[str, set[int]] = {}
        # The replay order of each pending record and, per group with pending records, the order
        # of the record whose offset was applied last to each partition (absent: applied before
        # the group's oldest pending record, so older than all of them).
        self._order = 0
        self._added_at: dict[tuple[int, PendingKey], int] = {}
        self._applied_at: dict[str, dict[tuple[str, int], int]] = {}

    def add(self, producer_id: int, record: OffsetCommitRecord) -> None:
        key = (record.group, record.topic, record.partition)
        self.by_producer.setdefault(producer_id, {})[key] = record
        self.open_by_group.setdefault(record.group, set()).add(producer_id)
        self._order += 1
        self._added_at[(producer_id, key)] = self._order

    def note_applied(self, group: str, topic: str, partition: int) -> None:
        """A plain (non-transactional) commit of the partition was applied: it is newer than every
        pending record of the partition, none of which may replace it at its marker. (Without
        pending records in its group a commit needs no order: every later record is newer.)"""
        if group in self.open_by_group:
            self._order += 1
            self._applied_at.setdefault(group, {})[(topic, partition)] = self._order

    def complete(self, producer_id: int, commit: bool = True) -> list[OffsetCommitRecord]:
        """Removes the producer's pending offsets (none when it has none) and returns, for a
        COMMIT, those to apply: each one newer than the offset applied last to its partition."""
        pending = self.by_producer.pop(producer_id, None)
        if not pending:
            return []
        applied = []
        for key, record in pending.items():
            order = self._added_at.pop((producer_id, key))
            group, topic, partition = key
            if commit:
                latest = self._applied_at.setdefault(group, {})
                if order > latest.get((topic, partition), 0):
                    applied.append(record)
                    latest[(topic, partition)] = order
        for group in {key[0] for key in pending}:
            producers = self.open_by_group.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    self._close_group(group)
        return applied

    def remove_partition(self, group: str, topic: str, partition: int) -> None:
        """A tombstone of the offset drops the pending offsets of that partition too (as Kafka's replay does)."""
        producers = self.open_by_group.get(group)
        if not producers:
            return
        self._applied_at.get(group, {}).pop((topic, partition), None)
        for producer_id in list(producers):
            pending = self.by_producer.get(producer_id, {})
            if pending.pop((group, topic, partition), None) is not None:
                del self._added_at[(producer_id, (group, topic, partition))]
            if not any(key[0] == group for key in pending):
                producers.discard(producer_id)
            if not pending:
                self.by_producer.pop(producer_id, None)
        if not producers:
            self._close_group(group)

    def _close_group(self, group: str) -> None:
        """The group has no pending records left: any later one is newer than every applied offset."""
        del self.open_by_group[group]
        self._applied_at.pop(group, None)

    def is_pending(self, group: str, topic: str, partition: int) -> bool:
        for producer_id in self.open_by_group.get(group, ()):
            if (group, topic, partition) in self.by_producer.get(producer_id, {}):
                return True
        return False

    def has_group(self, group: str) -> bool:
        return group in self.open_by_group

    def groups_of(self, producer_id: int) -> tuple[str, ...]:
        return tuple(sorted({key[0] for key in self.by_producer.get(producer_id, {})}))

    def partitions_of(self, group: str) -> Iterator[tuple[str, int]]:
        for producer_id in self.open_by_group.get(group, ()):
            for g, topic, partition in self.by_producer.get(producer_id, {}):
                if g == group:
                    yield topic, partition

    def snapshot(self) -> dict[int, dict[PendingKey, tuple[int, str]]]:
        return {pid: {k: (r.value.offset, r.value.metadata) for k, r in recs.items() if r.value is not None}
                for pid, recs in self.by_producer.items() if recs}
