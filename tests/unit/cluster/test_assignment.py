"""Who should own each partition: every node computes the same spread, even, and a change of
membership moves only what it must."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.assignment import desired_owners

OFFSETS = [("__consumer_offsets", p) for p in range(50)]


def test_fifty_partitions_spread_evenly_over_three_and_four_nodes() -> None:
    for nodes in ([1, 2, 3], [1, 2, 3, 4], [7, 11]):
        shares = Counter(desired_owners(OFFSETS, nodes).values())
        assert set(shares) == set(nodes)
        assert max(shares.values()) - min(shares.values()) <= 2, shares


def test_every_topic_is_spread_on_its_own() -> None:
    partitions = OFFSETS + [("orders", p) for p in range(6)]
    owners = desired_owners(partitions, [1, 2, 3])
    assert Counter(owners[("orders", p)] for p in range(6)) == {1: 2, 2: 2, 3: 2}


def test_a_joining_node_takes_only_from_others_and_a_leaving_one_gives_only_its_own() -> None:
    before = desired_owners(OFFSETS, [1, 2, 3])
    joined = desired_owners(OFFSETS, [1, 2, 3, 4])
    moved = [p for p in OFFSETS if before[p] != joined[p]]
    assert sum(1 for p in moved if joined[p] == 4) >= len(moved) - 2  # almost all moves go to the newcomer
    assert len(moved) <= 50 // 4 + 3
    left = desired_owners(OFFSETS, [1, 3])
    assert all(before[p] == 2 for p in OFFSETS if before[p] != left[p])


@settings(max_examples=50, deadline=None)
@given(st.sets(st.integers(0, 1000), min_size=1, max_size=8), st.integers(1, 80))
def test_the_answer_depends_only_on_the_set_of_nodes(nodes: set[int], count: int) -> None:
    partitions = [("t", p) for p in range(count)]
    one = desired_owners(partitions, sorted(nodes))
    other = desired_owners(list(reversed(partitions)), sorted(nodes, reverse=True))
    assert one == other
    assert set(one.values()) <= nodes and len(one) == count
