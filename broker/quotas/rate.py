"""A rate over sample windows, measured as Kafka's quota sensors measure it (a ``Rate`` over a
``SampledStat``): ``samples`` windows of ``window_ms`` each, a window starting at the first record
after the previous one is full, windows older than all of them together forgotten, and the
elapsed time padded to at least ``samples - 1`` full windows so that a burst at the start is not
divided by a tiny interval. Pure: the caller passes the time."""

from __future__ import annotations


class Rate:
    __slots__ = ("samples", "window_ms", "starts", "values", "current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(samples, 1)
        self.window_ms = max(window_ms, 1)
        self.starts: list[int] = []
        self.values: list[float] = []
        self.current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self.starts:
            self.starts.append(now_ms)
            self.values.append(0.0)
            self.current = 0
        elif now_ms - self.starts[self.current] >= self.window_ms:
            self.current = (self.current + 1) % self.samples
            if self.current >= len(self.starts):
                self.starts.append(now_ms)
                self.values.append(0.0)
            else:
                self.starts[self.current] = now_ms
                self.values[self.current] = 0.0
        self.values[self.current] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self.starts):
            if now_ms - start >= expire:
                self.starts[i] = now_ms
                self.values[i] = 0.0

    def window_size_ms(self, now_ms: int) -> float:
        """The interval the rate divides by: from the oldest window's start, at least
        ``samples - 1`` full windows."""
        self._purge(now_ms)
        oldest = min(self.starts) if self.starts else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return float(max(elapsed, 1))

    def measure(self, now_ms: int) -> float:
        """Units per second."""
        size = self.window_size_ms(now_ms)
        return sum(self.values) / (size / 1000.0)


def throttle_ms(rate: Rate, bound: float, now_ms: int) -> int:
    """Kafka's throttle time of a quota exceeded: how long, with nothing more recorded, until the
    rate over the current window is back at the bound; 0 within the bound."""
    observed = rate.measure(now_ms)
    if observed <= bound:
        return 0
    return round((observed - bound) / bound * rate.window_size_ms(now_ms))
