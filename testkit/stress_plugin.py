"""A pytest plugin of the stress command (testkit/stress.py): writes, to the file that
``KCOORD_STRESS_PROGRESS`` names, a line when a test starts and when it ends, so that a run stopped
at its timeout still tells which tests were running. Loaded with ``-p testkit.stress_plugin``; on
pytest-xdist's workers it writes nothing (their controller gets every start and end)."""

from __future__ import annotations

import os

import pytest

PROGRESS = "KCOORD_STRESS_PROGRESS"
_target: list[str] = []  # the progress file, once configured in a process that reports


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(PROGRESS)
    if path and not hasattr(config, "workerinput"):  # not an xdist worker
        _target[:] = [path]


def _write(event: str, nodeid: str) -> None:
    for path in _target:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{event}\t{nodeid}\n")


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _write("start", nodeid)


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _write("end", nodeid)


def unfinished(path: str | os.PathLike[str]) -> list[str]:
    """The tests a progress file shows started and not ended, in the order they started."""
    running: dict[str, None] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                event, _, nodeid = line.rstrip("\n").partition("\t")
                if event == "start":
                    running[nodeid] = None
                elif event == "end":
                    running.pop(nodeid, None)
    except FileNotFoundError:
        return []
    return list(running)
