"""What each node of `kcoord serve --nodes N` is told, derived from the one configuration.

Node ``i`` (0-based) gets ``node.id + i`` and, for every listener, the configured port ``+ i``, so
the first node keeps exactly the configured listeners (``bootstrap.servers=host:9092`` still
reaches the cluster) and the others follow on the next ports. Advertised listeners move with
their listener. Every node serves its own metrics (a Prometheus target per node, as for a cluster
of separate hosts) on the metrics port ``+ i``; the console, which reads the whole cluster as a
client does, runs on the first node only. A port that an endpoint allocated before already has
(with the defaults, the console's 9465 right above metrics' 9464) is skipped: the endpoint takes
the next free number, and those after it follow from there; the first node's ports are never
moved. Port 0 (any free port) stays 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from broker.configs.node_config import BrokerConfig, ConfigError

MAX_PORT = 65535
CONSOLE = "console.listener"


@dataclass(frozen=True)
class NodePlan:
    """The properties one node process runs with on top of the shared configuration."""

    index: int
    node_id: int
    listeners: str
    advertised_listeners: str
    metrics_listener: str
    console_listener: str | None  # None: the configuration has no console to place

    def overrides(self) -> list[str]:
        """``--override`` arguments of `kcoord serve` for this node."""
        props = {"node.id": str(self.node_id), "listeners": self.listeners,
                 "advertised.listeners": self.advertised_listeners, "metrics.listener": self.metrics_listener}
        if self.console_listener is not None:
            props[CONSOLE] = self.console_listener
        return [f"{k}={v}" for k, v in props.items()]


class _Ports:
    """Hands out the ports of the nodes after the first, never one already handed out: the first
    node's (the configured ports) are taken before any other is handed out."""

    def __init__(self, configured: set[int]) -> None:
        self.taken = {p for p in configured if p}

    def series(self, what: str, base: int, count: int) -> list[int]:
        if base == 0:
            return [0] * count
        out = [base]
        for i in range(1, count):
            candidate = max(out[-1] + 1, base + i)
            while candidate in self.taken:
                candidate += 1
            if candidate > MAX_PORT:
                raise ConfigError(f"process.nodes: no port left for {what} of node {i + 1} above {base}")
            self.taken.add(candidate)
            out.append(candidate)
        return out


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _http_endpoint(name: str, text: str, schemes: tuple[str, ...] = ("http",)) -> tuple[str, int, str] | None:
    """(host as written, possibly empty; port; scheme) of an HTTP endpoint property, None when disabled."""
    if not text.strip():
        return None
    parts = urlsplit(text if "://" in text else "http://" + text)
    if parts.scheme not in schemes or parts.port is None:
        raise ConfigError(f"{name}: expected {' or '.join(f'{s}://host:port' for s in schemes)}, got {text!r}")
    return parts.hostname or "", parts.port, parts.scheme


def plan_nodes(config: BrokerConfig, count: int) -> list[NodePlan]:
    """The ``count`` nodes' own properties; ConfigError when their ports do not fit."""
    if count < 1:
        raise ConfigError("process.nodes must be at least 1")
    values: Mapping[str, object] = config.values
    console = _http_endpoint(CONSOLE, str(values[CONSOLE]), ("http", "https")) if CONSOLE in values else None
    metrics = _http_endpoint("metrics.listener", str(values["metrics.listener"]))
    ports = _Ports({s.port for s in config.listeners} | {e[1] for e in (console, metrics) if e})
    listener_ports = {spec.name: ports.series(f"listener {spec.name}", spec.port, count) for spec in config.listeners}
    console_port = console[1] if console else 0
    metrics_ports = ports.series("metrics", metrics[1], count) if metrics else []
    advertise = str(values["advertised.listeners"]).strip() != ""
    first_id = config.get_int("node.id")
    plans = []
    for i in range(count):
        listeners = ",".join(f"{s.name}://{_host(s.host)}:{listener_ports[s.name][i]}" for s in config.listeners)
        advertised = ""
        if advertise:
            # Each advertised address moves by as much as its listener did.
            advertised = ",".join(
                f"{s.name}://{_host(host)}:{port + listener_ports[s.name][i] - s.port if port else 0}"
                for s in config.listeners for host, port in [config.advertised_by_listener[s.name]])
        plans.append(NodePlan(
            index=i, node_id=first_id + i, listeners=listeners, advertised_listeners=advertised,
            metrics_listener=f"http://{_host(metrics[0])}:{metrics_ports[i]}" if metrics else "",
            console_listener=None if CONSOLE not in values else
            (f"{console[2]}://{_host(console[0])}:{console_port}" if console and i == 0 else "")))
    return plans
