"""Waiting for several callbacks at once: one primitive for every "answer once all of these have
answered" in the broker (partitions made durable, transactions of one request, produced batches)."""

from __future__ import annotations

from collections.abc import Callable


class Countdown:
    """Calls ``done(True)`` once every expected arrival has come, or ``done(False)`` at the first
    failed one (later arrivals are then ignored): exactly once either way.

    Arrivals are expected up front (``Countdown(n, done)``) or one by one with ``expect()`` before
    ``start()`` (a request that learns how many writes it waits for while queueing them); until
    ``start()``, reaching zero does not finish. ``Countdown(0, done)`` is done at once."""

    __slots__ = ("left", "done", "started")

    def __init__(self, expected: int, done: Callable[[bool], None], *, started: bool = True) -> None:
        self.left = expected
        self.done: Callable[[bool], None] | None = done
        self.started = started
        if started and expected <= 0:
            self._finish(True)

    def expect(self, n: int = 1) -> None:
        self.left += n

    def start(self) -> None:
        self.started = True
        if self.left <= 0:
            self._finish(True)

    def hold(self) -> Callable[[], None]:
        """One more expected arrival, as a function that says it came (calling it again does
        nothing): for work that cannot fail, or whose failure its waiter does not care about."""
        self.left += 1
        arrived = False

        def arrive() -> None:
            nonlocal arrived
            if not arrived:
                arrived = True
                self.arrive()

        return arrive

    def arrive(self, ok: bool = True) -> None:
        """One expected callback came; a failed one (``ok`` false) finishes the countdown now."""
        if self.done is None:
            return
        if not ok:
            self._finish(False)
            return
        self.left -= 1
        if self.left <= 0 and self.started:
            self._finish(True)

    def _finish(self, ok: bool) -> None:
        done, self.done = self.done, None
        if done is not None:
            done(ok)
