"""Client-metrics subscriptions (KIP-714), the config resources of type CLIENT_METRICS (16) that
Kafka's IncrementalAlterConfigs and DescribeConfigs manage: per named subscription the metric
name prefixes to collect (``metrics``, ``*`` for all), how often to push them (``interval.ms``)
and which clients it applies to (``match``: ``selector=regex`` pairs over the client's instance
id, client id, software name and version, source address and port).

One JSON document in the data dir, replaced durably before a change is acknowledged; in a cluster
they live in etcd instead (``etcd_store.py``). ``alter`` (awaited) and ``describe_config`` are what
IncrementalAlterConfigs and DescribeConfigs call for this resource type, with Kafka's checks and
errors."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorCode
from storage import durable_json

CLIENT_METRICS_RESOURCE = 16
SUBSCRIPTIONS_FILE = "kcoord-client-metrics.json"

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
# IncrementalAlterConfigs operations.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, str], ...]

    def applies_to(self, selectors: Mapping[str, str]) -> bool:
        """Every pattern matches its selector's whole value (a client without that selector does
        not match)."""
        for selector, pattern in self.match:
            value = selectors.get(selector)
            if value is None or re.fullmatch(pattern, value) is None:
                return False
        return True


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(frozen=True, slots=True)
class ConfigError:
    code: int
    message: str


def parse(name: str, configs: Mapping[str, str]) -> Subscription | ConfigError:
    """One subscription from its configs, with Kafka's checks."""
    for key in configs:
        if key not in (METRICS, INTERVAL_MS, MATCH):
            return ConfigError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    try:
        interval = int(configs.get(INTERVAL_MS, str(DEFAULT_INTERVAL_MS)))
    except ValueError:
        return ConfigError(ErrorCode.INVALID_REQUEST, f"Invalid value {configs[INTERVAL_MS]} for configuration "
                                                     f"{INTERVAL_MS}: Not a number of type INT")
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        return ConfigError(ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL_MS}, interval must be "
                                                     f"between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    match: list[tuple[str, str]] = []
    for item in _list(configs.get(MATCH, "")):
        selector, eq, pattern = item.partition("=")
        selector = selector.strip()
        if not eq or selector not in SELECTORS:
            return ConfigError(ErrorCode.INVALID_REQUEST, f"Illegal client matching pattern: {item}")
        try:
            re.compile(pattern)
        except re.error:
            return ConfigError(ErrorCode.INVALID_REQUEST, f"Illegal regex pattern for selector {selector}: {pattern}")
        match.append((selector, pattern.strip()))
    metrics = tuple(_list(configs.get(METRICS, "")))
    return Subscription(name, metrics, interval, tuple(match))


class SubscriptionStore:
    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else data_dir / SUBSCRIPTIONS_FILE
        # name -> the configs as set (strings, as DescribeConfigs shows them)
        self.configs: dict[str, dict[str, str]] = {}
        self.subscriptions: dict[str, Subscription] = {}
        # Bumped by every change: clients get new subscription ids.
        self.generation = 0
        # In a cluster: writes one subscription's configs (None: deleted) to etcd.
        self.remote: Callable[[str, dict[str, str] | None], Awaitable[None]] | None = None
        doc = durable_json.read(self.path) if self.path is not None else None
        for name, configs in (doc or {}).get("subscriptions", {}).items():
            parsed = parse(name, configs)
            if isinstance(parsed, Subscription):
                self.configs[name] = dict(configs)
                self.subscriptions[name] = parsed

    def propose(self, name: str, ops: list[tuple[str, int, str | None]]) -> dict[str, dict[str, str]] | ConfigError:
        """Every subscription's configs as they would be after IncrementalAlterConfigs on the
        CLIENT_METRICS resource ``name`` with these (key, operation, value) ops, or the error."""
        if not name:
            return ConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        configs = dict(self.configs.get(name, {}))
        for key, op, value in ops:
            if op == SET:
                configs[key] = value or ""
            elif op == DELETE:
                configs.pop(key, None)
            elif op in (APPEND, SUBTRACT) and key in (METRICS, MATCH):
                items = _list(configs.get(key, ""))
                given = _list(value or "")
                items = items + [i for i in given if i not in items] if op == APPEND else \
                    [i for i in items if i not in given]
                configs[key] = ",".join(items)
            else:
                return ConfigError(ErrorCode.INVALID_CONFIG, f"Operation {op} is not valid for {key}")
        parsed = parse(name, configs)
        if isinstance(parsed, ConfigError):
            return parsed
        proposed = dict(self.configs)
        if configs:
            proposed[name] = configs
        else:
            proposed.pop(name, None)
        return proposed

    def replace(self, configs: dict[str, dict[str, str]]) -> None:
        """Holds these configs from now on (they are durable already)."""
        if configs == self.configs:
            return
        self.configs = configs
        self.subscriptions = {n: s for n, c in configs.items() if isinstance(s := parse(n, c), Subscription)}
        self.generation += 1

    def alter_config(self, name: str, ops: list[tuple[str, int, str | None]],
                     validate_only: bool = False) -> ConfigError | None:
        """IncrementalAlterConfigs on the CLIENT_METRICS resource ``name`` on a single node:
        durable in the data dir before it returns (in a cluster, ``alter``)."""
        proposed = self.propose(name, ops)
        if isinstance(proposed, ConfigError) or validate_only:
            return proposed if isinstance(proposed, ConfigError) else None
        if self.path is not None:
            durable_json.write_durably(self.path, {"version": 1, "subscriptions": proposed})
        self.replace(proposed)
        return None

    async def alter(self, name: str, ops: list[tuple[str, int, str | None]],
                    validate_only: bool = False) -> ConfigError | None:
        """IncrementalAlterConfigs on the CLIENT_METRICS resource ``name``, on a single node or in a
        cluster (committed in etcd, ``etcd_store.py``, before it returns); what the request's
        handler awaits. May raise ``EtcdError`` in a cluster."""
        if self.remote is None:
            return self.alter_config(name, ops, validate_only)
        proposed = self.propose(name, ops)
        if isinstance(proposed, ConfigError) or validate_only:
            return proposed if isinstance(proposed, ConfigError) else None
        await self.remote(name, proposed.get(name))
        self.replace(proposed)
        return None

    def describe_config(self, name: str) -> list[tuple[str, str]]:
        """DescribeConfigs on the CLIENT_METRICS resource ``name``: its three configs (defaults
        for what is not set), as Kafka lists them."""
        configs = self.configs.get(name, {})
        return [(METRICS, configs.get(METRICS, "")), (INTERVAL_MS, configs.get(INTERVAL_MS, str(DEFAULT_INTERVAL_MS))),
                (MATCH, configs.get(MATCH, ""))]

    def matching(self, selectors: Mapping[str, str]) -> list[Subscription]:
        return [s for _, s in sorted(self.subscriptions.items()) if s.applies_to(selectors)]
