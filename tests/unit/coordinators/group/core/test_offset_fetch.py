"""OffsetFetch: -1 for whatever is unknown, everything when no topics are named."""

from __future__ import annotations

from tests.unit.coordinators.group.core.harness import Harness


def test_unknown_group_is_not_an_error(h: Harness) -> None:
    assert h.fetch("nope", [("t", [0, 1])]) == {("t", 0): (-1, -1, "", 0), ("t", 1): (-1, -1, "", 0)}
    assert h.fetch("nope") == {}


def test_partitions_without_offsets_answer_minus_one(h: Harness) -> None:
    h.commit("s", {("t", 0): 5}, metadata="x", leader_epoch=2)
    assert h.fetch("s", [("t", [0, 3]), ("zzz", [0])]) == {
        ("t", 0): (5, 2, "x", 0), ("t", 3): (-1, -1, "", 0), ("zzz", 0): (-1, -1, "", 0)}


def test_all_topics_in_a_stable_order(h: Harness) -> None:
    h.commit("s", {("u", 1): 1, ("t", 2): 2, ("t", 0): 3})
    error, rows = h.shard.offset_fetch_group("s", None, False)
    assert error == 0
    assert [(t, p, o) for t, p, o, *_ in rows] == [("t", 0, 3), ("t", 2, 2), ("u", 1, 1)]


def test_latest_commit_wins_and_deleted_offsets_disappear(h: Harness) -> None:
    h.commit("s", {("t", 0): 5})
    h.commit("s", {("t", 0): 9})
    assert h.fetch("s", [("t", [0])])[("t", 0)][0] == 9
    h.delete_offsets("s", {"t": [0]})
    assert h.fetch("s") == {}
