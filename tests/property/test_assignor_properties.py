"""Properties of the uniform and range assignors over generated groups: validity, balance,
stickiness and determinism."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.coordinators.group.core.consumer.assignor_api import Assignment, GroupSpec, MemberSpec, TopicId
from broker.coordinators.group.core.consumer.assignors import ASSIGNORS
from tests.unit.coordinators.group.core.consumer.assignor_checks import (
    assert_balanced,
    assert_no_partition_can_move_to_a_much_lighter_subscriber,
    assert_valid,
    moved,
    sizes,
)
from tests.unit.coordinators.group.core.consumer.assignor_groups import Topics, topic

uniform = ASSIGNORS["uniform"]
range_assignor = ASSIGNORS["range"]

FAST = settings(max_examples=150, deadline=None)

member_ids = st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=8, unique=True)


@st.composite
def topic_counts(draw: st.DrawFn) -> Topics:
    counts = draw(st.lists(st.integers(0, 12), min_size=1, max_size=5))
    return Topics({topic(n): c for n, c in enumerate(counts, start=1)})


@st.composite
def current_owners(draw: st.DrawFn, topics: Topics, members: list[str]) -> dict[str, Assignment]:
    """A previous target assignment: each partition held by one member or by nobody, whatever the
    members subscribe to now."""
    current: dict[str, dict[TopicId, set[int]]] = {m: {} for m in members}
    for t, count in topics.counts.items():
        for p in range(count):
            owner = draw(st.sampled_from([None, *members]))
            if owner is not None:
                current[owner].setdefault(t, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in current.items()}


@st.composite
def groups(draw: st.DrawFn, same_subscriptions: bool | None = None) -> tuple[GroupSpec, Topics]:
    """A group over some topics; ``same_subscriptions`` True makes every subscription the same,
    False draws each member its own, None either."""
    topics = draw(topic_counts())
    names = sorted(topics.counts)
    members = draw(member_ids)
    if same_subscriptions is None:
        same_subscriptions = draw(st.booleans())
    shared = frozenset(draw(st.lists(st.sampled_from(names), unique=True)))
    current = draw(current_owners(topics, members))
    # Some members static, their instance ids in another order than their member ids.
    instance_ids = draw(st.permutations(members))
    specs = {
        m: MemberSpec(
            subscribed_topics=shared if same_subscriptions else frozenset(
                draw(st.lists(st.sampled_from(names), unique=True))
            ),
            rack=None,
            instance_id=f"static-{instance_ids[i]}" if draw(st.booleans()) else None,
            current=current[m],
        )
        for i, m in enumerate(members)
    }
    return GroupSpec(specs), topics


def with_current(group: GroupSpec, current: Mapping[str, Assignment]) -> GroupSpec:
    return GroupSpec({
        m: MemberSpec(spec.subscribed_topics, spec.rack, spec.instance_id, current.get(m, {}))
        for m, spec in group.members.items()
    })


def reordered(group: GroupSpec) -> GroupSpec:
    """The same group, every mapping and set filled in the opposite order."""
    return GroupSpec({
        m: MemberSpec(
            frozenset(reversed(sorted(spec.subscribed_topics))),
            spec.rack,
            spec.instance_id,
            {t: frozenset(sorted(spec.current[t], reverse=True)) for t in reversed(list(spec.current))},
        )
        for m, spec in reversed(list(group.members.items()))
    })


# Validity ------------------------------------------------------------------------------------------


@FAST
@given(groups())
def test_uniform_assigns_every_subscribed_partition_once_to_a_subscriber(case: tuple[GroupSpec, Topics]) -> None:
    group, topics = case
    assert_valid(group, topics, uniform.assign(group, topics))


@FAST
@given(groups())
def test_range_assigns_every_subscribed_partition_once_to_a_subscriber(case: tuple[GroupSpec, Topics]) -> None:
    group, topics = case
    assert_valid(group, topics, range_assignor.assign(group, topics))


# Balance --------------------------------------------------------------------------------------------


@FAST
@given(groups(same_subscriptions=True))
def test_uniform_with_one_subscription_balances_within_one_partition(case: tuple[GroupSpec, Topics]) -> None:
    group, topics = case
    assert_balanced(uniform.assign(group, topics))


@FAST
@given(groups(same_subscriptions=False))
def test_uniform_with_different_subscriptions_leaves_no_partition_a_lighter_subscriber_could_take(
    case: tuple[GroupSpec, Topics],
) -> None:
    group, topics = case
    assert_no_partition_can_move_to_a_much_lighter_subscriber(group, uniform.assign(group, topics))


@st.composite
def disjoint_subgroups(draw: st.DrawFn) -> tuple[GroupSpec, Topics, list[list[str]]]:
    """Members split into subgroups, each with its own subscription to topics no other subgroup
    reads: every topic's subscribers then share one subscription."""
    topics = draw(topic_counts())
    members = draw(member_ids)
    names = sorted(topics.counts)
    subgroup_of_topic = {t: draw(st.integers(0, 2)) for t in names}
    subgroup_of_member = {m: draw(st.integers(0, 2)) for m in members}
    current = draw(current_owners(topics, members))
    specs = {
        m: MemberSpec(frozenset(t for t in names if subgroup_of_topic[t] == subgroup_of_member[m]), None, None,
                      current[m])
        for m in members
    }
    subgroups = [[m for m in members if subgroup_of_member[m] == g] for g in range(3)]
    return GroupSpec(specs), topics, [s for s in subgroups if s]


@FAST
@given(disjoint_subgroups())
def test_uniform_balances_each_subgroup_that_shares_a_subscription(
    case: tuple[GroupSpec, Topics, list[list[str]]],
) -> None:
    group, topics, subgroups = case
    result = uniform.assign(group, topics)
    assert_valid(group, topics, result)
    count = sizes(result)
    for subgroup in subgroups:
        if any(group.members[m].subscribed_topics for m in subgroup):
            counts = [count[m] for m in subgroup]
            assert max(counts) - min(counts) <= 1, (subgroup, count)


@FAST
@given(groups())
def test_range_gives_each_subscriber_of_a_topic_a_contiguous_range_within_one_of_the_others(
    case: tuple[GroupSpec, Topics],
) -> None:
    group, topics = case
    result = range_assignor.assign(group, topics)
    subscribed = {t for spec in group.members.values() for t in spec.subscribed_topics}
    for t in subscribed:
        held = [sorted(result[m].get(t, ())) for m, spec in group.members.items() if t in spec.subscribed_topics]
        assert max(map(len, held)) - min(map(len, held)) <= 1
        assert all(ps == list(range(ps[0], ps[0] + len(ps))) for ps in held if ps)


@FAST
@given(groups(same_subscriptions=True), st.integers(1, 12))
def test_range_co_partitions_topics_of_equal_size(case: tuple[GroupSpec, Topics], count: int) -> None:
    group, topics = case
    topics = Topics(dict.fromkeys(topics.counts, count))
    for assignment in range_assignor.assign(group, topics).values():
        assert len({ps for ps in assignment.values()}) <= 1  # the same partition numbers of each topic
        if assignment:
            assert set(assignment) == next(iter(group.members.values())).subscribed_topics


# Stickiness -----------------------------------------------------------------------------------------


@FAST
@given(groups())
def test_rerunning_on_its_own_result_changes_nothing(case: tuple[GroupSpec, Topics]) -> None:
    group, topics = case
    for assignor in (uniform, range_assignor):
        first = assignor.assign(group, topics)
        assert assignor.assign(with_current(group, first), topics) == first


def fewest_moves_for_balance(held: Mapping[str, int], total: int) -> int:
    """Partitions that must leave members still present for the counts to differ by at most one."""
    minimum, extra = divmod(total, len(held))
    above_minimum = [n for n in held.values() if n > minimum]
    return sum(n - minimum - 1 for n in above_minimum) + max(0, len(above_minimum) - extra)


@FAST
@given(groups(same_subscriptions=True), st.text("xyz", min_size=1, max_size=2))
def test_uniform_adding_a_member_moves_only_what_balance_requires(
    case: tuple[GroupSpec, Topics], newcomer: str,
) -> None:
    group, topics = case
    settled = uniform.assign(group, topics)
    subscription = next(iter(group.members.values())).subscribed_topics
    grown = GroupSpec({
        **with_current(group, settled).members,
        newcomer: MemberSpec(subscription, None, None, {}),
    })
    after = uniform.assign(grown, topics)
    assert_balanced(after)
    total = sum(topics.counts[t] for t in subscription)
    assert moved(settled, after) == fewest_moves_for_balance({**sizes(settled), newcomer: 0}, total)


@FAST
@given(groups(same_subscriptions=True), st.data())
def test_uniform_removing_a_member_moves_only_what_balance_requires(
    case: tuple[GroupSpec, Topics], data: st.DataObject,
) -> None:
    group, topics = case
    settled = uniform.assign(group, topics)
    if len(group.members) < 2:
        return
    leaving = data.draw(st.sampled_from(sorted(group.members)))
    shrunk = GroupSpec({m: s for m, s in with_current(group, settled).members.items() if m != leaving})
    after = uniform.assign(shrunk, topics)
    assert_balanced(after)
    subscription = next(iter(group.members.values())).subscribed_topics
    total = sum(topics.counts[t] for t in subscription)
    remaining = {m: n for m, n in sizes(settled).items() if m != leaving}
    assert moved(settled, after) == fewest_moves_for_balance(remaining, total)


# Determinism ----------------------------------------------------------------------------------------


@FAST
@given(groups())
def test_the_result_depends_on_the_group_not_on_the_order_it_was_built_in(case: tuple[GroupSpec, Topics]) -> None:
    group, topics = case
    for assignor in (uniform, range_assignor):
        first = assignor.assign(group, topics)
        assert assignor.assign(group, topics) == first
        assert assignor.assign(reordered(group), topics) == first
