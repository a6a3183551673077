"""The uniform assignor for a group whose members subscribe to different topics (Kafka's
``UniformHeterogeneousAssignmentBuilder``).

1. Every member keeps its current partitions of topics it still subscribes to.
2. The partitions nobody holds are dealt out topic by topic, each to the topic's subscriber with
   the fewest partitions overall. Topics go in order of partitions per subscriber (most first),
   then subscriber count (fewest first), then topic id, so the hardest topics are placed while
   there is still room to balance them.
3. Topic by topic, partitions move from a topic's most loaded subscribers to its least loaded
   ones until their totals differ by at most one, or the most loaded hold nothing of that topic.
   Passes repeat until a whole pass moves nothing, at most 16 of them.

When all subscribers of each topic share the same subscription, the result is balanced to within
one partition; with overlapping subscriptions it is nearly balanced (Kafka's example: 9, 10 and 11
partitions where 10, 10, 10 exists), and no partition can move to one of its topic's subscribers
holding two or more fewer, unless the pass limit was reached.

Members are numbered in member id order and ties between equally loaded members go to the lower
number, as in Kafka's own tests, which feed the members sorted.
"""

from __future__ import annotations

from broker.coordinators.group.core.consumer.assignor_api import (
    Assignment,
    GroupSpec,
    TopicDescriber,
    TopicId,
)

from .ordering import checked_partition_count, sorted_members, topic_order

# Each pass roughly halves the imbalance of overlapping subscriptions; this bounds the work.
MAX_BALANCING_PASSES = 16

UNOWNED = -1


class _Builder:
    def __init__(self, group: GroupSpec, topics: TopicDescriber) -> None:
        self.member_ids = sorted_members(group)
        self.group = group
        # Subscribers of each topic, by member number, ascending.
        self.subscribers: dict[TopicId, list[int]] = {}
        self.partition_counts: dict[TopicId, int] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic in group.members[member_id].subscribed_topics:
                if topic not in self.partition_counts:
                    self.partition_counts[topic] = checked_partition_count(topics, topic)
                self.subscribers.setdefault(topic, []).append(index)
        self.sizes = [0] * len(self.member_ids)
        self.owners = {topic: [UNOWNED] * count for topic, count in self.partition_counts.items()}
        self.assignments: list[dict[TopicId, set[int]]] = [{} for _ in self.member_ids]

    def topic_sort_key(self, topic: TopicId) -> tuple[float, int, tuple[int, int, bytes]]:
        subscribers = len(self.subscribers[topic])
        # A float quotient, as Kafka compares the doubles.
        return -(self.partition_counts[topic] / subscribers), subscribers, topic_order(topic)

    def build(self) -> dict[str, Assignment]:
        if self.subscribers:
            self.keep_subscribed_partitions()
            self.assign_unowned_partitions()
            self.balance()
        return {
            member_id: {topic: frozenset(ps) for topic, ps in assignment.items()}
            for member_id, assignment in zip(self.member_ids, self.assignments)
        }

    def keep_subscribed_partitions(self) -> None:
        for index, member_id in enumerate(self.member_ids):
            spec = self.group.members[member_id]
            for topic, partitions in spec.current.items():
                if topic not in spec.subscribed_topics:
                    continue
                owners = self.owners[topic]
                for partition in partitions:
                    # Out of range or already kept by an earlier member: the coordinator never
                    # produces either, and neither may survive into a target assignment.
                    if 0 <= partition < len(owners) and owners[partition] == UNOWNED:
                        self.add(topic, partition, index)

    def assign_unowned_partitions(self) -> None:
        unowned = {
            topic: [p for p, owner in enumerate(owners) if owner == UNOWNED]
            for topic, owners in self.owners.items()
        }
        balancer = _Balancer(self.sizes)
        for topic in sorted((t for t, ps in unowned.items() if ps), key=self.topic_sort_key):
            balancer.start(self.subscribers[topic])
            for partition in unowned[topic]:
                self.move(topic, partition, balancer.next_least_loaded())

    def balance(self) -> None:
        movable = sorted((t for t, s in self.subscribers.items() if len(s) >= 2), key=self.topic_sort_key)
        if not movable:
            return
        balancer = _Balancer(self.sizes)
        last_moved = -1  # the topic that last moved partitions; reaching it again means a quiet pass
        for _ in range(MAX_BALANCING_PASSES):
            for i, topic in enumerate(movable):
                if i == last_moved:
                    return
                if self.balance_topic(topic, balancer) > 0 or last_moved == -1:
                    last_moved = i

    def balance_topic(self, topic: TopicId, balancer: _Balancer) -> int:
        if balancer.start(self.subscribers[topic]) <= 1:
            return 0
        owners = self.owners[topic]
        # The topic's partitions grouped by owner; each owner gives up the last of its own run.
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        run_start: dict[int, int] = {}
        run_end: dict[int, int] = {}
        for i, partition in enumerate(partitions):
            run_start.setdefault(owners[partition], i)
            run_end[owners[partition]] = i + 1

        moved = 0
        while not balancer.is_balanced():
            giver = balancer.next_most_loaded()
            while giver != UNOWNED and run_end.get(giver, 0) - run_start.get(giver, 0) <= 0:
                balancer.exclude_most_loaded()
                giver = balancer.next_most_loaded()
            if giver == UNOWNED:
                break  # nobody in the most loaded range holds a partition of this topic
            run_end[giver] -= 1
            partition = partitions[run_end[giver]]
            receiver = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self.move(topic, partition, receiver)
            moved += 1
        return moved

    def move(self, topic: TopicId, partition: int, index: int) -> None:
        previous = self.owners[topic][partition]
        if previous != UNOWNED:
            partitions = self.assignments[previous][topic]
            partitions.discard(partition)
            if not partitions:
                del self.assignments[previous][topic]
            self.sizes[previous] -= 1
        self.add(topic, partition, index)

    def add(self, topic: TopicId, partition: int, index: int) -> None:
        self.assignments[index].setdefault(topic, set()).add(partition)
        self.owners[topic][partition] = index
        self.sizes[index] += 1


class _Balancer:
    """Picks, one partition at a time, the least loaded member to receive and the most loaded to
    give, among one topic's subscribers, without re-sorting after every move.

    The subscribers are sorted by partition count (then member number). Two ranges grow from the
    ends: the least loaded range [0, low_end) whose members are all at level ``low_level`` and
    receive in turn, and the most loaded range [high_start, high_end) at ``high_level`` that give in
    turn. When every member of a range has had its turn, the range's level moves one step and the
    range widens over the members already at that level. Balanced once the levels are within one.
    Members with nothing of the topic to give are swapped out of the most loaded range.
    """

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes  # shared with the builder, which applies each move
        self.members: list[int] = []
        self.low_end = 0
        self.low_level = 0
        self.next_low = 0
        self.high_start = 0
        self.high_end = 0
        self.high_level = 0
        self.next_high = 0

    def start(self, members: list[int]) -> int:
        """Starts on a topic's subscribers; returns the spread of their partition counts."""
        sizes = self.sizes
        self.members = sorted(members, key=lambda m: (sizes[m], m))
        lowest, highest = sizes[self.members[0]], sizes[self.members[-1]]
        self.low_end = 0
        self.low_level = lowest - 1
        self.next_low = 0
        self.high_start = self.high_end = len(self.members)
        self.high_level = highest + 1
        self.next_high = len(self.members) - 1
        return highest - lowest

    def next_least_loaded(self) -> int:
        """The member to receive the next partition (counted as if it has received it)."""
        if self.next_low >= self.low_end:
            self.low_level += 1
            while self.low_end < len(self.members) and self.sizes[self.members[self.low_end]] == self.low_level:
                self.low_end += 1
            self.next_low = 0
        member = self.members[self.next_low]
        self.next_low += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to give up the next partition, or ``UNOWNED`` when none is left to ask."""
        if self.next_high < self.high_start:
            if self.high_end <= self.high_start and self.high_start > 0:
                # Exclusions emptied the range: restart it at the level of the next member down,
                # so that it surely widens.
                self.high_level = self.sizes[self.members[self.high_start - 1]]
            else:
                self.high_level -= 1
            while self.high_start > 0 and self.sizes[self.members[self.high_start - 1]] == self.high_level:
                self.high_start -= 1
            self.next_high = self.high_end - 1
        if self.next_high < 0:
            return UNOWNED
        member = self.members[self.next_high]
        self.next_high -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drops the member ``next_most_loaded`` last returned from the most loaded range."""
        i = self.next_high + 1
        last = self.high_end - 1
        self.members[i], self.members[last] = self.members[last], self.members[i]
        self.high_end -= 1

    def is_balanced(self) -> bool:
        return self.high_level - self.low_level <= 1


def assign_heterogeneous(group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
    return _Builder(group, topics).build()
