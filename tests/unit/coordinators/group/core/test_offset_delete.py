"""OffsetDelete: empty groups freely, active consumer groups only for topics they left."""

from __future__ import annotations

from broker.coordinators.group.core import OffsetCommitRecord
from tests.unit.coordinators.group.core.harness import Harness

NONE, INVALID_GROUP_ID, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 0, 24, 68, 69, 86


def errors(resp: object) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}  # type: ignore[attr-defined]


def test_group_level_errors(h: Harness) -> None:
    assert h.delete_offsets("", {"t": [0]}).error_code == INVALID_GROUP_ID
    assert h.delete_offsets("nope", {"t": [0]}).error_code == GROUP_ID_NOT_FOUND
    h.stable("connect", protocol_type="connect")
    r = h.delete_offsets("connect", {"t": [0]})
    assert (r.error_code, r.topics) == (NON_EMPTY_GROUP, [])


def test_empty_group_offsets_are_deleted(h: Harness) -> None:
    h.commit("s", {("t", 0): 1, ("t", 1): 2})
    r = h.delete_offsets("s", {"t": [0, 3]})
    assert r.error_code == NONE and errors(r) == {("t", 0): NONE, ("t", 3): NONE}
    assert h.last.records == [OffsetCommitRecord("s", "t", 0, None)]
    assert h.fetch("s") == {("t", 1): (2, -1, "", 0)}


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics(h: Harness) -> None:
    (a,), gen = h.stable(topics=("t",))
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, generation=gen, member_id=a)
    r = h.delete_offsets("g", {"t": [0], "u": [0]})
    assert r.error_code == NONE
    assert errors(r) == {("t", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): NONE}
    assert h.fetch("g") == {("t", 0): (1, -1, "", 0)}


def test_rebalancing_consumer_group_with_unknown_subscriptions_keeps_everything(h: Harness) -> None:
    h.join_new("g2")
    assert h.state("g2") == "PreparingRebalance"
    r = h.delete_offsets("g2", {"u": [0]})
    assert errors(r) == {("u", 0): GROUP_SUBSCRIBED_TO_TOPIC}
