"""Which ``__consumer_offsets`` partition owns a group: Kafka's ``partitionFor``; and which
partition of the rebalance journal holds its events."""

from __future__ import annotations

import functools

_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, 32-bit signed wrap-around."""
    h = 0
    data = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int = 50) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 where Math.abs would stay negative.
    positive = 0 if h == _INT_MIN else abs(h)
    return positive % num_partitions


@functools.lru_cache(maxsize=8192)
def journal_partition(group_id: str, partitions: int) -> int:
    """The partition of the rebalance journal (``__kcoord_group_events``) that holds ``group_id``'s
    events, in a journal of ``partitions`` partitions: 0 in the one-partition layout of a single
    broker; in a cluster's, which has as many partitions as ``__consumer_offsets``, the index of the
    group's ``__consumer_offsets`` partition, so that the node coordinating the group writes it."""
    return 0 if partitions <= 1 else partition_for(group_id, partitions)
