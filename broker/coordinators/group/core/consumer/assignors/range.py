"""Kafka's ``range`` assignor: each topic's partitions are cut into contiguous ranges, one per
subscriber, the first ``partitions % subscribers`` ranges one longer.

Subscribers are taken in one order for every topic: static members first, by instance id, then
the others by member id. So members with the same subscription get the same partition numbers of
every topic with the same partition count (co-partitioning, which joins rely on).

Not sticky: the assignment is computed afresh from that order each time (Kafka gave up combining
stickiness with co-partitioning). A static member keeps its ranges across restarts because its
instance id, not its new member id, fixes its place. Racks are not considered.
"""

from __future__ import annotations

from broker.coordinators.group.core.consumer.assignor_api import (
    Assignment,
    GroupSpec,
    MemberSpec,
    TopicDescriber,
    TopicId,
)

from .ordering import checked_partition_count, string_order


def _place(member_id: str, spec: MemberSpec) -> tuple[int, bytes, bytes]:
    if spec.instance_id is not None:
        # Two members with one instance id (the coordinator never allows it) fall back to member id.
        return 0, string_order(spec.instance_id), string_order(member_id)
    return 1, string_order(member_id), b""


class RangeAssignor:
    name = "range"

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        members = sorted(group.members, key=lambda m: _place(m, group.members[m]))
        subscribers: dict[TopicId, list[str]] = {}
        for member_id in members:
            for topic in group.members[member_id].subscribed_topics:
                subscribers.setdefault(topic, []).append(member_id)

        result: dict[str, Assignment] = {member_id: {} for member_id in members}
        for topic, topic_members in subscribers.items():
            count = checked_partition_count(topics, topic)
            quota, extra = divmod(count, len(topic_members))
            start = 0
            for i, member_id in enumerate(topic_members):
                end = start + quota + (1 if i < extra else 0)
                if end > start:
                    result[member_id][topic] = frozenset(range(start, end))
                start = end
        return result
