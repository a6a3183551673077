"""The default streams task assignor ("sticky"), with the rules of Kafka 4.4's broker-side
``StickyTaskAssignor``:

- every member has a quota of active tasks (the tasks left over the members with room left, rounded
  up) and a quota of all tasks (active and standby alike);
- active tasks, taken partition by partition: first each stays with the member that holds it now,
  while that member is under its quota; then one that lost its holder goes to a member holding its
  state (a standby copy, or reported offsets of it), the previous standbys first, then the most
  caught-up; the rest, subtopology by subtopology, to the least loaded process (tasks per member of
  it) and its least loaded member;
- ``num.standby.replicas`` standby copies of every stateful task, in the reverse order: first to the
  member that held the task active before, then to a member holding its state as above, each on a
  process that does not hold the task yet and under the total quota; the copies left go to the
  least loaded processes without the task.

What the members hold is their current assignment (not their target), as Kafka hands the assignor.
Where Kafka's choice between equally loaded processes or members follows the iteration order of its
hash maps, this one takes the smallest process id and member id. Client tags
(``rack.aware.assignment.tags``) are not read, as Kafka 4.4's assignor does not read them; warm-up
tasks are not assigned, as Kafka 4.4 assigns none."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from broker.coordinators.group.core.streams.model import TaskAssignment, Tasks

Task = tuple[str, int]
# subtopology id -> partition -> a reported offset (sum of the task's changelog offsets)
TaskOffsets = Mapping[str, Mapping[int, int]]


@dataclass(frozen=True)
class AssignorMember:
    member_id: str
    process_id: str
    previous: TaskAssignment
    # The changelog offsets the member last reported per task: state it holds on disk, a weaker
    # claim to a task than a standby copy.
    task_offsets: TaskOffsets = field(default_factory=dict)


def _task_set(tasks: Tasks) -> list[Task]:
    return sorted((s, p) for s, parts in tasks.items() for p in parts)


def _as_tasks(tasks: Iterable[Task]) -> Tasks:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return {s: frozenset(p) for s, p in out.items()}


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


class _Process:
    """One process's members and what they hold so far."""

    def __init__(self, process_id: str) -> None:
        self.process_id = process_id
        self.counts: dict[str, int] = {}  # member -> tasks (active and standby)
        self.tasks: set[Task] = set()
        self.active: dict[str, set[Task]] = {}
        self.standby: dict[str, set[Task]] = {}

    @property
    def load(self) -> float:
        return sum(self.counts.values()) / len(self.counts)

    def add(self, member_id: str, task: Task, active: bool) -> int:
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.counts[member_id] += 1
        return self.counts[member_id]

    def add_to_least_loaded(self, task: Task, active: bool) -> int:
        member_id = min(self.counts, key=lambda m: (self.counts[m], m))
        return self.add(member_id, task, active)


class _Quotas:
    """How many tasks a member may take: recomputed, over the members with room left, each time a
    member reaches its quota."""

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks, self.members = tasks, members
        self.per_member = _per_member(tasks, members)

    def taken(self, count: int) -> None:
        if count == self.per_member:
            self.members -= 1
            self.tasks -= count
            self.per_member = _per_member(self.tasks, self.members)


class _Assignment:
    def __init__(self, members: list[AssignorMember], task_counts: Mapping[str, int], num_standby: int,
                 stateful: Collection[str]) -> None:
        self.num_standby = num_standby
        self.processes: dict[str, _Process] = {}
        self.process_of: dict[str, str] = {}
        for m in sorted(members, key=lambda m: m.member_id):
            self.processes.setdefault(m.process_id, _Process(m.process_id)).counts[m.member_id] = 0
            self.process_of[m.member_id] = m.process_id
        total_active = sum(task_counts.values())
        total = total_active + sum(n for s, n in task_counts.items() if s in stateful) * num_standby
        self.active_quota = _Quotas(total_active, len(members))
        self.total_quota = _Quotas(total, len(members))
        self.prev_active: dict[Task, str] = {}
        # task -> (is not a previous standby, -offset, member): the members holding its state, best first
        ranked: dict[Task, list[tuple[bool, int, str]]] = {}
        for m in sorted(members, key=lambda m: m.member_id):
            for t in _task_set(m.previous.active):
                self.prev_active[t] = m.member_id
            standby = set(_task_set(m.previous.standby))
            for t in standby:
                ranked.setdefault(t, []).append((False, -m.task_offsets.get(t[0], {}).get(t[1], 0), m.member_id))
            for s, offsets in sorted(m.task_offsets.items()):
                for p, offset in sorted(offsets.items()):
                    if (s, p) not in standby:
                        ranked.setdefault((s, p), []).append((True, -offset, m.member_id))
        self.state_holders = {t: [mid for _, _, mid in sorted(c, key=lambda c: (c[0], c[1]))]
                              for t, c in ranked.items()}

    def _process(self, member_id: str) -> _Process:
        return self.processes[self.process_of[member_id]]

    def _add(self, member_id: str, task: Task, active: bool) -> None:
        count = self._process(member_id).add(member_id, task, active)
        if active:
            self.active_quota.taken(count)
        self.total_quota.taken(count)

    def _least_loaded_holder(self, task: Task, standby: bool) -> str | None:
        """Of the members holding the task's state, the first whose process and member are both
        less loaded than the one chosen so far (Kafka's rule), skipping, for a standby copy,
        processes that hold the task already."""
        chosen: str | None = None
        chosen_loads = (float("inf"), float("inf"))
        for mid in self.state_holders.get(task, []):
            process = self._process(mid)
            if standby and task in process.tasks:
                continue
            loads = (process.load, float(process.counts[mid]))
            if chosen is None or (loads[0] < chosen_loads[0] and loads[1] < chosen_loads[1]):
                chosen, chosen_loads = mid, loads
        return chosen

    def _by_load(self) -> list[tuple[float, str]]:
        heap = [(p.load, pid) for pid, p in self.processes.items()]
        heapq.heapify(heap)
        return heap

    def assign_active(self, tasks: list[Task]) -> None:
        left = sorted(tasks, key=lambda t: (t[1], t[0]))
        for keep_with in (self._keeper, self._state_holder):
            still = []
            for t in left:
                mid = keep_with(t)
                if mid is not None and self._process(mid).counts[mid] < self.active_quota.per_member:
                    self._add(mid, t, True)
                else:
                    still.append(t)
            left = still
        heap = self._by_load()
        for t in sorted(left):
            _, pid = heapq.heappop(heap)
            process = self.processes[pid]
            count = process.add_to_least_loaded(t, True)
            self.active_quota.taken(count)
            self.total_quota.taken(count)
            heapq.heappush(heap, (process.load, pid))

    def _keeper(self, task: Task) -> str | None:
        return self.prev_active.get(task)

    def _state_holder(self, task: Task) -> str | None:
        return self._least_loaded_holder(task, standby=False)

    def assign_standby(self, tasks: list[Task]) -> None:
        to_least_loaded: list[tuple[Task, int]] = []
        for t in sorted(tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for i in range(self.num_standby):
                prev = self.prev_active.get(t)
                if prev is not None and t not in self._process(prev).tasks and (
                        self._process(prev).counts[prev] < self.total_quota.per_member):
                    self._add(prev, t, False)
                    continue
                holder = self._least_loaded_holder(t, standby=True)
                if holder is not None and self._process(holder).counts[holder] < self.total_quota.per_member:
                    self._add(holder, t, False)
                    continue
                to_least_loaded.append((t, self.num_standby - i))
                break
        heap = self._by_load()
        for t, copies in sorted(to_least_loaded, reverse=True):
            for _ in range(copies):
                if not self._standby_to_least_loaded(heap, t):
                    break  # not enough processes for every copy (Kafka logs it and goes on)

    def _standby_to_least_loaded(self, heap: list[tuple[float, str]], task: Task) -> bool:
        """The least loaded process not holding the task takes it, on its least loaded member."""
        skipped: list[tuple[float, str]] = []
        placed = False
        while heap:
            _, pid = heapq.heappop(heap)
            process = self.processes[pid]
            if task in process.tasks:
                skipped.append((process.load, pid))
                continue
            self.total_quota.taken(process.add_to_least_loaded(task, False))
            skipped.append((process.load, pid))
            placed = True
            break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return placed

    def result(self) -> dict[str, TaskAssignment]:
        out: dict[str, TaskAssignment] = {}
        for mid, pid in sorted(self.process_of.items()):
            process = self.processes[pid]
            out[mid] = TaskAssignment(_as_tasks(process.active.get(mid, ())), _as_tasks(process.standby.get(mid, ())),
                                      {})
        return out


def assign(members: list[AssignorMember], task_counts: Mapping[str, int], num_standby: int,
           stateful: Collection[str] = ()) -> dict[str, TaskAssignment]:
    """``stateful``: the subtopologies whose tasks have state; only those get standby copies."""
    if not members:
        return {}
    run = _Assignment(members, task_counts, num_standby, stateful)
    run.assign_active([(s, p) for s, n in task_counts.items() for p in range(n)])
    if num_standby > 0:
        run.assign_standby([(s, p) for s, n in task_counts.items() if s in stateful for p in range(n)])
    return run.result()
