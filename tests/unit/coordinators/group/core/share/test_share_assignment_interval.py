"""Share groups' assignment batching (Kafka 4.3+, KIP-1263): a share group's target assignment is
computed at most once per ``share.assignment.interval.ms`` (1 s by default): a member joining
within the interval of the last assignment gets nothing yet, and the first heartbeat after it
computes the next assignment. Its time is written with its epoch and survives a restart; a group
left empty writes 0, so its next member is assigned at once."""

from __future__ import annotations

from typing import Any

from broker.coordinators.group.core import CoordinatorConfig
from tests.unit.coordinators.group.core.harness import Harness
from tests.unit.coordinators.group.core.share.beats import beat

BATCHED = CoordinatorConfig(share_assignment_interval_ms=1000)
START = 1_700_000_000_000


def held(resp: Any) -> int:
    return sum(len(tp.partitions) for tp in resp.assignment.topic_partitions) if resp.assignment else -1


def test_a_member_joining_within_the_interval_waits_for_the_next_assignment() -> None:
    h = Harness(topics={"t": 2}, config=BATCHED, now=START)
    a = beat(h, "a", 0, ["t"])  # a new group: assigned at once (its partitions still initializing)
    a = beat(h, "a", a.member_epoch)  # initialized: they are the next assignment's ...
    h.sleep(1000)
    a = beat(h, "a", a.member_epoch)  # ... once the interval has passed
    assert held(a) == 2
    g = h.shard.state.share_groups["sg"]
    assert g.assignment_time == START + 1000 and g.assignment_epoch == g.group_epoch
    h.sleep(100)
    b = beat(h, "b", 0, ["t"])
    assert b.error_code == 0 and held(b) == 0  # within the interval: nothing yet
    assert g.group_epoch == g.assignment_epoch + 1
    assert beat(h, "a", a.member_epoch).assignment is None  # a keeps both meanwhile
    h.sleep(900)
    b = beat(h, "b", b.member_epoch)  # the interval has passed: the next assignment
    assert held(b) == 1 and g.assignment_epoch == g.group_epoch and g.assignment_time == START + 2000
    a = beat(h, "a", a.member_epoch)
    assert held(a) == 1
    h.restart()
    g = h.shard.state.share_groups["sg"]
    assert (g.assignment_epoch, g.assignment_time) == (g.group_epoch, START + 2000)


def test_a_group_left_empty_assigns_its_next_member_at_once() -> None:
    h = Harness(topics={"t": 2}, config=BATCHED, now=START)
    beat(h, "a", 0, ["t"])
    beat(h, "a", -1)
    g = h.shard.state.share_groups["sg"]
    assert g.assignment_time == 0 and g.assignment_epoch == g.group_epoch
    h.sleep(10)
    b = beat(h, "b", 0, ["t"])
    assert held(b) == 2
