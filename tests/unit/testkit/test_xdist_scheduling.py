"""The suite's xdist scheduler when a test hangs inside C: a pytest run on two workers, one test of
which deadlocks on a pthread mutex (no Python code runs again in that thread, so pytest-timeout
cannot end it), ends on its own with that test failed once and every other test run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from testkit.stress import read_report

ROOT = Path(__file__).resolve().parents[3]
# Long enough that no test of the inner run that returns at once reaches it on a loaded machine.
STUCK_AFTER_S = 8
# The inner run's bound: far past the stuck test's seconds and two workers' start-up under load.
RUN_DEADLINE_S = 240

CONFTEST = """
from testkit.xdist_scheduling import SharedProcessScheduling


def pytest_xdist_make_scheduler(config, log):
    return SharedProcessScheduling(config, log, lambda nodeid: nodeid.split("::", 1)[0])
"""

# Relocking a default (non-recursive) mutex its thread holds waits forever, inside libc.
STUCK = """
import ctypes


def test_c0_stuck():
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # zeroed: PTHREAD_MUTEX_INITIALIZER
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)
"""


def quick_tests(module: str, count: int) -> str:
    return "".join(f"\n\ndef test_{module}{i}():\n    pass\n" for i in range(count))


def write_tests(folder: Path) -> set[str]:
    """Modules before and after the stuck one, so that the worker that hangs holds a finished module
    beside it and the other worker has run out of modules to take when it hangs; the stuck test's
    module has more tests after it. Returns the tests that must pass."""
    (folder / "pytest.ini").write_text(
        f"[pytest]\nfaulthandler_timeout = {STUCK_AFTER_S}\nfaulthandler_exit_on_timeout = true\n")
    (folder / "conftest.py").write_text(CONFTEST)
    passing: set[str] = set()
    for module in ("a", "b", "c", "d", "e"):
        count = 2 if module == "c" else 3  # as many tests in each module: xdist hands them out in order
        body = quick_tests(module, count)
        if module == "c":
            body = STUCK + body
        (folder / f"test_{module}.py").write_text(body)
        passing |= {f"test_{module}.py::test_{module}{i}" for i in range(count)}
    return passing


def run_pytest(folder: Path, workers: int) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-n", str(workers), "-p", "no:cacheprovider",
               "-o", "junit_family=xunit1", "--junitxml", str(folder / "report.xml"), str(folder)]
    # Not the outer run's own settings (PYTEST_ADDOPTS, an xdist worker's variables).
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as run:
        try:
            output, _ = run.communicate(timeout=RUN_DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)  # the run and its workers
            output, _ = run.communicate()
            raise AssertionError(f"the run did not end in {RUN_DEADLINE_S} s:\n{output[-4000:]}") from None
        return subprocess.CompletedProcess(command, run.returncode, output)


def test_a_test_stuck_in_c_fails_once_and_every_other_test_runs(tmp_path: Path) -> None:
    passing = write_tests(tmp_path)
    run = run_pytest(tmp_path, workers=2)
    counts, failures = read_report(tmp_path / "report.xml", 1)
    # xdist reports a crashed test outside its phases, which the JUnit report counts as an error.
    assert [(f.kind, f.test_id) for f in failures] == [("error", "test_c.py::test_c0_stuck")], run.stdout
    assert "crashed while running 'test_c.py::test_c0_stuck'" in failures[0].message, run.stdout
    assert counts == {"passed": len(passing), "failed": 0, "error": 1, "skipped": 0}, run.stdout
    assert run.returncode == 1, run.stdout
