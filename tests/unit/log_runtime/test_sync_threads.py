"""The flush threads: a submission's completion comes back once, on trio's thread, in order."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import trio

from broker.log_runtime.sync_threads import SyncThreads


@pytest.mark.trio
async def test_completion_runs_once_on_the_trio_thread_after_every_job() -> None:
    threads = SyncThreads(3, name="test-sync")
    ran: list[int] = []
    gate = threading.Event()

    def job(i: int) -> None:
        gate.wait(5)
        ran.append(i)
        if i == 1:
            raise OSError("disk full")

    completions: list[tuple[str, list[BaseException | None]]] = []
    done = trio.Event()

    def on_done(results: list[BaseException | None]) -> None:
        completions.append((threading.current_thread().name, results))
        done.set()

    try:
        threads.submit([lambda i=i: job(i) for i in range(3)], on_done)
        await trio.sleep(0.05)
        assert completions == []  # nothing completes while a job is still running
        gate.set()
        with trio.fail_after(5):
            await done.wait()
        await trio.sleep(0.05)
        assert sorted(ran) == [0, 1, 2]
        assert len(completions) == 1
        thread, results = completions[0]
        assert thread == threading.current_thread().name
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], OSError)
    finally:
        threads.close()


class _Batch:
    """Stands in for the produced batches a pass hands to a thread."""


@pytest.mark.trio
async def test_an_idle_thread_keeps_nothing_of_its_last_job() -> None:
    """After a burst the threads wait for work; what their last jobs wrote must be freed then, not
    when the next job comes (the broker's memory stayed a pass of batches larger otherwise)."""
    import weakref

    threads = SyncThreads(2, name="test-sync")
    batch = _Batch()
    alive = weakref.ref(batch)
    done = trio.Event()

    def make_job(held: _Batch) -> Callable[[], None]:
        def job() -> None:
            assert held is not None
        return job

    try:
        threads.submit([make_job(batch)], lambda _results: done.set())
        del batch
        with trio.fail_after(5):
            await done.wait()
        await trio.sleep(0.05)  # the thread has gone back to waiting
        assert alive() is None
    finally:
        threads.close()
