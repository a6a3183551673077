"""Building assignor inputs and reading outputs in tests: topics by number, members by subscription."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from broker.coordinators.group.core.consumer.assignor_api import Assignment, GroupSpec, MemberSpec, TopicId


def topic(n: int) -> TopicId:
    """Topic ``n`` as a 16-byte id; ids sort in Kafka's ``Uuid`` order as their numbers do."""
    return n.to_bytes(16, "big")


class Topics:
    """A describer of topics by partition count; racks unknown."""

    def __init__(self, counts: Mapping[TopicId, int]) -> None:
        self.counts = dict(counts)

    def partition_count(self, topic: TopicId) -> int:
        return self.counts.get(topic, -1)

    def racks_for_partition(self, topic: TopicId, partition: int) -> frozenset[str]:
        return frozenset()


def topics(counts: Mapping[int, int]) -> Topics:
    """Topics by number: ``{1: 3}`` is topic 1 with 3 partitions."""
    return Topics({topic(n): c for n, c in counts.items()})


def member(
    subscribed: Iterable[int],
    current: Mapping[int, Iterable[int]] | None = None,
    instance_id: str | None = None,
) -> MemberSpec:
    return MemberSpec(
        subscribed_topics=frozenset(topic(n) for n in subscribed),
        rack=None,
        instance_id=instance_id,
        current={topic(n): frozenset(ps) for n, ps in (current or {}).items()},
    )


def group(**members: MemberSpec) -> GroupSpec:
    return GroupSpec(members=members)


def readable(result: Mapping[str, Assignment]) -> dict[str, dict[int, list[int]]]:
    """``{member: {topic number: sorted partitions}}``, for comparing with expectations."""
    return {
        member_id: {int.from_bytes(t, "big"): sorted(ps) for t, ps in assignment.items()}
        for member_id, assignment in result.items()
    }


def current_of(group: GroupSpec) -> dict[str, Assignment]:
    """The group's current target assignment, as an assignor result would show it."""
    return {m: {t: frozenset(ps) for t, ps in spec.current.items()} for m, spec in group.members.items()}
