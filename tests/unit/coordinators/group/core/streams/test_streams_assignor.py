"""The sticky task assignor's rules, as Kafka 4.4's StickyTaskAssignor has them: a task that loses
its holder goes to a member holding its state (a standby copy first, then reported offsets, the
most caught-up first), a standby copy to the task's previous active holder, and quotas per member."""

from __future__ import annotations

from broker.coordinators.group.core.streams.assignor import AssignorMember, assign
from broker.coordinators.group.core.streams.model import TaskAssignment

TASKS = {"0": 3, "1": 3}
STATEFUL = {"1"}


def member(mid: str, active: dict[str, set[int]] | None = None, standby: dict[str, set[int]] | None = None,
           offsets: dict[str, dict[int, int]] | None = None) -> AssignorMember:
    held = TaskAssignment({s: frozenset(p) for s, p in (active or {}).items()},
                          {s: frozenset(p) for s, p in (standby or {}).items()})
    return AssignorMember(mid, f"p-{mid}", held, offsets or {})


def held(result: TaskAssignment) -> set[tuple[str, int]]:
    return {(s, p) for s, parts in result.active.items() for p in parts}


def standby_of(result: TaskAssignment) -> set[tuple[str, int]]:
    return {(s, p) for s, parts in result.standby.items() for p in parts}


def test_a_member_that_left_has_its_active_tasks_taken_by_the_standby_holders() -> None:
    # c is gone with 1_1 and 1_2; b held a standby copy of 1_1, which it takes, though a (as
    # loaded, and first by process id) would take it otherwise.
    out = assign([member("a", {"0": {0, 1}}), member("b", {"0": {2}, "1": {0}}, {"1": {1}})], TASKS, 0, STATEFUL)
    assert held(out["b"]) == {("0", 2), ("1", 0), ("1", 1)}
    without = assign([member("a", {"0": {0, 1}}), member("b", {"0": {2}, "1": {0}})], TASKS, 0, STATEFUL)
    assert ("1", 1) in held(without["a"])
    assert held(out["a"]) | held(out["b"]) == {(s, p) for s in TASKS for p in range(3)}
    assert len(held(out["a"])) == len(held(out["b"])) == 3


def test_reported_offsets_bring_a_task_back_to_the_member_whose_disk_holds_its_state() -> None:
    # a holds everything; c (restarted, a new member id, nothing assigned) reports 1_2's offsets.
    everything = {"0": {0, 1, 2}, "1": {0, 1, 2}}
    with_offsets = assign([member("a", everything), member("b"), member("c", offsets={"1": {2: 500}})],
                          TASKS, 0, STATEFUL)
    assert ("1", 2) in held(with_offsets["c"])
    elsewhere = assign([member("a", everything), member("b", offsets={"1": {2: 500}}), member("c")],
                       TASKS, 0, STATEFUL)
    assert ("1", 2) in held(elsewhere["b"])
    for out in (with_offsets, elsewhere):
        assert sorted(len(held(r)) for r in out.values()) == [2, 2, 2]


def test_the_most_caught_up_state_wins_and_a_standby_copy_before_reported_offsets() -> None:
    tasks = {"1": 1}
    ranked = assign([member("a"), member("b", offsets={"1": {0: 10}}), member("c", offsets={"1": {0: 90}})],
                    tasks, 0, STATEFUL)
    assert held(ranked["c"]) == {("1", 0)}
    copy_first = assign([member("a"), member("b", standby={"1": {0}}), member("c", offsets={"1": {0: 90}})],
                        tasks, 0, STATEFUL)
    assert held(copy_first["b"]) == {("1", 0)}


def test_a_moved_task_keeps_a_standby_copy_on_its_previous_holder() -> None:
    # b joins; a gives up half of its tasks, and keeps standby copies of the stateful ones it gave up.
    out = assign([member("a", {"0": {0, 1, 2}, "1": {0, 1, 2}}), member("b")], TASKS, 1, STATEFUL)
    moved = {t for t in held(out["b"]) if t[0] == "1"}
    assert moved and moved <= standby_of(out["a"])
    for r in out.values():
        assert not held(r) & standby_of(r)
    assert standby_of(out["a"]) | standby_of(out["b"]) == {("1", p) for p in range(3)}


def test_standby_copies_stay_off_the_process_of_the_active_task_and_stop_when_processes_run_out() -> None:
    one = AssignorMember("a1", "p", TaskAssignment())
    two = AssignorMember("a2", "p", TaskAssignment())
    out = assign([one, two], TASKS, 1, STATEFUL)
    assert all(not r.standby for r in out.values())  # one process: no copy anywhere
    out = assign([member("a"), member("b"), member("c")], TASKS, 2, STATEFUL)
    for p in range(3):
        holders = [mid for mid, r in out.items() if ("1", p) in held(r) | standby_of(r)]
        assert sorted(holders) == ["a", "b", "c"]
