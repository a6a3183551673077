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


@pytest.mark.trio
async def test_more_jobs_than_threads_and_overlapping_submissions_all_complete() -> None:
    """Each thread has a queue of its own: jobs beyond the thread count wait in those queues, and a
    submission made while another is running is not lost behind it."""
    threads = SyncThreads(2, name="test-sync")
    gate = threading.Event()
    ran: list[str] = []
    finished: list[list[BaseException | None]] = []
    both = trio.Event()

    def on_done(results: list[BaseException | None]) -> None:
        finished.append(results)
        if len(finished) == 2:
            both.set()

    def held(i: int) -> None:
        gate.wait(5)
        ran.append(f"a{i}")

    try:
        threads.submit([lambda i=i: held(i) for i in range(5)], on_done)
        threads.submit([lambda: ran.append("b0")], on_done)
        gate.set()
        with trio.fail_after(10):
            await both.wait()
        assert sorted(ran) == ["a0", "a1", "a2", "a3", "a4", "b0"]
        assert sorted(len(r) for r in finished) == [1, 5]
        assert all(e is None for r in finished for e in r)
    finally:
        threads.close()
