"""partitionFor(groupId): Java String.hashCode over UTF-16 units, Utils.abs, modulo 50."""

from __future__ import annotations

import pytest

from broker.coordinators.group.core.base.partitioning import java_string_hash, partition_for


@pytest.mark.parametrize(
    ("group_id", "hash_code", "partition"),
    [
        ("abc", 96354, 4),
        ("my-group", -1906497762, 12),
        ("test-group", 627841412, 12),
        ("console-consumer-12345", 158455506, 6),
        ("", 0, 0),
        ("polygenelubricants", -2147483648, 0),
        ("grüppe", -1233264812, 12),
        ("group-\U0001f600", 508083057, 7),
    ],
)
def test_kafka_test_vectors(group_id: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id) == partition


def test_partition_count_is_a_parameter() -> None:
    assert partition_for("abc", 7) == 96354 % 7
    assert all(0 <= partition_for(f"g{i}", 3) < 3 for i in range(100))
