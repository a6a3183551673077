"""The client instances that speak KIP-714 to this broker: the subscription each was given, when it
last asked and pushed, and the metrics it last pushed, exported on /metrics (Kafka itself needs a
plugin to do anything with them).

A client instance gets an id from GetTelemetrySubscriptions (or keeps the one it has), and the
subscription made of every client-metrics subscription that matches it: the union of their metric
prefixes, the shortest of their intervals, and an id that changes when they do. A push is
accepted when it names that id, comes right after a GetTelemetrySubscriptions or a push interval
after the previous push (or is the last, ``terminating``), fits ``telemetry.max.bytes``, and
decodes; its points replace the instance's previous ones. An instance silent for three push
intervals is forgotten, its series with it."""

from __future__ import annotations

import json
import re
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from broker.telemetry.otlp import Point
from broker.telemetry.subscriptions import DEFAULT_INTERVAL_MS, SubscriptionStore

_NAME = re.compile(r"[^a-zA-Z0-9_]")


@dataclass(slots=True)
class Instance:
    instance_id: bytes
    client_id: str
    subscription_id: int = 0
    generation: int = -1
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    last_get_ms: int = 0
    last_push_ms: int = 0
    points: list[Point] = field(default_factory=list)


def subscription_id(instance_id: bytes, metrics: tuple[str, ...], interval_ms: int) -> int:
    """A signed 32-bit id that changes when the subscription does (a CRC of its contents)."""
    crc = zlib.crc32(json.dumps([instance_id.hex(), list(metrics), interval_ms]).encode())
    return crc - (1 << 32) if crc >= 1 << 31 else crc


class TelemetryService:
    def __init__(self, subscriptions: SubscriptionStore, max_bytes: int, clock: Callable[[], int]) -> None:
        self.subscriptions = subscriptions
        self.max_bytes = max_bytes
        self.clock = clock
        self.instances: dict[bytes, Instance] = {}

    def instance(self, instance_id: bytes, selectors: Mapping[str, str]) -> Instance:
        """The instance (a new id for a zero one), its subscription worked out again if the
        subscriptions changed."""
        if instance_id == bytes(16):
            instance_id = uuid.uuid4().bytes
        found = self.instances.get(instance_id)
        if found is None:
            if len(self.instances) % 256 == 255:
                self.forget_silent(self.clock())  # clients come and go between scrapes too
            found = self.instances[instance_id] = Instance(instance_id, selectors.get("client_id", ""))
        if found.generation != self.subscriptions.generation:
            matched = self.subscriptions.matching({**selectors, "client_instance_id": str(uuid.UUID(bytes=instance_id))})
            metrics: list[str] = []
            for s in matched:
                for prefix in s.metrics:
                    item = "" if prefix == "*" else prefix
                    if item not in metrics:
                        metrics.append(item)
            found.metrics = ("",) if "" in metrics else tuple(metrics)
            found.interval_ms = min((s.interval_ms for s in matched), default=DEFAULT_INTERVAL_MS)
            found.subscription_id = subscription_id(instance_id, found.metrics, found.interval_ms)
            found.generation = self.subscriptions.generation
        return found

    def forget_silent(self, now_ms: int) -> None:
        for key, inst in list(self.instances.items()):
            last = max(inst.last_get_ms, inst.last_push_ms)
            if now_ms - last > 3 * inst.interval_ms:
                del self.instances[key]

    # ---- metrics ------------------------------------------------------------------------------

    def families(self) -> Iterable[Any]:
        self.forget_silent(self.clock())
        by_name: dict[str, Metric] = {}
        for inst in list(self.instances.values()):
            base = {"client_instance_id": str(uuid.UUID(bytes=inst.instance_id)), "client_id": inst.client_id}
            for p in inst.points:
                name = "kcoord_client_" + _NAME.sub("_", p.name)
                family = by_name.get(name)
                if family is None:
                    family = by_name[name] = Metric(name, f"Client metric {p.name} pushed by KIP-714 clients "
                                                          f"({p.kind}).", "gauge")
                labels = dict(base)
                for key, value in p.attributes:
                    labels.setdefault(_label(key), value)
                family.add_sample(name, labels, p.value)
        return list(by_name.values())


def _label(key: str) -> str:
    """An attribute's key as a Prometheus label name (letters, digits, _; not a digit first)."""
    name = _NAME.sub("_", key)
    return "_" + name if not name or name[0].isdigit() else name


class _Collector(Collector):
    def __init__(self, service: TelemetryService) -> None:
        self.service = service

    def collect(self) -> Iterable[Any]:
        return self.service.families()


_collector: _Collector | None = None


def install_collector(service: TelemetryService) -> None:
    """Exports the pushed client metrics on /metrics (replacing an earlier broker's in this process)."""
    global _collector
    if _collector is not None:
        REGISTRY.unregister(_collector)
    _collector = _Collector(service)
    REGISTRY.register(_collector)
