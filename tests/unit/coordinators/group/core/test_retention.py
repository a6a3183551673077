"""The offsets-expiry sweep: the three retention rules, group deletion, and its own timer."""

from __future__ import annotations

import pytest

from broker.coordinators.group.core import CoordinatorConfig, GroupMetadataRecord, OffsetCommitRecord
from tests.unit.coordinators.group.core.harness import Harness

R, EVERY = 100_000, 10_000
LONG = 1_800_000  # sessions that outlive the retention period


@pytest.fixture
def h() -> Harness:
    return Harness(CoordinatorConfig(offsets_retention_ms=R, offsets_retention_check_interval_ms=EVERY))


def test_the_sweep_rearms_itself(h: Harness) -> None:
    assert h.timers["offsets-expiry"] == h.now + EVERY
    h.sleep(EVERY)
    assert h.timers["offsets-expiry"] == h.now + EVERY


def test_simple_group_offsets_expire_one_by_one_then_the_group_goes(h: Harness) -> None:
    h.commit("s", {("t", 0): 1})
    h.sleep(50_000)
    h.commit("s", {("t", 1): 2})
    h.sleep(50_000)  # the first offset is R old at this sweep
    assert h.fetch("s") == {("t", 1): (2, -1, "", 0)}
    assert h.last.records == [OffsetCommitRecord("s", "t", 0, None)]
    h.sleep(50_000)
    assert h.last.records == [OffsetCommitRecord("s", "t", 1, None), GroupMetadataRecord("s", None)]
    assert "s" not in h.shard.state.groups
    assert h.transitions[-1] == ("s", "Empty", "Dead", 0, 0, "offsets-expired")


def test_empty_group_offsets_expire_together_after_the_group_emptied(h: Harness) -> None:
    (a,), gen = h.stable(session=LONG)
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, generation=gen, member_id=a)
    h.sleep(90_000)
    h.heartbeat("g", a, gen)
    h.leave("g", [(a, None)])
    emptied = h.now
    h.sleep(R - 1)
    assert len(h.fetch("g")) == 2  # long past the commits, but not yet R after emptying
    h.sleep(EVERY)
    assert h.fetch("g") == {} and "g" not in h.shard.state.groups
    tombstones = [r for r in h.records() if r.value is None]
    assert tombstones == [OffsetCommitRecord("g", "t", 0, None), OffsetCommitRecord("g", "u", 0, None),
                          GroupMetadataRecord("g", None)]
    assert h.now - emptied >= R


def test_stable_consumer_group_loses_only_offsets_of_topics_it_left(h: Harness) -> None:
    (a,), gen = h.stable(session=LONG, topics=("t",))
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, generation=gen, member_id=a)
    for _ in range(12):
        h.sleep(EVERY)
        h.heartbeat("g", a, gen)
    assert h.fetch("g") == {("t", 0): (1, -1, "", 0)}
    assert h.state("g") == "Stable"


def test_rebalancing_groups_keep_their_offsets(h: Harness) -> None:
    (a, _b), gen = h.stable(n=2, session=LONG, rebalance=LONG, topics=("t",))
    h.commit("g", {("u", 0): 2}, generation=gen, member_id=a)
    h.join("g", a, session=LONG, rebalance=LONG)  # b does not rejoin: the group stays rebalancing
    h.sleep(R + EVERY)
    assert h.state("g") == "PreparingRebalance"
    assert h.fetch("g") == {("u", 0): (2, -1, "", 0)}


def test_explicit_expire_timestamps_win(h: Harness) -> None:
    h.commit("s", {("t", 0): 1}, version=2, retention=15_000)
    h.sleep(2 * EVERY)
    assert h.fetch("s") == {}


def test_empty_groups_without_offsets_are_removed(h: Harness) -> None:
    h.join("g")  # MEMBER_ID_REQUIRED leaves an Empty group behind
    h.sleep(EVERY)
    assert "g" not in h.shard.state.groups


def test_sweep_results_survive_a_restart(h: Harness) -> None:
    h.commit("s", {("t", 0): 1})
    h.sleep(60_000)
    h.commit("s", {("t", 1): 1})
    h.sleep(50_000)
    before = h.shard.snapshot()
    h.restart()
    assert h.shard.snapshot() == before
