"""The flush threads: a submission's completion comes back once, on trio's thread, in order."""

from __future__ import annotations

import threading

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
