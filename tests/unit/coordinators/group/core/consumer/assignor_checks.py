"""What every target assignment must satisfy, checked from the outside."""

from __future__ import annotations

from collections.abc import Mapping

from broker.coordinators.group.core.consumer.assignor_api import Assignment, GroupSpec, TopicId
from tests.unit.coordinators.group.core.consumer.assignor_groups import Topics


def assert_valid(group: GroupSpec, topics: Topics, result: Mapping[str, Assignment]) -> None:
    """Every member appears; every partition of a subscribed topic goes to exactly one member that
    subscribes to it; nothing else is assigned."""
    assert set(result) == set(group.members)
    owner: dict[tuple[TopicId, int], str] = {}
    for member_id, assignment in result.items():
        for t, partitions in assignment.items():
            assert t in group.members[member_id].subscribed_topics, (member_id, t)
            assert partitions, f"{member_id} lists topic {t.hex()} with no partitions"
            for p in partitions:
                assert 0 <= p < topics.partition_count(t), (t, p)
                assert (t, p) not in owner, f"{t.hex()}-{p} to both {owner[(t, p)]} and {member_id}"
                owner[(t, p)] = member_id
    subscribed = {t for m in group.members.values() for t in m.subscribed_topics}
    expected = {(t, p) for t in subscribed for p in range(topics.partition_count(t))}
    assert set(owner) == expected


def sizes(result: Mapping[str, Assignment]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def assert_balanced(result: Mapping[str, Assignment]) -> None:
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1, sizes(result)


def assert_no_partition_can_move_to_a_much_lighter_subscriber(
    group: GroupSpec, result: Mapping[str, Assignment]
) -> None:
    """Kafka's balance guarantee for different subscriptions: no member holds a partition that a
    subscriber of its topic with two or more fewer partitions could take."""
    count = sizes(result)
    for holder, assignment in result.items():
        for t in assignment:
            for other, spec in group.members.items():
                if t in spec.subscribed_topics:
                    assert count[holder] - count[other] <= 1, (holder, other, t.hex(), count)


def moved(before: Mapping[str, Assignment], after: Mapping[str, Assignment]) -> int:
    """Partitions taken from a member that still exists and given to another."""
    count = 0
    for member_id, assignment in before.items():
        if member_id not in after:
            continue
        for t, partitions in assignment.items():
            count += len(partitions - after[member_id].get(t, frozenset()))
    return count
