"""The broker's garbage-collector settings: young collections rare enough that requests in flight
die before one can promote them, startup's heap frozen out of later collections, pauses timed."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from broker import heap


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    callbacks = list(gc.callbacks)
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    gc.callbacks[:] = callbacks


def pauses(generation: int) -> float:
    return REGISTRY.get_sample_value("kcoord_gc_pause_seconds_sum", {"generation": str(generation)}) or 0.0


def test_configure_raises_the_young_threshold_and_times_collections(restored: None) -> None:
    heap.configure()
    heap.configure()
    young, middle, old = gc.get_threshold()
    assert young >= 10_000, "a young collection every 700 allocations promotes requests in flight"
    assert (middle, old) == (heap.MIDDLE_THRESHOLD, heap.OLD_THRESHOLD)
    assert gc.callbacks.count(heap._timed) == 1
    before = pauses(1)
    gc.collect(1)
    assert pauses(1) > before


def test_settle_freezes_what_startup_left(restored: None) -> None:
    heap.configure()
    kept = [{"member": i} for i in range(1000)]
    heap.settle()
    assert gc.get_freeze_count() >= len(kept)
    assert len(gc.get_objects()) < len(kept), "frozen objects are in no generation a collection examines"
