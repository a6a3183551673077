"""The fault checker, a short seeded run per seed: three `kcoord serve` nodes on one shared data
dir and their own etcd, idempotent, plain and transactional producers, two consumer groups and
offset observers, while the seed's schedule pauses, kills and restarts nodes, stops etcd and (as
root) cuts nodes off from etcd or from their clients. The checker must find no violation in the
history and the read-back (testkit/faults/checker.py lists what it checks). A failure prints the
seed, the schedule and the history around each violation; ``python -m bench.faults --seed N
--seconds 60`` replays the schedule."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.etcd import ETCD_BINARY
from testkit.faults.runner import run
from tests.integration.netns import netns_available

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SECONDS = 60


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_no_violation_under_the_seeded_faults(seed: int, tmp_path: Path) -> None:
    if not Path(ETCD_BINARY).exists():
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    lines: list[str] = []
    result = run(seed, SECONDS, tmp_path, nodes=3, netns=netns_available(), log=lines.append)
    print("\n".join(lines))
    print(result.report)
    assert result.faults, "the schedule has no fault"
    assert result.verdict.counts["acked writes"] > 0 and result.verdict.counts["reads"] > 0
    assert result.verdict.counts["transactions committed"] > 0 and result.verdict.counts["commits"] > 0
    assert result.verdict.ok, f"seed {seed}: the checker found violations\n" + "\n".join(lines) + "\n" + result.report
