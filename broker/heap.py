"""How the broker's process uses Python's cyclic garbage collector.

Reference counting frees almost everything the broker allocates; the cyclic collector is there for
the rest, and a collection of its oldest generation examines every tracked object in the process
and stops the event loop while it does. With thousands of members (a connection, a member and a
committed offset each, and the requests in flight) that heap has hundreds of thousands of
objects, and at CPython's default thresholds the young generations were collected every few
milliseconds: requests still waiting for their write at that moment were promoted, full
collections followed every second or two and took 100-700 ms each, and the requests they delayed
were promoted in turn. Measured with gc.callbacks at 5,000 members: a full collection every
~1.6 s of ~150 ms, with heartbeat p99 at 400 ms.

So: the young generation is collected only after many more net allocations than CPython's 700,
which lets a request finish (and its objects die) before a collection can promote them; and once
startup is done (modules, message tables, the state replayed from the log), what exists is
frozen, kept out of every later collection, since it lives as long as the process. A full
collection then comes only when the long-lived population has really grown by a quarter (members
joining), and its cost is that of the live connections and groups, not of the code that serves
them. The pause of every collection is exported as ``kcoord_gc_pause_seconds``.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import Histogram

# Net allocations of tracked objects (allocations minus frees) between young collections. A request
# allocates and frees a few dozen, so while the broker serves a steady load the count hardly moves
# and young collections (which would promote whatever is in flight) hardly happen; they come while
# the population grows (connections and members arriving), and then each examines about this many
# live objects: ~10 ms on the machine measured, where 50,000 took ~20 ms.
YOUNG_THRESHOLD = 20_000
# CPython's defaults: young collections between middle ones, middle ones between considering a
# full one (which also waits for the long-lived population to have grown by a quarter).
MIDDLE_THRESHOLD = 10
OLD_THRESHOLD = 10

PAUSES = Histogram("kcoord_gc_pause_seconds", "Time the event loop stood still for one garbage collection, "
                   "by the oldest generation it collected.", ["generation"],
                   buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))
_by_generation = [PAUSES.labels(str(g)) for g in range(3)]
_started = [0.0]


def _timed(phase: str, info: dict[str, Any]) -> None:
    # Called by the interpreter around every collection, in whichever thread triggered it.
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        _by_generation[info["generation"]].observe(time.perf_counter() - _started[0])


def configure() -> None:
    """Thresholds for a long-running server; pauses measured from now on. Idempotent."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    if _timed not in gc.callbacks:
        gc.callbacks.append(_timed)


def settle() -> None:
    """Startup is over: collect what it left behind, then keep everything that remains out of later
    collections. Frozen objects are still freed when their last reference goes; only garbage
    cycles among them stay, and those can never amount to more than what startup made."""
    gc.collect()
    gc.freeze()
