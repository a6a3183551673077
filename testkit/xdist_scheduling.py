"""The test suite's pytest-xdist scheduler: xdist's scope scheduling with the suite's own units of
work, which survives a worker ended in the middle of a test.

A test stuck inside a C library ends its worker (``faulthandler_timeout`` with
``faulthandler_exit_on_timeout``). Then the test it was running is reported failed, once, and the
rest of its worker's work goes to the other workers and the worker started in its place. xdist's
own handling would fail twice here:

- it hands the crashed worker's units over with the stuck test still pending, so each next worker
  runs it, and hangs, again;
- it puts every unit of that worker back, the finished ones too, and a rescheduling hands out one
  unit at a time: a worker given a finished unit is given nothing to run, waits for work that never
  comes (a worker runs its last test only once it is sent the next one or told to shut down), and
  the controller waits for it, forever.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

Unit = dict[str, bool]  # a unit's tests (node ids), each with whether it has run


class SharedProcessScheduling(LoadScopeScheduling):
    """Scope scheduling where ``scope`` names each test's unit of work."""

    def __init__(self, config: pytest.Config, log: Producer | None, scope: Callable[[str], str]) -> None:
        super().__init__(config, log)
        self._scope = scope

    def _split_scope(self, nodeid: str) -> str:
        return self._scope(nodeid)

    def remove_node(self, node: WorkerController) -> str | None:
        """Forget ``node`` (its normal end, or its crash); return the test it was running when it
        crashed (xdist reports it failed), None when it had nothing left to run."""
        workload = self.assigned_work.pop(node)
        # A worker runs its tests in the order it was sent them, and each is marked done when it
        # ends: the first one not done is the one it was running.
        crashed = next((nodeid for unit in workload.values() for nodeid, done in unit.items() if not done),
                       None)
        if crashed is None:
            return None
        for scope, unit in workload.items():
            if crashed in unit:
                unit[crashed] = True  # failed, never run again
            if not all(unit.values()):
                self.workqueue[scope] = unit
        for other in self.nodes:
            self._reschedule(other)
        return crashed
