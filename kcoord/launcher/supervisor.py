"""Keeps child processes running, as a process manager does: a child that dies is started again
after a backoff (its first restart after ``first_restart_s``, doubling up to ``MAX_BACKOFF_S``
while it keeps dying young, from the start again once it has run ``SETTLED_S``); on a stop, the
nodes get SIGTERM and are waited for (SIGKILL after ``STOP_GRACE_S``), then the rest. One
structured log line per event. Children run in sessions of their own, so a Ctrl-C at a terminal
reaches the supervisor only, which stops them in order (the nodes before the etcd they hand over
through); they get SIGTERM if the supervisor itself dies (``process``)."""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path

import trio

from broker.observability import logs
from kcoord.launcher.process import ChildProcess, start

MAX_BACKOFF_S = 60.0
SETTLED_S = 60.0
STOP_GRACE_S = 60.0


@dataclass(frozen=True)
class ChildSpec:
    role: str  # "node" or "etcd": the event names' prefix
    argv: list[str]
    fields: dict[str, str | int] = field(default_factory=dict)  # logged with every event of the child
    output: Path | None = None  # None: the supervisor's own stdout and stderr
    first_restart_s: float = 1.0
    # Exit statuses that no restart can cure (kcoord's 2: a configuration error, or etcd refused).
    fatal_statuses: frozenset[int] = frozenset()


def _log(level: int, spec: ChildSpec, what: str, **fields: str | int | float | None) -> None:
    """``launcher.<role>_<what>`` with the child's own fields (node=2) first."""
    merged: dict[str, object] = {**spec.fields, **fields}
    logs.event(f"launcher.{spec.role}_{what}", level, **merged)  # type: ignore[arg-type]


class Child:
    """One supervised child across its restarts."""

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.proc: ChildProcess | None = None
        self.pids: list[int] = []
        self.exits = 0
        self.finished = trio.Event()  # no process of it runs, and none will be started again

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def send(self, signum: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signum)


class Supervisor:
    def __init__(self) -> None:
        self.stop_requested = trio.Event()
        self.exit_code = 0
        self.children: list[Child] = []

    def request_stop(self, exit_code: int = 0) -> None:
        if not self.stop_requested.is_set():
            self.exit_code = exit_code
            self.stop_requested.set()

    def kill_all(self) -> None:
        """SIGKILL to every child now (a second SIGTERM/SIGINT: the operator will not wait)."""
        for child in self.children:
            child.send(signal.SIGKILL)

    async def keep_running(self, spec: ChildSpec, *, task_status: trio.TaskStatus[Child] = trio.TASK_STATUS_IGNORED
                           ) -> None:
        """Runs ``spec`` until a stop is requested, starting it again whenever it dies."""
        child = Child(spec)
        self.children.append(child)
        backoff = spec.first_restart_s
        try:
            while True:
                proc = child.proc = start(spec.argv, spec.output)
                child.pids.append(proc.pid)
                _log(logging.INFO, spec, "started", pid=proc.pid)
                if len(child.pids) == 1:
                    task_status.started(child)
                if self.stop_requested.is_set():
                    proc.send_signal(signal.SIGTERM)  # started while the stop began: it stops too
                began = trio.current_time()
                status = await proc.wait()
                child.exits += 1
                if self.stop_requested.is_set():
                    _log(logging.INFO, spec, "stopped", pid=proc.pid, status=status)
                    return
                if status in spec.fatal_statuses:
                    _log(logging.ERROR, spec, "failed", pid=proc.pid, status=status,
                         reason="exit status no restart can cure; stopping every process")
                    self.request_stop(status)
                    return
                if trio.current_time() - began >= SETTLED_S:
                    backoff = spec.first_restart_s
                _log(logging.WARNING, spec, "exited", pid=proc.pid, status=status, restart_in_s=backoff)
                with trio.move_on_after(backoff):
                    await self.stop_requested.wait()
                if self.stop_requested.is_set():
                    return
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        finally:
            # Only reached with a child still running if the supervisor itself failed: leave no orphan.
            if child.proc is not None and child.proc.returncode is None:
                with trio.CancelScope(shield=True):
                    child.proc.kill()
                    await child.proc.wait()
            child.finished.set()

    async def stop(self, children: list[Child], signum: int = signal.SIGTERM) -> None:
        """Signals ``children`` and waits until none runs (SIGKILL after the grace period)."""
        self.request_stop(self.exit_code)
        for child in children:
            child.send(signum)
        with trio.move_on_after(STOP_GRACE_S):
            for child in children:
                await child.finished.wait()
            return
        for child in children:
            if child.running:
                _log(logging.WARNING, child.spec, "killed", pid=child.proc.pid if child.proc else None,
                     reason=f"still running {STOP_GRACE_S:.0f} s after {signal.Signals(signum).name}")
                child.send(signal.SIGKILL)
        for child in children:
            await child.finished.wait()
