"""The default streams task assignor ("sticky", as Kafka's ``StickyTaskAssignor``): active tasks
spread evenly over the members, each kept by its previous owner while that owner is under its
share; then ``num.standby.replicas`` standby copies of every stateful task, each on a process that does
not already hold the task, kept where they were when allowed, otherwise on the least loaded
member. Warm-up tasks are not assigned by this assignor (as in Kafka 4.4)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from broker.group_coordinator.streams.model import TaskAssignment, Tasks

Task = tuple[str, int]


@dataclass(frozen=True)
class AssignorMember:
    member_id: str
    process_id: str
    previous: TaskAssignment


def _task_set(tasks: Tasks) -> set[Task]:
    return {(s, p) for s, parts in tasks.items() for p in parts}


def _as_tasks(tasks: set[Task]) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(p) for s, p in out.items()}


def assign(members: list[AssignorMember], task_counts: Mapping[str, int], num_standby: int,
           stateful: Collection[str] = ()) -> dict[str, TaskAssignment]:
    """``stateful``: the subtopologies whose tasks have state; only those get standby copies."""
    if not members:
        return {}
    # Kept tasks are taken partition by partition (a member keeps the same partitions of every
    # subtopology), new ones subtopology by subtopology (each subtopology spread over the members).
    all_tasks = sorted(((s, p) for s, n in task_counts.items() for p in range(n)), key=lambda t: (t[1], t[0]))
    ids = sorted(m.member_id for m in members)
    by_id = {m.member_id: m for m in members}
    active: dict[str, set[Task]] = {mid: set() for mid in ids}
    quota = -(-len(all_tasks) // len(ids))  # ceil
    prev_owner: dict[Task, str] = {}
    for mid in ids:
        for t in _task_set(by_id[mid].previous.active):
            prev_owner.setdefault(t, mid)
    unassigned: list[Task] = []
    for t in all_tasks:
        owner = prev_owner.get(t)
        if owner is not None and len(active[owner]) < quota:
            active[owner].add(t)
        else:
            unassigned.append(t)
    process_load: dict[str, int] = {}
    for mid in ids:
        pid = by_id[mid].process_id
        process_load[pid] = process_load.get(pid, 0) + len(active[mid])
    for t in sorted(unassigned):
        mid = min(ids, key=lambda m: (len(active[m]), process_load[by_id[m].process_id], m))
        active[mid].add(t)
        process_load[by_id[mid].process_id] += 1

    standby: dict[str, set[Task]] = {mid: set() for mid in ids}
    if num_standby > 0:
        holder_process: dict[Task, set[str]] = {t: set() for t in all_tasks}
        for mid in ids:
            for t in active[mid]:
                holder_process[t].add(by_id[mid].process_id)
        prev_standby: dict[Task, list[str]] = {}
        for mid in ids:
            for t in _task_set(by_id[mid].previous.standby):
                prev_standby.setdefault(t, []).append(mid)
        for t in all_tasks:
            if t[0] not in stateful:
                continue
            for _ in range(num_standby):
                candidates = [m for m in ids if by_id[m].process_id not in holder_process[t]]
                if not candidates:
                    break
                sticky = [m for m in prev_standby.get(t, []) if m in candidates]
                mid = sticky[0] if sticky else min(
                    candidates, key=lambda m: (len(active[m]) + len(standby[m]), m))
                standby[mid].add(t)
                holder_process[t].add(by_id[mid].process_id)
    return {mid: TaskAssignment(_as_tasks(active[mid]), _as_tasks(standby[mid]), {}) for mid in ids}
