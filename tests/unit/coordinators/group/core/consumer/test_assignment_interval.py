"""Assignment batching (Kafka 4.3+, KIP-1263): a consumer group's target assignment is computed at
most once per ``consumer.assignment.interval.ms`` (1 s by default). A member joining within the
interval of the last assignment gets nothing yet and the group stays Assigning; the first
heartbeat after the interval computes the next assignment. The time of each assignment is
written with its epoch (ConsumerGroupTargetAssignmentMetadataValue's tagged AssignmentTimestamp)
and survives a restart; a group left empty writes 0, so the next one is not held back."""

from __future__ import annotations

from dataclasses import replace

from broker.coordinators.group.core.base.assignment_interval import can_compute_target
from tests.unit.coordinators.group.core.consumer.members import CONFIG, Member, converge
from tests.unit.coordinators.group.core.harness import Harness, Topics

T = Topics.id_of("t")
BATCHED = replace(CONFIG, consumer_assignment_interval_ms=1000)
START = 1_700_000_000_000


def test_the_rule() -> None:
    assert can_compute_target(0, 1000, START)  # no assignment yet, or its time unknown
    assert can_compute_target(START, 0, START)  # no interval
    assert not can_compute_target(START, 1000, START + 999)
    assert can_compute_target(START, 1000, START + 1000)
    assert can_compute_target(START, 1000, START - 5000)  # a clock stepped back: not held back by it


def test_a_member_joining_within_the_interval_waits_for_the_next_assignment() -> None:
    h = Harness(BATCHED, now=START)
    a, b = Member(h, "a"), Member(h, "b")
    a.beat()  # a new group: assigned at once
    g = h.shard.state.consumer_groups["g"]
    assert a.held() == {(T, p) for p in range(4)} and g.assignment_time == START
    h.sleep(200)
    joined = b.beat()
    assert joined.error_code == 0 and b.held() == set()
    assert g.group_epoch == g.assignment_epoch + 1 and g.state.value == "Assigning"
    a.beat()
    assert len(a.held()) == 4  # still the last target: nothing to revoke yet
    h.sleep(800)  # the interval has passed: the next heartbeat computes the assignment
    a.beat()
    assert g.assignment_epoch == g.group_epoch and g.assignment_time == START + 1000
    converge([a, b])
    assert len(a.held()) == len(b.held()) == 2
    before = (g.assignment_epoch, g.assignment_time)
    h.restart()
    g = h.shard.state.consumer_groups["g"]
    assert (g.assignment_epoch, g.assignment_time) == before


def test_a_group_left_empty_assigns_its_next_member_at_once() -> None:
    h = Harness(BATCHED, now=START)
    a = Member(h, "a")
    a.beat()
    a.beat(epoch=-1)  # leaves: the group is empty, its assignment time 0
    g = h.shard.state.consumer_groups["g"]
    assert g.assignment_time == 0
    h.sleep(10)
    b = Member(h, "b")
    b.beat()
    assert b.held() == {(T, p) for p in range(4)}
