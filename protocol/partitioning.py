"""Which ``__consumer_offsets`` partition owns a group: Kafka's ``partitionFor``, as every client
computes it from ``FindCoordinator``'s key."""

from __future__ import annotations

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
