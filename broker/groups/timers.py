"""Keyed deadlines for the coordinator, fired by one trio task.

The coordinator asks for timers as data (``SetTimer(key, deadline_ms)``); scheduling a key again
replaces it and cancelling forgets it, both O(log n) with lazy deletion from the heap, so a
heartbeat that pushes a member's session deadline costs one heap push and never a scan.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable

import trio

Fire = Callable[[int, str, int], None]


def wall_ms() -> int:
    return int(time.time() * 1000)


class TimerService:
    def __init__(self, fire: Fire, clock: Callable[[], int] = wall_ms) -> None:
        self.fire = fire
        self.clock = clock
        self.heap: list[tuple[int, int, int, str]] = []
        self.live: dict[tuple[int, str], int] = {}
        self.seq = itertools.count()
        self.changed = trio.Event()

    def set(self, shard: int, key: str, deadline_ms: int) -> None:
        seq = next(self.seq)
        self.live[(shard, key)] = seq
        heapq.heappush(self.heap, (deadline_ms, seq, shard, key))
        if self.heap[0][1] == seq:
            self.changed.set()
        if len(self.heap) > 4 * len(self.live) + 1024:
            self._compact()

    def cancel(self, shard: int, key: str) -> None:
        self.live.pop((shard, key), None)

    def cancel_shard(self, shard: int) -> None:
        for k in [k for k in self.live if k[0] == shard]:
            del self.live[k]

    def _compact(self) -> None:
        self.heap = [e for e in self.heap if self.live.get((e[2], e[3])) == e[1]]
        heapq.heapify(self.heap)

    def fire_due(self) -> int:
        """Fires every due timer; returns the ms until the next one (or -1 when none)."""
        now = self.clock()
        while self.heap:
            deadline, seq, shard, key = self.heap[0]
            if self.live.get((shard, key)) != seq:
                heapq.heappop(self.heap)
                continue
            if deadline > now:
                return deadline - now
            heapq.heappop(self.heap)
            del self.live[(shard, key)]
            self.fire(shard, key, now)
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
