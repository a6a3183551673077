"""The pending transactional offsets of one shard, and what a transactional write asks the shell to
write (a transactional batch of offset commits, or a marker).

``PendingTxnOffsets`` is the whole of the pending state: producer id -> (group, topic, partition)
-> the OffsetCommit record written. It changes only by replay (of transactional batches and of
markers), so a restart rebuilds it from the log, and a snapshot of a shard must carry it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from protocol.offsets_log_records import OffsetCommitRecord

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

    def add(self, producer_id: int, record: OffsetCommitRecord) -> None:
        self.by_producer.setdefault(producer_id, {})[(record.group, record.topic, record.partition)] = record
        self.open_by_group.setdefault(record.group, set()).add(producer_id)

    def complete(self, producer_id: int) -> list[OffsetCommitRecord]:
        """Removes and returns the producer's pending offsets (empty when it has none)."""
        pending = self.by_producer.pop(producer_id, None)
        if not pending:
            return []
        for group in {key[0] for key in pending}:
            producers = self.open_by_group.get(group)
            if producers is not None:
                producers.discard(producer_id)
                if not producers:
                    del self.open_by_group[group]
        return list(pending.values())

    def remove_partition(self, group: str, topic: str, partition: int) -> None:
        """A tombstone of the offset drops the pending offsets of that partition too (as Kafka's replay does)."""
        producers = self.open_by_group.get(group)
        if not producers:
            return
        for producer_id in list(producers):
            pending = self.by_producer.get(producer_id, {})
            pending.pop((group, topic, partition), None)
            if not any(key[0] == group for key in pending):
                producers.discard(producer_id)
            if not pending:
                self.by_producer.pop(producer_id, None)
        if not producers:
            del self.open_by_group[group]

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
