"""A deleted topic's committed offsets are tombstoned in every group (Kafka's onPartitionsDeleted)."""

from __future__ import annotations

from broker.coordinators.group.core import OffsetCommitRecord
from tests.unit.coordinators.group.core.harness import Harness


def test_every_group_loses_the_deleted_topics_offsets_and_keeps_the_others(h: Harness) -> None:
    (a,), gen = h.stable("active", topics=("t", "u"))
    h.commit("active", {("t", 0): 5, ("t", 3): 7, ("u", 1): 9}, generation=gen, member_id=a)
    h.commit("simple", {("t", 1): 2, ("v", 0): 4})
    h.commit("elsewhere", {("u", 0): 1})

    result = h.op(h.shard.on_partitions_deleted([("t", p) for p in range(4)]))

    assert sorted(result.records, key=lambda r: (r.group, r.partition)) == [
        OffsetCommitRecord("active", "t", 0, None),
        OffsetCommitRecord("active", "t", 3, None),
        OffsetCommitRecord("simple", "t", 1, None),
    ]
    assert h.fetch("active") == {("u", 1): (9, -1, "", 0)}
    assert h.fetch("simple") == {("v", 0): (4, -1, "", 0)}
    assert h.fetch("elsewhere") == {("u", 0): (1, -1, "", 0)}
    # Asked for by name, the deleted partitions answer "no committed offset".
    assert h.fetch("active", [("t", [0, 3])]) == {("t", 0): (-1, -1, "", 0), ("t", 3): (-1, -1, "", 0)}
    # Groups stay as they were: Kafka neither deletes nor rebalances them.
    assert h.state("active") == "Stable"


def test_a_restart_replays_the_tombstones(h: Harness) -> None:
    h.commit("g", {("t", 0): 5, ("u", 0): 6})
    h.op(h.shard.on_partitions_deleted([("t", 0), ("t", 1)]))
    before = h.shard.snapshot()

    h.restart()

    assert h.shard.snapshot() == before
    assert h.fetch("g") == {("u", 0): (6, -1, "", 0)}


def test_only_the_named_partitions_are_tombstoned_and_nothing_when_none_are_committed(h: Harness) -> None:
    h.commit("g", {("t", 0): 1, ("t", 2): 3})
    assert h.op(h.shard.on_partitions_deleted([("t", 2)])).records == [OffsetCommitRecord("g", "t", 2, None)]
    assert h.op(h.shard.on_partitions_deleted([("zzz", 0)])).records == []
    assert h.fetch("g") == {("t", 0): (1, -1, "", 0)}


def test_topic_changes_leave_classic_groups_alone(h: Harness) -> None:
    h.stable("g", topics=("t",))
    result = h.op(h.shard.on_topics_changed({"t"}, h.now))
    assert (result.records, result.replies, result.transitions) == ([], [], [])
    assert h.state("g") == "Stable"
