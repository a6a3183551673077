"""The fault checker, a short seeded run per seed: three `kcoord serve` nodes on one shared data
dir and their own etcd, idempotent, plain and transactional producers, two consumer groups and
offset observers, while the seed's schedule pauses, kills and restarts nodes, stops etcd and (as
root) cuts nodes off from etcd or from their clients. The checker must find no violation in the
history and the read-back (testkit/faults/checker.py lists what it checks). A failure prints the
seed, the schedule and the history around each violation (librdkafka's log lines counted, the
last of them shown), and a run past its deadline the stacks of its threads; ``python -m
bench.faults --seed N --seconds 60`` replays the schedule.

Each run is `python -m bench.faults` in a process of its own, as an operator runs it, and each of
its dozen librdkafka clients a process of its own under it (testkit/faults/processes.py: a handle
deadlocked inside librdkafka stops only its client, which is replaced); they end with the run, and
a run that does not end in time is stopped (its cluster cleaned up) and fails with its output."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from testkit.etcd import ETCD_BINARY
from testkit.faults.checker import check, load_readback
from testkit.faults.history import History
from testkit.stress import stop_run
from tests.integration.netns import netns_available

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 60
DRAIN_TIMEOUT = 90
RUN_DEADLINE = 720  # 60 s of faults, then writers stopped, read-back and drain: under 3 minutes here
CLIENT_LOG = re.compile(r"^%\d\|[\d.]+\|([A-Z_]+)\|")


def run_checker(seed: int, tmp: Path) -> tuple[int, str, Path]:
    history = tmp / "history.jsonl"
    command = [sys.executable, "-m", "bench.faults", "--seed", str(seed), "--seconds", str(SECONDS),
               "--drain-timeout", str(DRAIN_TIMEOUT), "--history", str(history)]
    if not netns_available():
        command.append("--no-netns")
    output = tmp / "output.txt"
    with open(output, "wb") as sink:
        proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=True)
        try:
            proc.wait(RUN_DEADLINE)
        except subprocess.TimeoutExpired:
            # Where every thread of the run is, before it is stopped (bench.faults prints them).
            os.kill(proc.pid, signal.SIGUSR1)
            stacks_written(output)
            stop_run(proc)  # interrupted as Ctrl-C does: the run stops its cluster and namespaces
            pytest.fail(f"{condensed(output.read_text(errors='replace'))}\n"
                        f"seed {seed}: the run did not end in {RUN_DEADLINE} s (its threads' stacks above)")
    return proc.returncode, output.read_text(errors="replace"), history


def stacks_written(output: Path, most: float = 15.0) -> None:
    """Waits (at most ``most`` seconds) until the run has written its threads' stacks: the dump of
    faulthandler ends with the thread it ran in, "Current thread ..." and its frames."""
    deadline = time.monotonic() + most
    while "Current thread 0x" not in output.read_text(errors="replace") and time.monotonic() < deadline:
        time.sleep(0.2)  # best effort: the failure that follows shows whatever was written


def condensed(text: str, keep: int = 30) -> str:
    """The run's output with librdkafka's own log lines (``%<level>|<time>|<facility>|...``) left
    out but counted, and the last ``keep`` of them shown: a failed run's story, not its noise."""
    lines = text.splitlines()
    client = [line for line in lines if CLIENT_LOG.match(line)]
    counts = Counter(CLIENT_LOG.match(line).group(1) for line in client)  # type: ignore[union-attr]
    story = [line for line in lines if not CLIENT_LOG.match(line)]
    tally = ", ".join(f"{facility} {n}" for facility, n in counts.most_common())
    return "\n".join([*story, f"-- librdkafka logged {len(client)} lines ({tally}); the last {keep}:",
                      *client[-keep:]])


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_no_violation_under_the_seeded_faults(seed: int, tmp_path: Path) -> None:
    if not Path(ETCD_BINARY).exists():
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    code, text, history = run_checker(seed, tmp_path)
    shown = condensed(text)
    assert history.exists(), f"{shown}\nseed {seed}: the run ended with {code} and wrote no history"
    ops = History.load(history).snapshot()
    verdict = check(ops, load_readback(Path(f"{history}.readback.json")), drain_timeout=DRAIN_TIMEOUT)
    assert sum(verdict.faults.values()) > 0, f"{shown}\nseed {seed}: no fault was injected"
    assert verdict.counts["acked writes"] > 0 and verdict.counts["reads"] > 0, f"{shown}\nseed {seed}: {verdict.counts}"
    assert verdict.counts["transactions committed"] > 0 and verdict.counts["commits"] > 0, \
        f"{shown}\nseed {seed}: {verdict.counts}"
    assert verdict.ok, f"{shown}\nseed {seed}: the checker found violations"
    assert code == 0, f"{shown}\nseed {seed}: the run ended with {code}"
