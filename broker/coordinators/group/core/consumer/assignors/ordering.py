"""The orders Kafka's assignors break ties by, and how a group's subscriptions are classified.

Kafka sorts topic ids with ``Uuid.compareTo`` (the two 64-bit halves as *signed* longs) and
member and instance ids with ``String.compareTo`` (UTF-16 code units). Where Kafka iterates a
hash set instead (the members of a group, the topics of a homogeneous subscription), its order is
arbitrary; there we use these same orders, so the result depends on the input's contents only,
never on the order a mapping was filled in.
"""

from __future__ import annotations

from collections.abc import Iterable

from broker.coordinators.group.core.consumer.assignor_api import GroupSpec, TopicDescriber, TopicId

from .errors import PartitionAssignorError


def topic_order(topic: TopicId) -> tuple[int, int, bytes]:
    """Kafka's ``Uuid`` order: the most significant half first, each half compared signed."""
    high = int.from_bytes(topic[:8], "big", signed=True)
    low = int.from_bytes(topic[8:16], "big", signed=True)
    return high, low, topic  # the raw bytes only matter for ids that are not 16 bytes long


def string_order(text: str) -> bytes:
    """Java's ``String.compareTo`` order: big-endian UTF-16 compares byte-wise as code units do."""
    return text.encode("utf-16-be", "surrogatepass")


def sorted_members(group: GroupSpec) -> list[str]:
    return sorted(group.members, key=string_order)


def sorted_topics(topics: Iterable[TopicId]) -> list[TopicId]:
    return sorted(topics, key=topic_order)


def is_homogeneous(group: GroupSpec) -> bool:
    """Every member subscribes to the same topics (Kafka's ``SubscriptionType.HOMOGENEOUS``)."""
    subscriptions = iter(group.members.values())
    first = next(subscriptions, None)
    return first is None or all(m.subscribed_topics == first.subscribed_topics for m in subscriptions)


def checked_partition_count(topics: TopicDescriber, topic: TopicId) -> int:
    count = topics.partition_count(topic)
    if count < 0:
        raise PartitionAssignorError(
            f"members are subscribed to topic {topic.hex()} which does not exist in the topic metadata"
        )
    return count
