"""`kcoord serve --nodes N`: plans the nodes, starts the private etcd when no etcd.endpoints is
given, then the nodes, and supervises them until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import sys
from base64 import urlsafe_b64encode
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import trio

from broker.configs.node_config import BrokerConfig
from broker.observability import logs
from kcoord.launcher.layout import NodePlan, plan_nodes
from kcoord.launcher.private_etcd import PrivateEtcd, find_etcd, healthy
from kcoord.launcher.supervisor import Child, ChildSpec, Supervisor
from storage.checkpoints import CheckpointError, read_meta_properties

# kcoord's exit status for a configuration error or an etcd that refuses the node: no restart cures it.
CONFIG_ERROR = 2
ETCD_START_TIMEOUT_S = 120.0


def cluster_id_for(data_dir: Path, configured: str) -> str:
    """The cluster id every node is given: the configured one, else the one the data directory
    already has (meta.properties, as a single node keeps it), else a new one, which the first node
    to start writes into meta.properties."""
    if configured.strip():
        return configured.strip()
    try:
        existing = read_meta_properties(data_dir).get("cluster.id", "")
    except CheckpointError:
        existing = ""  # the nodes refuse the directory themselves, and say why
    return existing or urlsafe_b64encode(uuid4().bytes).decode().rstrip("=")


def node_specs(config: BrokerConfig, plans: list[NodePlan], config_path: str | None, overrides: list[str],
               etcd_endpoint: str | None) -> list[ChildSpec]:
    """The `kcoord serve` command of each node: the launcher's own file and overrides, then the
    node's (later overrides win), as one node process of the cluster."""
    base = [sys.executable, "-m", "kcoord", "serve", *(["--config", config_path] if config_path else [])]
    shared = [*(o for o in overrides if o.partition("=")[0].strip() != "process.nodes"), "process.nodes=1",
              f"cluster.id={cluster_id_for(config.data_dir, config.get_str('cluster.id'))}"]
    if etcd_endpoint is not None:
        shared.append(f"etcd.endpoints={etcd_endpoint}")
    # A node restarts no sooner than its etcd lease has surely expired, so the new process never
    # meets its previous incarnation's lease and keys: its partitions fail over to the other nodes
    # as for any dead node, and come back with it.
    lease_s = config.get_int("broker.session.timeout.ms") / 1000
    return [ChildSpec("node", [*base, *(a for o in [*shared, *plan.overrides()] for a in ("--override", o))],
                      fields={"node": plan.node_id}, first_restart_s=max(1.0, lease_s),
                      fatal_statuses=frozenset({CONFIG_ERROR})) for plan in plans]


async def _watch_signals(signals: AsyncIterator[int], supervisor: Supervisor) -> None:
    async for signum in signals:
        name = signal.Signals(signum).name
        if supervisor.stop_requested.is_set():
            logs.warn("launcher.killing", signal=name, reason="asked again while stopping")
            supervisor.kill_all()
        else:
            logs.event("launcher.stopping", signal=name)
            supervisor.request_stop()


async def _etcd_ready(etcd: PrivateEtcd, child: Child, supervisor: Supervisor) -> bool:
    with trio.move_on_after(ETCD_START_TIMEOUT_S):
        while child.exits == 0 and not supervisor.stop_requested.is_set():
            if await trio.to_thread.run_sync(healthy, etcd.endpoint):
                logs.event("launcher.etcd_ready", endpoint=etcd.endpoint, data=str(etcd.data_dir))
                return True
            await trio.sleep(0.1)
    return False


async def supervise(nodes: list[ChildSpec], etcd: PrivateEtcd | None) -> int:
    supervisor = Supervisor()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_signals, signals, supervisor)
            etcd_child: Child | None = None
            if etcd is not None:
                etcd_child = await nursery.start(supervisor.keep_running, ChildSpec(
                    "etcd", etcd.argv(), fields={"endpoint": etcd.endpoint}, output=etcd.log_path))
                if not await _etcd_ready(etcd, etcd_child, supervisor):
                    logs.event("launcher.etcd_failed", logging.ERROR, endpoint=etcd.endpoint,
                               log=str(etcd.log_path), reason="the private etcd did not become healthy")
                    supervisor.request_stop(1)
            started: list[Child] = []
            for spec in nodes:
                if supervisor.stop_requested.is_set():
                    break
                started.append(await nursery.start(supervisor.keep_running, spec))
            await supervisor.stop_requested.wait()
            await supervisor.stop(started)  # the nodes first: they hand over through etcd
            if etcd_child is not None:
                await supervisor.stop([etcd_child])
            nursery.cancel_scope.cancel()
    logs.event("launcher.stopped", status=supervisor.exit_code)
    return supervisor.exit_code


def launch(config: BrokerConfig, config_path: str | None, overrides: list[str]) -> int:
    """Runs ``process.nodes`` nodes; the exit status. ConfigError or EtcdMissing when it cannot."""
    plans = plan_nodes(config, config.get_int("process.nodes"))
    etcd = None
    if not config.get_str("etcd.endpoints").strip():
        etcd = PrivateEtcd.under(config.data_dir, find_etcd())
    specs = node_specs(config, plans, config_path, overrides, None if etcd is None else etcd.endpoint)
    return trio.run(supervise, specs, etcd)
