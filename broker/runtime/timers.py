"""Keyed deadlines for the coordinator, fired by one trio task.

The coordinator asks for timers as data (``SetTimer(key, deadline_ms)``); scheduling a key again
replaces its deadline and cancelling forgets it.

Most re-arming moves a deadline later: every heartbeat pushes its member's session deadline out
by the session timeout. Such a move only records the new deadline; the heap keeps the entry it
has, and when that entry comes due the key is found to have a later deadline and goes back into
the heap once, at that deadline. A heartbeat thus costs a dictionary update, the heap holds about
one entry per armed key (pushing one per heartbeat grew it by thousands a second with many
members, and its periodic compaction was a pause that grew with them), and the timer task wakes
about once per session timeout per member rather than never sleeping long. A deadline moved
earlier gets a new entry; the old one, like a cancelled key's, is dropped when it reaches the top.

Deadlines are asked for in wall-clock milliseconds (the cores' ``now``) but elapse on a steady
clock: a deadline becomes "this long from now" when it is set, and comes due when that much steady
time has passed. A wall clock stepped by NTP or an operator (a minute ahead, say) would otherwise
expire every session at once, or (stepped back) keep a dead member in its group that much longer;
Kafka's coordinator runs its timers on ``System.nanoTime`` for the same reason. The cores still
get the wall clock as ``now`` when a timer fires, for what they write down.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable

import trio

Fire = Callable[[int, str, int], None]
Key = tuple[int, str]  # (shard, timer key)

# Entries that only need to move to their key's later deadline are handled this early when the
# task is awake anyway, so that a steady stream of them wakes it once per this period at most.
_EARLY_MS = 1000


def wall_ms() -> int:
    return int(time.time() * 1000)


def steady_ms() -> int:
    """trio's clock in milliseconds: monotonic in production, virtual under a MockClock."""
    return round(trio.current_time() * 1000)


_monotonic_ns = time.monotonic_ns
_time_ns = time.time_ns


def monotonic_ms() -> int:
    """The system's monotonic clock in milliseconds, rounded down."""
    return _monotonic_ns() // 1_000_000


def _system_offset() -> int:
    """monotonic - wall, in milliseconds rounded down, plus the one that keeps deadlines from
    coming due early (see ``TimerService``). The wall clock is read first: read after, it would be
    a little ahead of the monotonic reading, the difference a little short, the deadline early."""
    wall = _time_ns()
    return (_monotonic_ns() - wall) // 1_000_000 + 1


class TimerService:
    def __init__(self, fire: Fire, clock: Callable[[], int] = wall_ms,
                 steady: Callable[[], int] | None = None) -> None:
        """``clock`` is the wall clock the cores see as ``now``; ``steady`` (by default ``clock``
        itself) is what deadlines elapse on. Every deadline kept below is on ``steady``."""
        self.fire = fire
        self.clock = clock
        self.steady = clock if steady is None else steady
        # A wall-clock deadline is moved to the steady clock by their difference read when it is
        # set. Read rounded down, the difference can be up to a millisecond short, and the
        # deadline would come due before the wall clock reaches it (the operation it runs would
        # see a "now" short of its deadline): one millisecond more, then, for the system's wall
        # clock; clocks read exactly alike (the tests' mock clocks) keep their deadlines exact.
        self.margin = 1 if clock is wall_ms and self.steady is not clock else 0
        # steady - wall (+ margin), added by every ``set``; None when deadlines are on ``clock``.
        self._offset: Callable[[], int] | None = None
        if clock is wall_ms and steady is steady_ms:
            # The system's clocks, as a broker runs: trio's clock is then the monotonic clock
            # itself (sleeps are relative to it), read here without going through trio. Every
            # heartbeat re-arms a timer, and four Python frames into trio plus the wall clock's
            # own cost a heartbeat about 2 % of its CPU.
            self.steady = monotonic_ms
            self._offset = _system_offset
        elif self.steady is not clock:
            steady_now, wall_now, margin = self.steady, clock, self.margin

            def offset() -> int:
                return steady_now() - wall_now() + margin
            self._offset = offset
        # (deadline, sequence, shard, key); an entry is current only while ``entry[key]`` is its
        # sequence number, and its deadline may be earlier than the key's deadline.
        self.heap: list[tuple[int, int, int, str]] = []
        self.deadline: dict[Key, int] = {}  # every armed key's deadline
        self.entry: dict[Key, int] = {}  # armed key -> sequence number of its current heap entry
        self.entry_deadline: dict[Key, int] = {}  # armed key -> deadline of that entry
        self.seq = itertools.count()
        self.changed = trio.Event()

    def __len__(self) -> int:
        return len(self.deadline)

    def set(self, shard: int, key: str, deadline_ms: int) -> None:
        """Arms ``key`` of ``shard`` for the wall-clock ``deadline_ms``, that is, for as long from
        now as that deadline is from the wall clock now."""
        offset = self._offset
        if offset is not None:
            deadline_ms += offset()
        k = (shard, key)
        self.deadline[k] = deadline_ms
        queued = self.entry_deadline.get(k)
        if queued is not None and queued <= deadline_ms:
            return  # its entry comes due first and will be moved on then
        self._push(k, deadline_ms)

    def _push(self, k: Key, deadline_ms: int) -> None:
        seq = next(self.seq)
        self.entry[k] = seq
        self.entry_deadline[k] = deadline_ms
        heapq.heappush(self.heap, (deadline_ms, seq, k[0], k[1]))
        if self.heap[0][1] == seq:
            self.changed.set()
        if len(self.heap) > 2 * len(self.entry) + 1024:
            # Cancelled keys and deadlines moved earlier leave entries behind; they go when they
            # reach the top, and this bounds them should many be left far from it.
            self._compact()

    def cancel(self, shard: int, key: str) -> None:
        k = (shard, key)
        if self.deadline.pop(k, None) is not None:
            del self.entry[k]
            del self.entry_deadline[k]

    def cancel_shard(self, shard: int) -> None:
        for k in [k for k in self.deadline if k[0] == shard]:
            self.cancel(*k)

    def _compact(self) -> None:
        entry = self.entry
        # In place: fire_due may be iterating over this list when a fired timer arms another.
        self.heap[:] = [e for e in self.heap if entry.get((e[2], e[3])) == e[1]]
        heapq.heapify(self.heap)

    def fire_due(self) -> int:
        """Fires every due timer; returns the ms until the next one (or -1 when none)."""
        now = self.steady()
        wall = self.clock()
        heap = self.heap
        entry = self.entry
        while heap:
            at, seq, shard, key = heap[0]
            k = (shard, key)
            if entry.get(k) != seq:
                heapq.heappop(heap)  # cancelled, or superseded by an earlier deadline
                continue
            deadline = self.deadline[k]
            if deadline > at:
                # Re-armed later since this entry was pushed: move it to the key's deadline.
                if at > now + _EARLY_MS:
                    return at - now
                heapq.heappop(heap)
                self._push(k, deadline)
                continue
            if at > now:
                return at - now
            heapq.heappop(heap)
            del self.deadline[k], entry[k], self.entry_deadline[k]
            self.fire(shard, key, wall)
        return -1

    async def run(self) -> None:
        while True:
            wait_ms = self.fire_due()
            self.changed = trio.Event()
            if wait_ms < 0:
                await self.changed.wait()
            else:
                with trio.move_on_after(wait_ms / 1000):
                    await self.changed.wait()
