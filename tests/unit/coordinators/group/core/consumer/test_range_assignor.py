"""The range assignor: contiguous ranges per topic, the same numbers for the same member across
topics of equal size. Cases from Kafka's ``RangeAssignorTest``; the expectations are Kafka's."""

from __future__ import annotations

import pytest

from broker.coordinators.group.core.consumer.assignor_api import GroupSpec
from broker.coordinators.group.core.consumer.assignors import ASSIGNORS, PartitionAssignorError
from tests.unit.coordinators.group.core.consumer.assignor_checks import assert_valid
from tests.unit.coordinators.group.core.consumer.assignor_groups import group, member, readable, topics

range_assignor = ASSIGNORS["range"]


def test_a_member_subscribed_to_nothing_gets_an_empty_assignment() -> None:
    assert readable(range_assignor.assign(group(A=member([])), topics({1: 3}))) == {"A": {}}


def test_a_subscription_to_an_unknown_topic_is_an_error() -> None:
    with pytest.raises(PartitionAssignorError):
        range_assignor.assign(group(A=member([2])), topics({1: 3}))


CASES = {
    "two members, two topics, same subscriptions": (
        {1: 3, 3: 2},
        group(A=member([1, 3]), B=member([1, 3])),
        {"A": {1: [0, 1], 3: [0]}, "B": {1: [2], 3: [1]}},
    ),
    "three members, different subscriptions": (
        {1: 3, 2: 3, 3: 2},
        group(A=member([1, 2]), B=member([3]), C=member([2, 3])),
        {"A": {1: [0, 1, 2], 2: [0, 1]}, "B": {3: [0]}, "C": {2: [2], 3: [1]}},
    ),
    "more members than partitions": (
        {1: 3, 3: 2},
        group(A=member([1, 3]), B=member([1, 3]), C=member([1, 3])),
        {"A": {1: [0], 3: [0]}, "B": {1: [1], 3: [1]}, "C": {1: [2]}},
    ),
    "a member added to a group with as many members as partitions": (
        {1: 2, 2: 2},
        group(
            A=member([1, 2], {1: [0], 2: [0]}),
            B=member([1, 2], {1: [1], 2: [1]}),
            C=member([1, 2]),
        ),
        {"A": {1: [0], 2: [0]}, "B": {1: [1], 2: [1]}, "C": {}},
    ),
    "a partition added to each topic": (
        {1: 4, 2: 4},
        group(
            A=member([1, 2], {1: [0, 1], 2: [0, 1]}),
            B=member([1, 2], {1: [2], 2: [2]}),
        ),
        {"A": {1: [0, 1], 2: [0, 1]}, "B": {1: [2, 3], 2: [2, 3]}},
    ),
    "a member added": (
        {1: 3, 2: 3},
        group(
            A=member([1, 2], {1: [0, 1], 2: [0, 1]}),
            B=member([1, 2], {1: [2], 2: [2]}),
            C=member([1, 2]),
        ),
        {"A": {1: [0], 2: [0]}, "B": {1: [1], 2: [1]}, "C": {1: [2], 2: [2]}},
    ),
    "a member and a partition added": (
        {1: 4, 2: 3},
        group(
            A=member([1, 2], {1: [0, 1], 2: [0, 1]}),
            B=member([1, 2], {1: [2], 2: [2]}),
            C=member([1]),
        ),
        {"A": {1: [0, 1], 2: [0, 1]}, "B": {1: [2], 2: [2]}, "C": {1: [3]}},
    ),
    "a member removed": (
        {1: 3, 2: 3},
        group(B=member([1, 2], {1: [2], 2: [2]})),
        {"B": {1: [0, 1, 2], 2: [0, 1, 2]}},
    ),
    "several subscriptions changed": (
        {1: 3, 2: 3, 3: 2},
        group(
            A=member([1], {1: [0, 1, 2], 2: [0]}),
            B=member([1, 2, 3], {2: [1]}),
            C=member([2], {2: [2], 3: [0, 1]}),
        ),
        {"A": {1: [0, 1]}, "B": {1: [2], 2: [0, 1], 3: [0, 1]}, "C": {2: [2]}},
    ),
}


@pytest.mark.parametrize("counts,g,expected", list(CASES.values()), ids=list(CASES))
def test_kafka_cases(counts: dict[int, int], g: GroupSpec, expected: dict[str, dict[int, list[int]]]) -> None:
    t = topics(counts)
    result = range_assignor.assign(g, t)
    assert readable(result) == expected
    assert_valid(g, t, result)


def test_a_static_member_rejoining_under_a_new_member_id_gets_its_ranges_back() -> None:
    t = topics({1: 3})
    before = range_assignor.assign(
        group(A=member([1], instance_id="instanceA"), B=member([1], instance_id="instanceB")), t
    )
    after = range_assignor.assign(
        group(A1=member([1], instance_id="instanceA"), B=member([1], instance_id="instanceB")), t
    )
    assert after["A1"] == before["A"]
    assert after["B"] == before["B"]


def test_static_members_come_before_dynamic_ones() -> None:
    t = topics({1: 5})
    before = range_assignor.assign(
        group(A=member([1], instance_id="instanceA"), C=member([1], instance_id="instanceC"), B=member([1])), t
    )
    # A dynamic member id that sorts first must not take the static members' place.
    after = range_assignor.assign(
        group(A1=member([1], instance_id="instanceA"), C=member([1], instance_id="instanceC"), B=member([1])), t
    )
    assert readable(before) == {"A": {1: [0, 1]}, "C": {1: [2, 3]}, "B": {1: [4]}}
    assert after["A1"] == before["A"]
    assert after["B"] == before["B"]
    assert after["C"] == before["C"]


def test_member_ids_sort_as_java_strings() -> None:
    # U+FF21 is one UTF-16 unit, U+1F600 two (a surrogate pair starting 0xD83D): Java sorts the
    # emoji first, code point order would not.
    t = topics({1: 2})
    result = range_assignor.assign(group(**{"\uff21": member([1]), "\U0001f600": member([1])}), t)
    assert readable(result) == {"\U0001f600": {1: [0]}, "\uff21": {1: [1]}}
