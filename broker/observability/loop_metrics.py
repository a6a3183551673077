"""Counters and histograms for the request path, updated without a lock.

prometheus_client's metrics take a mutex on every update (they may be shared across threads);
per request that showed as ~7% of the broker's CPU under commit load. These are updated and
scraped only on the event loop's thread (the /metrics endpoint is served by the same trio loop),
so a plain add is safe. They export exactly what prometheus_client's Counter and Histogram
would: ``<name>_total``; ``_bucket`` (cumulative, ``le``), ``_count`` and ``_sum``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class LoopCounter:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount


class LoopHistogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.total = 0.0

    def observe(self, amount: float) -> None:
        # Bucket i holds observations <= bounds[i], as Prometheus' `le` means.
        self.counts[bisect_left(self.bounds, amount)] += 1
        self.total += amount


class _Family:
    def __init__(self, name: str, doc: str, labelnames: Sequence[str], buckets: tuple[float, ...] | None) -> None:
        self.name = name
        self.doc = doc
        self.labelnames = list(labelnames)
        self.buckets = buckets
        self.children: dict[tuple[str, ...], Any] = {}
        if not self.labelnames:
            self._child(())

    def _child(self, values: tuple[str, ...]) -> Any:
        child = self.children.get(values)
        if child is None:
            child = LoopCounter() if self.buckets is None else LoopHistogram(self.buckets)
            self.children[values] = child
        return child

    def labels(self, *values: str) -> Any:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}")
        return self._child(tuple(str(v) for v in values))

    def family(self) -> Any:
        if self.buckets is None:
            counters = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
            for values, counter in self.children.items():
                counters.add_metric(list(values), counter.value)
            return counters
        histograms = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        les = [floatToGoString(b) for b in self.buckets] + ["+Inf"]
        for values, hist in self.children.items():
            cumulative = 0
            buckets = []
            for le, count in zip(les, hist.counts, strict=True):
                cumulative += count
                buckets.append((le, float(cumulative)))
            histograms.add_metric(list(values), buckets, hist.total)
        return histograms


class LoopMetrics(Collector):
    """The registry-facing side: one collector for every loop metric."""

    def __init__(self) -> None:
        self.families: list[_Family] = []

    def counter(self, name: str, doc: str, labelnames: Sequence[str] = ()) -> Any:
        return self._add(_Family(name, doc, labelnames, None))

    def histogram(self, name: str, doc: str, labelnames: Sequence[str] = (), *, buckets: tuple[float, ...]) -> Any:
        return self._add(_Family(name, doc, labelnames, tuple(sorted(buckets))))

    def _add(self, family: _Family) -> Any:
        """The family, or for one without labels its one child: the bytes counters are updated for
        every read and write, and going through the family cost a call and a lookup each time."""
        self.families.append(family)
        return family if family.labelnames else family.children[()]

    def collect(self) -> Iterable[Any]:
        for family in self.families:
            yield family.family()
