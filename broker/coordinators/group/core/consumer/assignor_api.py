"""What a server-side assignor is given and returns (Kafka's ``group-coordinator-api``:
``ConsumerGroupPartitionAssignor``, ``GroupSpec``, ``MemberSubscription``, ``SubscribedTopicDescriber``).

The coordinator resolves each member's subscription (topic names or a regular expression) to the
ids of topics that exist, and hands the assignor every member with what it holds in the current
target assignment, which is what stickiness is measured against.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

TopicId = bytes  # the 16-byte topic uuid, as the protocol codec represents it
Assignment = dict[TopicId, frozenset[int]]  # partitions per topic


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed_topics: frozenset[TopicId]  # the subscription, resolved to existing topics
    rack: str | None
    instance_id: str | None
    current: Mapping[TopicId, frozenset[int]]  # the member's part of the current target assignment


@dataclass(frozen=True, slots=True)
class GroupSpec:
    members: Mapping[str, MemberSpec]  # by member id


class TopicDescriber(Protocol):
    def partition_count(self, topic: TopicId) -> int:
        """Partitions of ``topic``; -1 when the topic is unknown."""
        ...

    def racks_for_partition(self, topic: TopicId, partition: int) -> frozenset[str]:
        """Racks holding a replica of the partition (empty when unknown)."""
        ...


class Assignor(Protocol):
    name: str

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        """The target assignment: every member id of ``group`` maps to its partitions (possibly none)."""
        ...
