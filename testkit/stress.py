"""Runs chosen tests N times in a row, optionally beside busy-loop CPU hogs, and reports every
failure with its test id and run number, and the wall time of each run.

Each run is one ``pytest`` process (with the suite's xdist workers) in its own process group and
with a bound: past ``--run-timeout`` it is interrupted (SIGINT, as Ctrl-C, so that fixtures stop
their brokers and pytest writes its report), and killed with every process left in its group when
it has not ended ``GRACE`` seconds later. The outcome of each test is read from the run's JUnit XML
report (``--junitxml``); the tests a stopped run was still running, from the progress its plugin
(testkit/stress_plugin.py) writes. The run's whole output is kept beside them.

Run it with ``scripts/stress.sh`` (docs/testing.md). Arguments it does not know go to pytest;
unless they name tests (a path or ``-m``), the integration and differential tiers run
(``-m "integration or differential"``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from testkit.stress_plugin import PROGRESS, unfinished

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SELECTION = ["-m", "integration or differential"]
# Seconds an interrupted run has to tear down and write its report before its group is killed.
GRACE = 60.0
# One busy loop per hog, at the machine's normal priority: it competes with the tests for a core.
HOG = "while True: pass"


@dataclass
class Failure:
    """One test that did not pass in one run: ``kind`` is ``failed`` (the test itself), ``error``
    (its setup or teardown, or its module's collection) or ``unfinished`` (still running when its
    run was stopped)."""

    run: int
    test_id: str
    kind: str
    message: str


@dataclass
class Run:
    number: int
    wall: float
    exit_code: int
    timed_out: bool
    interrupted: bool
    report: Path
    log: Path
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.interrupted and not self.failures


def node_id(case: ET.Element) -> str:
    """pytest's node id of a JUnit ``testcase`` written with ``junit_family=xunit1``: its ``file``
    (the module) and the class names its ``classname`` carries after the module's dotted path."""
    name = case.get("name", "")
    classname = case.get("classname", "")
    file = case.get("file")
    if not file:  # a collection error: the classname is empty or the module's dotted path
        return "::".join(p for p in (classname, name) if p)
    module = file.removesuffix(".py").replace("/", ".")
    classes = classname.removeprefix(module).strip(".")
    return "::".join([file, *(classes.split(".") if classes else []), name])


def read_report(path: Path, run: int) -> tuple[dict[str, int], list[Failure]]:
    """The counts (passed, failed, error, skipped) and the failures of one run's JUnit XML report."""
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    failures: list[Failure] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        if not case.get("name"):
            continue  # the stand-in pytest writes for a test an interrupt cut short
        outcome = "passed"
        for child in case:
            kind = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(child.tag)
            if kind is None:
                continue
            if kind != "skipped":
                message = (child.get("message") or child.text or "").strip().splitlines()
                failures.append(Failure(run, node_id(case), kind, message[0] if message else ""))
            # A test that failed and then errored in teardown is one case with both; count it once.
            if outcome in ("passed", "skipped"):
                outcome = kind
        counts[outcome] += 1
    return counts, failures


def _stat(pid: int) -> tuple[int, int] | None:
    """A process's parent and start time (in clock ticks since boot), from /proc; None once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])


def descendants(pid: int) -> dict[int, int]:
    """The processes below ``pid`` (Linux /proc), each with its start time."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append((int(entry.name), stat[1]))
    found: dict[int, int] = {}
    todo = [pid]
    while todo:
        for child, started in children.get(todo.pop(), []):
            found[child] = started
            todo.append(child)
    return found


def kill_quietly(processes: dict[int, int]) -> None:
    """SIGKILL to each process that still runs: the same PID with the same start time (a PID the
    system has since given to another process is left alone)."""
    for pid, started in processes.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def stop_run(proc: subprocess.Popen[bytes]) -> None:
    """Interrupts a run past its bound, as Ctrl-C does, then kills what is left of it: its process
    group and any process below it that left the group. A second interrupt kills at once."""
    below = descendants(proc.pid)
    with suppress(ProcessLookupError, subprocess.TimeoutExpired, KeyboardInterrupt):
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(GRACE)
    below |= descendants(proc.pid)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    kill_quietly(below)
    proc.wait()


@contextmanager
def hogs(count: int) -> Iterator[list[int]]:
    """``count`` busy-loop processes for as long as the block runs; each is ended by its PID."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            started.append(subprocess.Popen([sys.executable, "-c", HOG], stdin=subprocess.DEVNULL,
                                            start_new_session=True))
        yield [p.pid for p in started]
    finally:
        for p in started:
            p.kill()
        for p in started:
            p.wait()


def run_once(number: int, pytest_args: Sequence[str], workers: int, timeout: float, out: Path) -> Run:
    report = out / f"run-{number}.xml"
    log = out / f"run-{number}.log"
    progress = out / f"run-{number}.progress"
    command = [sys.executable, "-m", "pytest", "-n", str(workers), "--dist", "loadscope",
               f"--junitxml={report}", "-o", "junit_family=xunit1", "-p", "no:cacheprovider",
               "-p", "testkit.stress_plugin", *pytest_args]
    # Not the variables of a pytest this command may itself run under (its own tests).
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env = {**inherited, PROGRESS: str(progress),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    start = time.monotonic()
    timed_out = interrupted = False
    with open(log, "wb") as sink:
        sink.write(f"$ {' '.join(command)}\n".encode())
        sink.flush()
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stop_run(proc)
        except KeyboardInterrupt:  # the stress command itself interrupted: leave nothing running
            interrupted = True
            stop_run(proc)
    run = Run(number, time.monotonic() - start, proc.returncode, timed_out, interrupted, report, log)
    if report.exists():
        with suppress(ET.ParseError):  # a report cut short: the run's exit code and log tell
            run.counts, run.failures = read_report(report, number)
    reported = {f.test_id for f in run.failures}
    why = f"still running at the run's timeout ({timeout:g} s)" if timed_out else "still running when stopped"
    run.failures += [Failure(number, nodeid, "unfinished", why)
                     for nodeid in unfinished(progress) if nodeid not in reported]
    return run


def describe(run: Run) -> str:
    counts = ", ".join(f"{n} {k}" for k, n in run.counts.items() if n) or "no report"
    state = f"TIMED OUT, {counts}" if run.timed_out else f"INTERRUPTED, {counts}" if run.interrupted else counts
    return f"run {run.number}: {run.wall:7.1f} s  exit {run.exit_code}  {state}"


def summary(runs: Sequence[Run], hog_count: int, out: Path) -> str:
    lines = [f"== stress: {len(runs)} run(s) beside {hog_count} CPU hog(s); reports and logs in {out}",
             "wall time per run:"]
    lines += [f"  {describe(run)}" for run in runs]
    failures = [f for run in runs for f in sorted(run.failures, key=lambda f: f.test_id)]
    if failures:
        lines.append(f"failures ({len(failures)}):")
        lines += [f"  run {f.run}  {f.kind:10}  {f.test_id}  {f.message}".rstrip() for f in failures]
        by_test: dict[str, list[int]] = {}
        for f in failures:
            runs_of = by_test.setdefault(f.test_id, [])
            if f.run not in runs_of:
                runs_of.append(f.run)
        lines.append("by test:")
        lines += [f"  {tid}: did not pass in {len(r)} of {len(runs)} run(s) ({', '.join(map(str, r))})"
                  for tid, r in sorted(by_test.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    for run in runs:
        if not run.ok and not run.failures:
            why = ("timed out" if run.timed_out else "interrupted" if run.interrupted
                   else f"exit code {run.exit_code}")
            lines.append(f"run {run.number}: {why} with no failed test in its report, see {run.log}")
    bad = sum(not run.ok for run in runs)
    lines.append(f"== {len(runs) - bad} of {len(runs)} run(s) passed")
    return "\n".join(lines)


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="scripts/stress.sh", allow_abbrev=False,
        description="Run tests N times, optionally beside CPU hogs, and report every failure with "
                    "its test id and run number. Other arguments go to pytest (paths, -k, -m, -x); "
                    "unless they name tests (a path or -m), the integration and differential "
                    "tiers run.")
    parser.add_argument("--runs", type=int, default=3, help="how many times to run the tests (3)")
    parser.add_argument("--hogs", type=int, default=0,
                        help="busy-loop processes beside the tests, one core each at most (0)")
    parser.add_argument("--run-timeout", type=float, default=7200.0,
                        help="seconds one run may take before it is interrupted (7200)")
    parser.add_argument("--workers", type=int, default=int(os.environ.get("KCOORD_TEST_WORKERS", "2")),
                        help="pytest-xdist workers, 0 for none ($KCOORD_TEST_WORKERS, else 2)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for each run's JUnit XML report and output (a new temporary one)")
    args, pytest_args = parser.parse_known_args(argv)
    if args.runs < 1 or args.hogs < 0 or args.workers < 0 or args.run_timeout <= 0:
        parser.error("--runs and --run-timeout must be positive, --hogs and --workers not negative")
    pytest_args = [a for a in pytest_args if a != "--"]
    if not chooses_tests(pytest_args):
        pytest_args = [*DEFAULT_SELECTION, *pytest_args]
    return args, pytest_args


def chooses_tests(pytest_args: Sequence[str]) -> bool:
    """Whether pytest's arguments choose tests themselves: a marker expression or a test path (a
    file or folder that exists, or a node id in one). Otherwise the default tiers run."""
    for arg in pytest_args:
        if arg == "-m" or (arg.startswith("-m") and not arg.startswith("--")):
            return True
        target = arg.split("::", 1)[0]
        if not arg.startswith("-") and target and (ROOT / target).exists():
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    args, pytest_args = parse(sys.argv[1:] if argv is None else argv)
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="kcoord-stress-"))
    out.mkdir(parents=True, exist_ok=True)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM ends runs and hogs as Ctrl-C does

    signal.signal(signal.SIGTERM, stop)
    # Ctrl-C even when started where SIGINT is ignored (a background job of a script): the runs,
    # which are sent SIGINT at their timeout, then start with its default handling (a handler,
    # unlike an ignored signal, is not inherited across exec).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    runs: list[Run] = []
    print(f"stress: pytest {' '.join(pytest_args)}; {args.runs} run(s), {args.hogs} hog(s), "
          f"{args.run_timeout:g} s per run at most; output in {out}", flush=True)
    try:
        with hogs(args.hogs) as pids:
            if pids:
                print(f"stress: CPU hogs running as PIDs {' '.join(map(str, pids))}", flush=True)
            for number in range(1, args.runs + 1):
                run = run_once(number, pytest_args, args.workers, args.run_timeout, out)
                runs.append(run)
                print(f"stress: {describe(run)}", flush=True)
                if run.interrupted:
                    break
    except KeyboardInterrupt:  # between runs, or while the hogs start or stop
        pass
    if len(runs) < args.runs:
        print("stress: interrupted", flush=True)
    print(summary(runs, args.hogs, out), flush=True)
    return 0 if runs and len(runs) == args.runs and all(run.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
