"""Worker threads that make logs durable, with the cheapest hand-off back to trio we can get.

``trio.to_thread.run_sync`` is general (capacity limiter, cancellation, context copying) and its
per-call cost shows on the commit path, where every group-commit pass waits for fdatasync. These
threads live as long as the broker; a job is a plain function, and a submission's completion is
one ``run_sync_soon`` callback, made by whichever thread finishes last.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence

import trio

Job = tuple[Callable[[], None], Callable[[BaseException | None], None]] | None


class SyncThreads:
    def __init__(self, count: int, name: str = "kcoord-sync") -> None:
        # A queue per thread, not one shared: a put on a queue several threads wait on wakes two of
        # them (CPython's SimpleQueue passes its lock on to the next waiter), and the one with
        # nothing to do still takes the GIL from the event loop on its way back to sleep; on the
        # path of one commit in flight that was a few GIL hand-offs per request.
        self.queues: list[queue.SimpleQueue[Job]] = [queue.SimpleQueue() for _ in range(count)]
        self.threads = [threading.Thread(target=self._work, args=(q,), name=f"{name}-{i}", daemon=True)
                        for i, q in enumerate(self.queues)]
        self.next = 0
        for t in self.threads:
            t.start()

    def _work(self, jobs: queue.SimpleQueue[Job]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, done = job
            try:
                fn()
            except BaseException as exc:  # handed back to the awaiting task
                done(exc)
            else:
                done(None)
            # An idle thread must not pin its last job: through the job's closure that is a whole
            # pass of produced batches (a hundred megabytes after a burst), kept until the next job.
            del job, fn, done

    def submit(self, fns: Sequence[Callable[[], None]],
               on_done: Callable[[list[BaseException | None]], None]) -> None:
        """Runs every ``fn`` on the threads; when the last one finishes, ``on_done`` gets each one's
        exception or None, in order, in the trio thread (one wake-up of trio per submission).
        ``on_done`` must not raise: it runs as a trio system callback."""
        token = trio.lowlevel.current_trio_token()
        if not fns:
            on_done([])
            return
        # Submissions rarely overlap (the log runtime runs one pass at a time), so the first job
        # goes to the first thread, keeping one thread warm; overlapping ones rotate.
        if len(fns) == 1:
            # The common pass (one chunk of small appends): no count to keep, no lock.
            def done_one(exc: BaseException | None) -> None:
                with contextlib.suppress(trio.RunFinishedError):
                    token.run_sync_soon(on_done, [exc])

            self.queues[self.next].put((fns[0], done_one))
            return
        results: list[BaseException | None] = [None] * len(fns)

        # Arrivals come from the threads: counted under a lock; the last one wakes trio.
        left = [len(fns)]
        lock = threading.Lock()

        def done_at(i: int) -> Callable[[BaseException | None], None]:
            def done(exc: BaseException | None) -> None:
                results[i] = exc
                with lock:
                    left[0] -= 1
                    last = left[0] == 0
                if last:
                    # After the broker has stopped nobody is left to answer.
                    with contextlib.suppress(trio.RunFinishedError):
                        token.run_sync_soon(on_done, results)

            return done

        count = len(self.queues)
        for i, fn in enumerate(fns):
            self.queues[(self.next + i) % count].put((fn, done_at(i)))
        self.next = (self.next + len(fns)) % count

    def close(self) -> None:
        for q in self.queues:
            q.put(None)
        for t in self.threads:
            t.join(timeout=10)
