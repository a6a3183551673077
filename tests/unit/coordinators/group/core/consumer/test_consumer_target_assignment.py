"""The new target assignment of a group and the members it writes records for (the cases of Kafka's
TargetAssignmentBuilderTest)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.coordinators.group.core.consumer.assignor_api import Assignment, GroupSpec, TopicDescriber
from broker.coordinators.group.core.consumer.member import ConsumerGroupMember
from broker.coordinators.group.core.consumer.target_assignment import build_target_assignment

FOO = b"f" * 16
BAR = b"b" * 16


class Topics:
    def partition_count(self, topic: bytes) -> int:
        return 6 if topic in (FOO, BAR) else -1

    def racks_for_partition(self, topic: bytes, partition: int) -> frozenset[str]:
        return frozenset()


@dataclass
class ScriptedAssignor:
    """Returns a fixed answer and keeps what it was asked."""

    answer: dict[str, Assignment]
    name: str = "scripted"
    seen: list[GroupSpec] = field(default_factory=list)

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> dict[str, Assignment]:
        self.seen.append(group)
        return self.answer


def parts(foo: tuple[int, ...] = (), bar: tuple[int, ...] = ()) -> Assignment:
    out: Assignment = {}
    if foo:
        out[FOO] = frozenset(foo)
    if bar:
        out[BAR] = frozenset(bar)
    return out


def members(*ids: str, instance: dict[str, str] | None = None) -> dict[str, ConsumerGroupMember]:
    instance = instance or {}
    return {i: ConsumerGroupMember(i, instance_id=instance.get(i), rack_id="rack-" + i) for i in ids}


def subs(*ids: str) -> dict[str, frozenset[bytes]]:
    return {i: frozenset({FOO, BAR}) for i in ids}


def build(
    group_members: dict[str, ConsumerGroupMember],
    current: dict[str, Assignment],
    answer: dict[str, Assignment],
    static: dict[str, str] | None = None,
):  # type: ignore[no-untyped-def]
    assignor = ScriptedAssignor(answer)
    result = build_target_assignment(
        group_epoch=20,
        members=group_members,
        subscriptions=subs(*group_members),
        topics=Topics(),
        current_target=current,
        static_members=static or {},
        assignor=assignor,
    )
    return result, assignor.seen[0]


def test_empty_group_only_moves_the_epoch() -> None:
    result, spec = build({}, {}, {})
    assert (result.epoch, result.members, result.changed) == (20, {}, {})
    assert dict(spec.members) == {}


def test_unchanged_assignment_writes_no_member_record() -> None:
    current = {"m1": parts((1, 2, 3), (1, 2, 3)), "m2": parts((4, 5, 6), (4, 5, 6))}
    result, spec = build(members("m1", "m2"), current, dict(current))
    assert result.changed == {}
    assert result.members == current
    assert spec.members["m1"].current == current["m1"]
    assert spec.members["m1"].rack == "rack-m1"
    assert spec.members["m1"].subscribed_topics == frozenset({FOO, BAR})


def test_swapped_assignment_rewrites_both_members() -> None:
    current = {"m1": parts((1, 2, 3), (1, 2, 3)), "m2": parts((4, 5, 6), (4, 5, 6))}
    answer = {"m1": current["m2"], "m2": current["m1"]}
    result, _ = build(members("m1", "m2"), current, answer)
    assert result.changed == answer


def test_new_member_gets_a_record_and_only_the_moved_members_too() -> None:
    current = {"m1": parts((1, 2, 3), (1, 2, 3)), "m2": parts((4, 5, 6), (4, 5, 6))}
    answer = {"m1": parts((1, 2), (1, 2)), "m2": parts((3, 4), (3, 4)), "m3": parts((5, 6), (5, 6))}
    result, spec = build(members("m1", "m2", "m3"), current, answer)
    assert result.changed == answer
    assert spec.members["m3"].current == {}


def test_new_member_with_nothing_still_gets_a_record() -> None:
    current = {"m1": parts((1, 2, 3, 4, 5, 6))}
    result, _ = build(members("m1", "m2"), current, {"m1": current["m1"]})
    assert result.changed == {"m2": {}}
    assert result.members == {"m1": current["m1"], "m2": {}}


def test_partial_update_writes_only_the_changed_members() -> None:
    current = {
        "m1": parts((1, 2), (1, 2)),
        "m2": parts((3, 4), (3, 4)),
        "m3": parts((5, 6), (5, 6)),
    }
    answer = {"m1": current["m1"], "m2": parts((3, 4, 5), (3, 4, 5)), "m3": parts((6,), (6,))}
    result, _ = build(members("m1", "m2", "m3"), current, answer)
    assert result.changed == {"m2": answer["m2"], "m3": answer["m3"]}


def test_removed_member_is_not_given_to_the_assignor() -> None:
    current = {"m1": parts((1, 2), (1, 2)), "m2": parts((3, 4), (3, 4)), "m3": parts((5, 6), (5, 6))}
    answer = {"m1": parts((1, 2, 3), (1, 2, 3)), "m2": parts((4, 5, 6), (4, 5, 6))}
    result, spec = build(members("m1", "m2"), current, answer)
    assert set(spec.members) == {"m1", "m2"}
    assert result.changed == answer
    assert "m3" not in result.members


def test_static_member_replacing_a_departed_one_starts_from_its_assignment() -> None:
    current = {"m1": parts((1, 2), (1, 2)), "m2": parts((3, 4), (3, 4)), "m3": parts((5, 6), (5, 6))}
    group = members("m1", "m2", "m3-new", instance={"m1": "i1", "m2": "i2", "m3-new": "i3"})
    static = {"i1": "m1", "i2": "m2", "i3": "m3"}
    answer = {"m1": current["m1"], "m2": current["m2"], "m3-new": current["m3"]}
    result, spec = build(group, current, answer, static)
    assert spec.members["m3-new"].current == current["m3"]
    assert spec.members["m3-new"].instance_id == "i3"
    # The replacing member has no stored part of its own: it gets a record.
    assert result.changed == {"m3-new": current["m3"]}


def test_topics_without_partitions_do_not_count_as_a_change() -> None:
    current = {"m1": parts((1, 2))}
    result, _ = build(members("m1"), current, {"m1": {FOO: frozenset({1, 2}), BAR: frozenset()}})
    assert result.changed == {}
    assert result.members == current
