"""The supervisor of `kcoord serve --nodes N` with small real child processes: a child that dies is
started again, an exit status no restart can cure stops everything, a stop ends every child."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from broker.configs.node_config import BrokerConfig
from kcoord.launcher.layout import plan_nodes
from kcoord.launcher.run import cluster_id_for, node_specs
from kcoord.launcher.supervisor import Child, ChildSpec, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone too, only not yet reaped (by a parent other than the test).
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_a_child_that_dies_is_started_again_and_a_stop_ends_every_child() -> None:
    async def main() -> tuple[list[int], list[int]]:
        supervisor = Supervisor()
        async with trio.open_nursery() as nursery:
            flaky: Child = await nursery.start(supervisor.keep_running, ChildSpec(
                "node", [sys.executable, "-c", "raise SystemExit(1)"], {"node": 1}, first_restart_s=0.01))
            steady: Child = await nursery.start(supervisor.keep_running, ChildSpec("node", SLEEPER, {"node": 2}))
            while len(flaky.pids) < 3:
                await trio.sleep(0.01)
            await supervisor.stop([flaky, steady])
        return flaky.pids, steady.pids

    flaky, steady = trio.run(main)
    assert len(set(flaky)) >= 3
    assert len(steady) == 1 and not _alive(steady[0])


def test_an_exit_status_no_restart_cures_stops_the_supervisor_with_it() -> None:
    async def main() -> tuple[int, Child]:
        supervisor = Supervisor()
        async with trio.open_nursery() as nursery:
            steady: Child = await nursery.start(supervisor.keep_running, ChildSpec("node", SLEEPER, {"node": 1}))
            await nursery.start(supervisor.keep_running, ChildSpec(
                "node", [sys.executable, "-c", "raise SystemExit(2)"], {"node": 2}, fatal_statuses=frozenset({2})))
            await supervisor.stop_requested.wait()
            await supervisor.stop([steady])
        return supervisor.exit_code, steady

    code, steady = trio.run(main)
    assert code == 2
    assert steady.exits == 1 and not _alive(steady.pids[0])


def test_nodes_share_the_cluster_id_and_etcd_and_restart_after_their_lease(tmp_path: Path) -> None:
    config = BrokerConfig.load(None, [f"log.dirs={tmp_path}", "broker.session.timeout.ms=5000"], environ={})
    specs = node_specs(config, plan_nodes(config, 2), "kcoord.toml", ["log.level=INFO"], "http://127.0.0.1:2379")
    cluster_ids = {a for s in specs for a in s.argv if a.startswith("cluster.id=")}
    assert len(cluster_ids) == 1
    for spec in specs:
        assert spec.argv[spec.argv.index("--config") + 1] == "kcoord.toml"
        overrides = [spec.argv[i + 1] for i, a in enumerate(spec.argv) if a == "--override"]
        # The launcher's own overrides first, the node's after (the last one of a name wins).
        assert overrides[0] == "log.level=INFO"
        assert overrides.index("process.nodes=1") > 0 and "etcd.endpoints=http://127.0.0.1:2379" in overrides
        assert spec.first_restart_s == 5.0
    assert [s.fields["node"] for s in specs] == [1, 2]


def test_the_cluster_id_is_the_configured_one_else_the_data_dirs(tmp_path: Path) -> None:
    assert cluster_id_for(tmp_path, "prod") == "prod"
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=kept\n")
    assert cluster_id_for(tmp_path, "") == "kept"
    assert cluster_id_for(tmp_path / "fresh", "") not in ("", "kept")


def test_without_an_etcd_binary_the_launcher_refuses_and_says_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from kcoord import cli
    from kcoord.launcher import private_etcd

    # The broker reads KCOORD_* variables as properties: the test run's own (KCOORD_KAFKA_LIBS, ...)
    # are not the configuration under test.
    for name in [n for n in os.environ if n.startswith("KCOORD_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(private_etcd, "DEBIAN_ETCD", str(tmp_path / "etcd"))
    code = cli.main(["serve", "--nodes", "2", "--override", f"log.dirs={tmp_path / 'data'}"])
    assert code == 2
    assert "apt install etcd-server" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_children_stop_when_the_supervisor_is_killed() -> None:
    script = """
import sys, trio
from kcoord.launcher.supervisor import ChildSpec, Supervisor

async def main():
    supervisor = Supervisor()
    async with trio.open_nursery() as nursery:
        child = await nursery.start(supervisor.keep_running, ChildSpec("node", sys.argv[1:], {"node": 1}))
        await trio.sleep(1)  # well past the start: the child was not forked by a thread that is gone
        print(child.pids[0], flush=True)
        await trio.sleep_forever()

trio.run(main)
"""
    supervisor = subprocess.Popen([sys.executable, "-c", script, *SLEEPER], stdout=subprocess.PIPE,
                                  cwd=Path(__file__).resolve().parents[3])
    assert supervisor.stdout is not None
    child = int(supervisor.stdout.readline())
    assert _alive(child)
    supervisor.kill()
    supervisor.wait()
    deadline = time.monotonic() + 120
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived its supervisor"
        time.sleep(0.05)
