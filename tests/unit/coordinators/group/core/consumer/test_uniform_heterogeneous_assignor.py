"""The uniform assignor when members subscribe to different topics.

The cases, and the exact assignments, are those Kafka's ``UniformHeterogeneousAssignmentBuilderTest``
checks: with members taken in member id order the algorithm leaves nothing to chance.
"""

from __future__ import annotations

import pytest

from broker.coordinators.group.core.consumer.assignor_api import GroupSpec
from broker.coordinators.group.core.consumer.assignors import ASSIGNORS, PartitionAssignorError
from broker.coordinators.group.core.consumer.assignors.uniform_heterogeneous import assign_heterogeneous
from tests.unit.coordinators.group.core.consumer.assignor_checks import (
    assert_no_partition_can_move_to_a_much_lighter_subscriber,
    assert_valid,
)
from tests.unit.coordinators.group.core.consumer.assignor_groups import group, member, readable, topics

uniform = ASSIGNORS["uniform"]


def test_members_subscribed_to_nothing_get_empty_assignments() -> None:
    result = assign_heterogeneous(group(A=member([]), B=member([])), topics({1: 3}))
    assert readable(result) == {"A": {}, "B": {}}


def test_subscriptions_to_unknown_topics_are_an_error() -> None:
    with pytest.raises(PartitionAssignorError):
        uniform.assign(group(A=member([3]), B=member([2])), topics({1: 3}))


CASES = {
    "first assignment, two members, two topics": (
        {1: 3, 3: 6},
        group(A=member([1, 3]), B=member([3])),
        {"A": {1: [0, 1, 2], 3: [4]}, "B": {3: [0, 1, 2, 3, 5]}},
    ),
    "more members than a topic's partitions": (
        {3: 1, 1: 2},
        group(A=member([3]), B=member([3]), C=member([1])),
        {"A": {3: [0]}, "B": {}, "C": {1: [0, 1]}},
    ),
    "unbalanced previous assignment, three topics": (
        {1: 6, 2: 4, 3: 4},
        group(
            A=member([1], {1: [0, 1, 2]}),
            B=member([1, 2], {1: [3], 2: [0]}),
            C=member([1, 2, 3], {1: [4, 5], 2: [1, 2, 3], 3: [0, 1, 2, 3]}),
        ),
        {"A": {1: [0, 1, 2, 5]}, "B": {1: [3], 2: [0, 1, 2, 3]}, "C": {1: [4], 3: [0, 1, 2, 3]}},
    ),
    "partitions added to three topics": (
        {1: 6, 2: 5, 3: 3, 4: 3},
        group(
            A=member([1, 3], {1: [0, 1, 2, 3], 3: [0, 1]}),
            B=member([1, 2, 3, 4], {2: [0, 1, 2], 4: [0, 1, 2]}),
        ),
        {"A": {1: [0, 1, 2, 3, 4, 5], 3: [0, 1, 2]}, "B": {2: [0, 1, 2, 3, 4], 4: [0, 1, 2]}},
    ),
    "a member added while partitions were added": (
        {1: 6, 2: 7},
        group(
            A=member([1], {1: [0, 2], 2: [0]}),
            B=member([1, 2], {1: [1], 2: [1, 2]}),
            C=member([1, 2]),
        ),
        {"A": {1: [0, 2, 3, 4, 5]}, "B": {1: [1], 2: [1, 2, 6]}, "C": {2: [0, 3, 4, 5]}},
    ),
    "a member removed, three topics": (
        {1: 3, 2: 8, 3: 3},
        group(
            A=member([1, 3], {1: [0, 1, 2], 3: [0, 1]}),
            B=member([2], {2: [3, 4, 5, 6]}),
        ),
        {"A": {1: [0, 1, 2], 3: [0, 1, 2]}, "B": {2: [0, 1, 2, 3, 4, 5, 6, 7]}},
    ),
    "a subscription removed": (
        {1: 3, 2: 5},
        group(
            A=member([1], {1: [0, 2], 2: [1, 3]}),
            B=member([1, 2], {1: [1], 2: [0, 2, 4]}),
        ),
        {"A": {1: [0, 1, 2]}, "B": {2: [0, 1, 2, 3, 4]}},
    ),
    "one member without a subscription": (
        {1: 3},
        group(A=member([1]), B=member([])),
        {"A": {1: [0, 1, 2]}, "B": {}},
    ),
}


@pytest.mark.parametrize("counts,g,expected", list(CASES.values()), ids=list(CASES))
def test_kafka_cases(counts: dict[int, int], g: GroupSpec, expected: dict[str, dict[int, list[int]]]) -> None:
    t = topics(counts)
    result = uniform.assign(g, t)
    assert readable(result) == expected
    assert_valid(g, t, result)
    assert_no_partition_can_move_to_a_much_lighter_subscriber(g, result)


def test_balancing_stops_when_a_topic_runs_out_of_partitions_to_move() -> None:
    # A holds all six partitions; B holds none. Balancing topic 1 moves both its partitions, then
    # topic 2 one, then the members are even.
    g = group(
        A=member([1, 2, 3], {1: [0, 1], 2: [0, 1], 3: [0, 1]}),
        B=member([1, 2, 3]),
    )
    result = assign_heterogeneous(g, topics({1: 2, 2: 2, 3: 2}))
    assert readable(result) == {"A": {2: [0], 3: [0, 1]}, "B": {1: [0, 1], 2: [1]}}
