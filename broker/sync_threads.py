"""Worker threads that make logs durable, with the cheapest hand-off back to trio we can get.

``trio.to_thread.run_sync`` is general (capacity limiter, cancellation, context copying) and its
per-call cost shows on the commit path, where every group-commit pass waits for fdatasync. These
threads live as long as the broker; a job is a plain function, its completion one
``run_sync_soon`` that sets a trio Event.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import trio

Job = tuple[Callable[[], None], Callable[[BaseException | None], None]] | None


class SyncThreads:
    def __init__(self, count: int, name: str = "kcoord-sync") -> None:
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(count)]
        for t in self.threads:
            t.start()

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fn, done = job
            try:
                fn()
            except BaseException as exc:  # handed back to the awaiting task
                done(exc)
            else:
                done(None)

    async def run_all(self, fns: Sequence[Callable[[], None]]) -> list[BaseException | None]:
        """Runs every ``fn`` on the threads; waits for all of them (the work is not cancellable
        once started, like a write). Returns each one's exception or None, in order."""
        token = trio.lowlevel.current_trio_token()
        finished = trio.Event()
        results: list[Any] = [None] * len(fns)
        pending = [len(fns)]

        def done_at(i: int) -> Callable[[BaseException | None], None]:
            def done(exc: BaseException | None) -> None:
                results[i] = exc

                def step() -> None:
                    pending[0] -= 1
                    if pending[0] == 0:
                        finished.set()

                token.run_sync_soon(step)

            return done

        if not fns:
            return []
        for i, fn in enumerate(fns):
            self.jobs.put((fn, done_at(i)))
        with trio.CancelScope(shield=True):
            await finished.wait()
        return results

    def close(self) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        for t in self.threads:
            t.join(timeout=10)
