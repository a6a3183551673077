"""The uniform assignor when every member subscribes to the same topics.

The cases are those Kafka's ``UniformHomogeneousAssignmentBuilderTest`` checks. Kafka hands out
free partitions topic by topic in its hash set's order; we go by topic id. Where that changes
which partition lands where, the case says so, and the numbers kept and moved are Kafka's.
"""

from __future__ import annotations

import pytest

from broker.coordinators.group.core.consumer.assignors import ASSIGNORS, PartitionAssignorError
from tests.unit.coordinators.group.core.consumer.assignor_checks import assert_balanced, assert_valid, moved
from tests.unit.coordinators.group.core.consumer.assignor_groups import (
    current_of,
    group,
    member,
    readable,
    topics,
)

uniform = ASSIGNORS["uniform"]


def test_a_member_subscribed_to_nothing_gets_an_empty_assignment() -> None:
    result = uniform.assign(group(A=member([])), topics({1: 3}))
    assert readable(result) == {"A": {}}


def test_a_subscription_to_an_unknown_topic_is_an_error() -> None:
    with pytest.raises(PartitionAssignorError):
        uniform.assign(group(A=member([2])), topics({1: 3}))


def test_a_group_with_no_members_gets_no_assignment() -> None:
    assert uniform.assign(group(), topics({1: 3})) == {}


def test_first_assignment_two_members_two_topics() -> None:
    g, t = group(A=member([1, 3]), B=member([1, 3])), topics({1: 3, 3: 2})
    result = uniform.assign(g, t)
    # Kafka's run dealt topic 3 first (A: 1-0, 3-0, 3-1); by topic id, topic 1 comes first.
    assert readable(result) == {"A": {1: [0, 1, 2]}, "B": {3: [0, 1]}}
    assert_valid(g, t, result)
    assert_balanced(result)


def test_more_members_than_partitions_leaves_the_last_member_empty() -> None:
    g, t = group(A=member([3]), B=member([3]), C=member([3])), topics({3: 2})
    result = uniform.assign(g, t)
    assert readable(result) == {"A": {3: [0]}, "B": {3: [1]}, "C": {}}


def test_a_large_group_is_valid_and_balanced() -> None:
    t = topics({n: 3 for n in range(1, 100)})
    g = group(**{f"member{i}": member(range(1, 100)) for i in range(1, 50)})
    result = uniform.assign(g, t)
    assert_valid(g, t, result)
    assert_balanced(result)


def test_an_unbalanced_previous_assignment_is_evened_out_moving_one_partition() -> None:
    g = group(
        A=member([1, 2], {1: [0, 1], 2: [0, 1]}),
        B=member([1, 2], {1: [2], 2: [2]}),
    )
    result = uniform.assign(g, topics({1: 3, 2: 3}))
    assert readable(result) == {"A": {1: [0, 1], 2: [0]}, "B": {1: [2], 2: [1, 2]}}


def test_added_partitions_go_to_the_members_with_room_and_nothing_moves() -> None:
    # Topic 1 grew from 3 to 6 partitions and topic 2 from 3 to 5.
    g = group(
        A=member([1, 2], {1: [0, 2], 2: [0]}),
        B=member([1, 2], {1: [1], 2: [1, 2]}),
    )
    result = uniform.assign(g, topics({1: 6, 2: 5}))
    # Kafka's run dealt topic 2's new partitions first; the counts (6 and 5) and the kept
    # partitions are the same.
    assert readable(result) == {"A": {1: [0, 2, 3, 4, 5], 2: [0]}, "B": {1: [1], 2: [1, 2, 3, 4]}}
    assert moved(current_of(g), result) == 0


def test_a_new_member_takes_one_partition_from_each_member_over_quota() -> None:
    g = group(
        A=member([1, 2], {1: [0, 2], 2: [0]}),
        B=member([1, 2], {1: [1], 2: [1, 2]}),
        C=member([1, 2]),
    )
    result = uniform.assign(g, topics({1: 3, 2: 3}))
    assert readable(result) == {"A": {1: [0, 2]}, "B": {1: [1], 2: [1]}, "C": {2: [0, 2]}}


def test_the_partitions_of_a_departed_member_are_shared_by_the_others() -> None:
    # C held 1-2 and 2-2 and left.
    g = group(
        A=member([1, 2], {1: [0], 2: [0]}),
        B=member([1, 2], {1: [1], 2: [1]}),
    )
    result = uniform.assign(g, topics({1: 3, 2: 3}))
    # Kafka's run gave 2-2 to A and 1-2 to B; by topic id A, first, takes 1-2.
    assert readable(result) == {"A": {1: [0, 2], 2: [0]}, "B": {1: [1], 2: [1, 2]}}


def test_partitions_of_a_topic_no_longer_subscribed_are_dropped() -> None:
    g = group(
        A=member([2], {1: [0], 2: [0]}),
        B=member([2], {1: [1], 2: [1]}),
    )
    result = uniform.assign(g, topics({1: 2, 2: 2}))
    assert readable(result) == {"A": {2: [0]}, "B": {2: [1]}}


def test_the_extra_partition_stays_with_a_member_that_holds_it() -> None:
    # Five partitions over four members: one member keeps two. B, C and D hold 2, 2 and 1, so
    # moving a single partition to the newcomer A is enough.
    g = group(
        A=member([1]),
        B=member([1], {1: [0, 1]}),
        C=member([1], {1: [2, 3]}),
        D=member([1], {1: [4]}),
    )
    result = uniform.assign(g, topics({1: 5}))
    assert readable(result) == {"A": {1: [3]}, "B": {1: [0, 1]}, "C": {1: [2]}, "D": {1: [4]}}
    assert moved(current_of(g), result) == 1


def test_partitions_out_of_range_or_held_twice_are_not_kept() -> None:
    # The coordinator never produces either; an assignor must still not pass them on.
    g = group(
        A=member([1], {1: [0, 7]}),
        B=member([1], {1: [0, 1]}),
    )
    t = topics({1: 2})
    result = uniform.assign(g, t)
    assert_valid(g, t, result)
    assert readable(result) == {"A": {1: [0]}, "B": {1: [1]}}

