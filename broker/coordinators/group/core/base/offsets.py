"""Committed offsets of every group of one shard, and OffsetFetch over them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from protocol.errors import ErrorCode
from protocol.messages.offsets_log import OffsetCommitValue

INVALID_OFFSET = -1
NO_LEADER_EPOCH = -1

# (topic, partition, offset, leader_epoch, metadata, error)
FetchedOffset = tuple[str, int, int, int, str, int]


class CommittedOffset(NamedTuple):
    offset: int
    leader_epoch: int  # -1 = none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None  # only offsets committed with an explicit retention (value v1)


# What the store holds per partition: CommittedOffset's fields in a plain tuple. The cyclic garbage
# collector stops tracking a plain tuple of numbers and strings the first time it looks at it, but
# tracks a NamedTuple for as long as it lives; an offset lives from one commit to the next, long
# enough to reach the collector's oldest generation, where every one of them (thousands a second
# from many members) brought the next full collection of the whole heap closer.
StoredOffset = tuple[int, int, str, int, int | None]


def stored_offset(value: OffsetCommitValue) -> StoredOffset:
    """The stored form of an OffsetCommit record's value."""
    expire = value.expire_timestamp
    return (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
            None if expire == -1 else expire)


class OffsetStore:
    """group -> topic -> partition -> committed offset, changed only by replaying records."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[str, dict[int, StoredOffset]]] = {}

    def put(self, group: str, topic: str, partition: int, offset: StoredOffset) -> None:
        self._by_group.setdefault(group, {}).setdefault(topic, {})[partition] = offset

    def remove(self, group: str, topic: str, partition: int) -> None:
        topics = self._by_group.get(group)
        if topics is None:
            return
        partitions = topics.get(topic)
        if partitions is None:
            return
        partitions.pop(partition, None)
        if not partitions:
            del topics[topic]
        if not topics:
            del self._by_group[group]

    def get(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        stored = self._by_group.get(group, {}).get(topic, {}).get(partition)
        return None if stored is None else CommittedOffset._make(stored)

    def topics_of(self, group: str) -> dict[str, dict[int, StoredOffset]]:
        return self._by_group.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return group in self._by_group

    def all_of(self, group: str) -> Iterator[tuple[str, int, CommittedOffset]]:
        for topic, partitions in self._by_group.get(group, {}).items():
            for partition, offset in partitions.items():
                yield topic, partition, CommittedOffset._make(offset)

    def groups(self) -> list[str]:
        return list(self._by_group)

    def count(self) -> int:
        """Number of committed offsets held, over all groups."""
        return sum(len(parts) for topics in self._by_group.values() for parts in topics.values())

    def snapshot(self) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
        return {
            g: {(t, p): CommittedOffset._make(o) for t, parts in topics.items() for p, o in parts.items()}
            for g, topics in self._by_group.items()
        }


def fetch_offsets(
    store: OffsetStore,
    group_id: str,
    group_known: bool,
    topics: list[tuple[str, list[int]]] | None,
) -> list[FetchedOffset]:
    """OffsetFetch for one group. An unknown group is not an error: every requested partition
    answers offset -1, epoch -1, metadata "", and asking for all topics answers nothing."""
    out: list[FetchedOffset] = []
    if topics is None:
        if group_known:
            for topic, partitions in sorted(store.topics_of(group_id).items()):
                for partition, (offset, epoch, metadata, _, _) in sorted(partitions.items()):
                    out.append((topic, partition, offset, epoch, metadata, ErrorCode.NONE))
        return out
    committed = store.topics_of(group_id) if group_known else {}
    for topic, wanted in topics:
        by_partition = committed.get(topic, {})
        for partition in wanted:
            found = by_partition.get(partition)
            if found is None:
                out.append((topic, partition, INVALID_OFFSET, NO_LEADER_EPOCH, "", ErrorCode.NONE))
            else:
                out.append((topic, partition, found[0], found[1], found[2], ErrorCode.NONE))
    return out
