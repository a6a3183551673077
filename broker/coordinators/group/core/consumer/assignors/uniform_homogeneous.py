"""The uniform assignor for a group whose members all subscribe to the same topics (Kafka's
``UniformHomogeneousAssignmentBuilder``).

Balance first: with P partitions and M members every member gets P // M partitions and P % M of
them one more, so counts differ by at most one. Then stickiness: a member keeps what it held, up
to its quota, and only what is over quota (or was never held) is handed out again.

Kafka gives the one-more quotas to the first members of a hash set, an arbitrary order. We give
them first to members that already hold more than P // M partitions, so none of those has to give
one up only for another member to receive the extra; that is one of the orders Kafka may take,
and the one that moves the fewest partitions. Remaining ties go by member id.
"""

from __future__ import annotations

from broker.coordinators.group.core.consumer.assignor_api import (
    Assignment,
    GroupSpec,
    TopicDescriber,
    TopicId,
)

from .errors import PartitionAssignorError
from .ordering import checked_partition_count, sorted_members, sorted_topics

Partition = tuple[TopicId, int]


def assign_homogeneous(group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
    member_ids = sorted_members(group)
    subscribed = group.members[member_ids[0]].subscribed_topics
    if not subscribed:
        return {member_id: {} for member_id in member_ids}

    topic_ids = sorted_topics(subscribed)
    partition_counts = {topic: checked_partition_count(topics, topic) for topic in topic_ids}
    total = sum(partition_counts.values())

    held = _retainable(group, member_ids, partition_counts)
    unassigned: list[Partition] = [
        (topic, p) for topic in topic_ids for p in range(partition_counts[topic])
        if p not in held.claimed.get(topic, ())
    ]

    quotas = _quotas([sum(len(ps) for _, ps in kept) for kept in held.by_member], total)

    # Keep each member's partitions up to its quota (lowest topic, lowest partition first); what is
    # over quota joins the partitions nobody held, to be handed to members below their quota.
    result: dict[str, dict[TopicId, set[int]]] = {}
    room: list[tuple[str, int]] = []
    for member_id, kept, quota in zip(member_ids, held.by_member, quotas):
        assignment: dict[TopicId, set[int]] = {}
        for topic, partitions in kept:
            keep, revoke = partitions[:quota], partitions[quota:]
            quota -= len(keep)
            if keep:
                assignment[topic] = set(keep)
            unassigned.extend((topic, p) for p in revoke)
        if quota > 0:
            room.append((member_id, quota))
        result[member_id] = assignment

    next_unassigned = 0
    for member_id, space in room:
        assignment = result[member_id]
        for topic, partition in unassigned[next_unassigned:next_unassigned + space]:
            assignment.setdefault(topic, set()).add(partition)
        next_unassigned += space
    if next_unassigned < len(unassigned):
        raise PartitionAssignorError("partitions were left unassigned")

    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in result.items()}


class _Held:
    """What each member may keep: its current partitions of subscribed topics, in range, and not
    already kept by a member earlier in the order (the coordinator never gives a partition to two
    members; if it ever did, the first keeps it)."""

    __slots__ = ("by_member", "claimed")

    def __init__(self) -> None:
        self.by_member: list[list[tuple[TopicId, list[int]]]] = []
        self.claimed: dict[TopicId, set[int]] = {}


def _retainable(group: GroupSpec, member_ids: list[str], partition_counts: dict[TopicId, int]) -> _Held:
    held = _Held()
    for member_id in member_ids:
        current = group.members[member_id].current
        kept: list[tuple[TopicId, list[int]]] = []
        for topic in sorted_topics(t for t in current if t in partition_counts):
            count = partition_counts[topic]
            claimed = held.claimed.setdefault(topic, set())
            partitions = sorted(p for p in current[topic] if 0 <= p < count and p not in claimed)
            if partitions:
                claimed.update(partitions)
                kept.append((topic, partitions))
        held.by_member.append(kept)
    return held


def _quotas(held_counts: list[int], total: int) -> list[int]:
    minimum, extra = divmod(total, len(held_counts))
    quotas = [minimum] * len(held_counts)
    # Two passes: members that would otherwise lose a partition, then everyone else, by id.
    for over_minimum in (True, False):
        for i, count in enumerate(held_counts):
            if extra == 0:
                return quotas
            if quotas[i] == minimum and (count > minimum) == over_minimum:
                quotas[i] += 1
                extra -= 1
    return quotas
