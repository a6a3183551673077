"""The stress command end to end: runs a small module of deliberately failing, flaky and hanging
tests twice beside a CPU hog, and reports each failure with its run, each run's wall time, the test
a run's timeout stopped, and leaves no process behind (the hog, a process a test moved to a session
of its own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.stress import ROOT

pytestmark = pytest.mark.timeout(300)

# Each inner run ends at this bound (its hanging test sees to that): long enough for a pytest to
# start and run the other tests on a loaded machine (two CPU hogs beside a busy suite took 11 s
# to start one), so what the runs report does not depend on the load.
RUN_TIMEOUT = 30

MODULE = '''
import subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).parent


def test_passes():
    pass


def test_fails():
    assert 1 + 1 == 3, "deliberate"


def test_fails_on_its_first_run():
    marker = HERE / "ran-once"
    first = not marker.exists()
    marker.touch()
    assert not first, "first run"


def test_hangs():
    # A process that leaves the run's process group and ignores Ctrl-C: the command still ends it.
    escaped = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)"],
                               start_new_session=True)
    (HERE / f"escaped-{escaped.pid}").touch()
    time.sleep(600)
'''


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_two_runs_beside_a_hog_report_every_failure_with_its_run(tmp_path: Path) -> None:
    tests = tmp_path / "suite"
    tests.mkdir()
    (tests / "test_deliberate.py").write_text(MODULE)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "testkit.stress", "--runs", "2", "--hogs", "1", "--run-timeout", str(RUN_TIMEOUT),
         # pytest names tests from its rootdir, which it otherwise infers from the files found
         # above the module (under a shared temporary directory, whatever other tests left there).
         "--workers", "0", "--out", str(out), f"--rootdir={tests}", str(tests / "test_deliberate.py")],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=4 * RUN_TIMEOUT)
    text = result.stdout
    assert result.returncode == 1, text + result.stderr
    assert re.search(r"run 1: +[\d.]+ s  exit 2  TIMED OUT, 1 passed, 2 failed", text), text
    assert re.search(r"run 2: +[\d.]+ s  exit 2  TIMED OUT, 2 passed, 1 failed", text), text
    assert "run 1  failed      test_deliberate.py::test_fails  AssertionError: deliberate" in text
    assert "run 1  failed      test_deliberate.py::test_fails_on_its_first_run  AssertionError: first run" in text
    assert "run 1  unfinished  test_deliberate.py::test_hangs  still running at the run's timeout " \
        f"({RUN_TIMEOUT} s)" in text
    assert "run 2  failed      test_deliberate.py::test_fails  AssertionError: deliberate" in text
    assert "run 2  unfinished  test_deliberate.py::test_hangs" in text
    assert "test_deliberate.py::test_fails_on_its_first_run: did not pass in 1 of 2 run(s) (1)" in text
    assert "test_deliberate.py::test_hangs: did not pass in 2 of 2 run(s) (1, 2)" in text
    assert text.rstrip().endswith("== 0 of 2 run(s) passed")
    assert sorted(p.name for p in out.iterdir()) == [f"run-{n}.{ext}" for n in (1, 2)
                                                      for ext in ("log", "progress", "xml")]
    hog = re.search(r"CPU hogs running as PIDs (\d+)", text)
    assert hog is not None, text
    leftovers = [int(p.name.split("-")[1]) for p in tests.glob("escaped-*")]
    assert len(leftovers) == 2
    assert [pid for pid in [int(hog.group(1)), *leftovers] if alive(pid)] == []
