"""Quota enforcement, as Kafka's client quota managers do it.

Each answered request is recorded against the quotas that apply to its user and client id
(``store.resolve``): a Produce request's size against ``producer_byte_rate``, a Fetch response's
size against ``consumer_byte_rate``, and the time the broker spent on any request (as a
percentage of one thread) against ``request_percentage``. Each (quota, user tag, client tag) has
one sensor: a ``Rate`` over ``quota.window.num`` windows of ``quota.window.size.seconds``. A rate
above its bound gives a throttle time (``rate.throttle_ms``; request time is capped at one window,
as Kafka caps it; a Fetch asks for no more than the quota lets through in all windows but one);
the response carries the largest in ``throttle_time_ms`` and leaves at once
(KIP-219), and the connection reads nothing more for that long. A throttled Fetch is answered
empty and its bytes are not counted, as Kafka answers it. A ShareFetch counts against
``consumer_byte_rate`` as a Fetch does, and is likewise answered empty when throttled (the
records it acquired come back when their locks expire, as in Kafka 4.4).

Nothing is recorded while no quota is configured: the request path then costs one check."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.network.router import Request
from broker.observability import logs
from broker.quotas.model import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from broker.quotas.rate import Rate, throttle_ms
from broker.quotas.store import QuotaStore, Resolved
from protocol.messages import ApiKey
from protocol.schema import Data

PRODUCE, FETCH, REQUEST = "Produce", "Fetch", "Request"
# A sensor unused this long is dropped, its series with it (Kafka expires quota sensors after an hour).
INACTIVE_SENSOR_MS = 3_600_000
# The first versions whose clients back off by the response's throttle time themselves (KIP-219);
# older ones get their response only once the throttle time is over, as Kafka holds it.
_KIP_219: dict[int, int] = {ApiKey.Produce: 6, ApiKey.Fetch: 8}
_KEY = {PRODUCE: PRODUCER_BYTE_RATE, FETCH: CONSUMER_BYTE_RATE, REQUEST: REQUEST_PERCENTAGE}


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class Sensor:
    """One quota's rate for the clients that share it, and what throttling it has cost them."""

    rate: Rate
    bound: float
    generation: int
    throttle_ms_total: int = 0
    throttled: int = 0
    last_ms: int = 0


@dataclass(slots=True)
class _Pending:
    """A request between its arrival and its answer: when its handler started and returned."""

    size: int
    started: float
    handled: float | None = None
    # A Produce request is charged as it arrives: its throttle time and the sensor charged.
    produce: tuple[int, Sensor | None] = (0, None)


def _user(principal: str) -> str:
    return principal.split(":", 1)[1] if ":" in principal else principal


def fetch_bytes(response: Data) -> int:
    """The record bytes a Fetch response carries (what ``consumer_byte_rate`` counts)."""
    total = 0
    for topic in getattr(response, "responses", None) or ():
        for partition in topic.partitions:
            records = partition.records
            if records:
                total += len(records)
    return total


class QuotaEnforcer:
    def __init__(self, store: QuotaStore, samples: int, window_s: int,
                 clock: Callable[[], int] = monotonic_ms) -> None:
        self.store = store
        self.samples = samples
        self.window_ms = window_s * 1000
        self.clock = clock
        self.sensors: dict[tuple[str, str, str], Sensor] = {}
        # connection_creation_rate, per client address.
        self.ip_sensors: dict[str, Sensor] = {}

    # ---- the request path (called by the router) --------------------------------------------

    def observe(self, req: Request[Data], size: int) -> Callable[[], None] | None:
        """Before a request's handler runs: with quotas configured, its answer will be throttled
        where they are exceeded. Returns what to call when the handler returns. The router calls
        it only while some quota is configured (``watch``)."""
        if not self.store.quotas:
            return None
        pending = _Pending(size, time.perf_counter())
        if req.api_key == ApiKey.Produce:
            # Charged on arrival, and the connection muted at once: requests the client pipelined
            # behind this one wait, as they would in Kafka, which reads one request at a time.
            pending.produce = self.record(PRODUCE, _user(req.principal), req.client_id, size, self.clock())
            mute = req.conn.mute
            if pending.produce[0] > 0 and mute is not None:
                mute(pending.produce[0] / 1000.0, False)
        elif (req.api_key == ApiKey.Fetch and req.version >= 3) or req.api_key == ApiKey.ShareFetch:
            self._cap_fetch(req)
        earlier = req.reply.amend

        def amend(response: Data) -> Data:
            if earlier is not None:
                response = earlier(response)
            return self._throttle(req, pending, response)

        def handled() -> None:
            pending.handled = time.perf_counter()

        req.reply.amend = amend
        return handled

    def _cap_fetch(self, req: Request[Data]) -> None:
        """A fetch asks for no more than its quota lets through in all but one window (Kafka's
        maxValueInQuotaWindow): a larger answer would be throttled however idle the client was."""
        resolved = self.store.resolve(CONSUMER_BYTE_RATE, _user(req.principal), req.client_id)
        if resolved is None:
            return
        cap = max(int(resolved.bound * (self.samples - 1) * self.window_ms / 1000), 1)
        body: Any = req.body
        body.max_bytes = min(body.max_bytes, cap)

    def _sensor(self, kind: str, resolved: Resolved) -> Sensor:
        key = (kind, resolved.user, resolved.client_id)
        sensor = self.sensors.get(key)
        if sensor is None:
            if len(self.sensors) >= 10_000:
                self.expire(self.clock())  # many clients and no scrape: bound the memory
            sensor = self.sensors[key] = Sensor(Rate(self.samples, self.window_ms), resolved.bound,
                                                self.store.generation)
        elif sensor.generation != self.store.generation:
            sensor.bound, sensor.generation = resolved.bound, self.store.generation
        return sensor

    def record(self, kind: str, user: str, client_id: str, value: float, now_ms: int) -> tuple[int, Sensor | None]:
        """Records ``value`` against the quota of this kind that applies; its throttle time."""
        resolved = self.store.resolve(_KEY[kind], user, client_id)
        if resolved is None:
            return 0, None
        sensor = self._sensor(kind, resolved)
        sensor.last_ms = now_ms
        sensor.rate.record(value, now_ms)
        throttle = throttle_ms(sensor.rate, sensor.bound, now_ms)
        if kind == REQUEST:
            throttle = min(throttle, self.window_ms)
        return throttle, sensor

    def _throttle(self, req: Request[Data], pending: _Pending, response: Data) -> Data:
        now = self.clock()
        user, client = _user(req.principal), req.client_id
        charged: list[tuple[int, Sensor | None]] = []
        if req.api_key == ApiKey.Produce:
            charged.append(pending.produce)
        elif req.api_key in (ApiKey.Fetch, ApiKey.ShareFetch):
            size = fetch_bytes(response)
            throttle, sensor = self.record(FETCH, user, client, size, now)
            if throttle > 0 and sensor is not None:
                # Kafka answers a throttled fetch with no data and takes its bytes back.
                sensor.rate.record(-size, now)
                if "responses" in response._fields:
                    fetch: Any = response
                    fetch.responses = []
            charged.append((throttle, sensor))
        spent = (pending.handled or time.perf_counter()) - pending.started
        charged.append(self.record(REQUEST, user, client, spent * 100.0, now))
        throttle, worst = 0, None
        for t, sensor in charged:
            if sensor is not None and t > throttle:
                throttle, worst = t, sensor
        if throttle <= 0 or worst is None:
            return response
        worst.throttle_ms_total += throttle
        worst.throttled += 1
        if "throttle_time_ms" in response._fields:
            throttled: Any = response
            throttled.throttle_time_ms = throttle
        mute = req.conn.mute
        if mute is not None:
            # A client older than KIP-219 does not wait on its own: its response waits.
            mute(throttle / 1000.0, req.version < _KIP_219.get(req.api_key, 0))
        logs.debug("quota.throttled", api=req.api_key, user=user, client_id=client, throttle_ms=throttle)
        return response

    def connection_throttle_ms(self, ip: str) -> int:
        """A new connection from ``ip``: 0 to serve it, or how long to hold it before closing it
        unserved (its IP is over ``connection_creation_rate``; at most one window, and the refused
        connection is not counted, as Kafka's connection quotas do)."""
        if not self.store.quotas:
            return 0
        bound = self.store.resolve_ip(CONNECTION_CREATION_RATE, ip)
        if bound is None:
            return 0
        now = self.clock()
        sensor = self.ip_sensors.get(ip)
        if sensor is None:
            sensor = self.ip_sensors[ip] = Sensor(Rate(self.samples, self.window_ms), bound, self.store.generation)
        sensor.bound, sensor.last_ms = bound, now
        sensor.rate.record(1.0, now)
        throttle = min(throttle_ms(sensor.rate, bound, now), self.window_ms)
        if throttle > 0:
            sensor.rate.record(-1.0, now)
            sensor.throttle_ms_total += throttle
            sensor.throttled += 1
        return throttle

    # ---- metrics ------------------------------------------------------------------------------

    def expire(self, now_ms: int) -> None:
        for key, sensor in list(self.sensors.items()):
            if now_ms - sensor.last_ms > INACTIVE_SENSOR_MS:
                del self.sensors[key]
        for ip, sensor in list(self.ip_sensors.items()):
            if now_ms - sensor.last_ms > INACTIVE_SENSOR_MS:
                del self.ip_sensors[ip]

    def families(self) -> Iterable[Any]:
        now = self.clock()
        self.expire(now)
        labels = ["quota_type", "user", "client_id"]
        rate = GaugeMetricFamily("kcoord_quota_rate", "Measured rate of each quota sensor over its sample windows "
                                 "(bytes/s for Produce and Fetch, percent of a thread for Request).", labels=labels)
        bound = GaugeMetricFamily("kcoord_quota_bound", "The quota each sensor is held to.", labels=labels)
        throttle = CounterMetricFamily("kcoord_quota_throttle_time_ms", "Throttle time given to clients, by quota "
                                       "sensor (milliseconds).", labels=labels)
        throttled = CounterMetricFamily("kcoord_quota_throttled_responses", "Responses that carried a throttle "
                                        "time, by the quota sensor that caused it.", labels=labels)
        for (kind, user, client), sensor in list(self.sensors.items()):
            values = [kind, user, client]
            rate.add_metric(values, sensor.rate.measure(now))
            bound.add_metric(values, sensor.bound)
            throttle.add_metric(values, sensor.throttle_ms_total)
            throttled.add_metric(values, sensor.throttled)
        connections = GaugeMetricFamily("kcoord_quota_connection_creation_rate", "Connections accepted per second "
                                        "from each address that has a connection_creation_rate quota.",
                                        labels=["ip"])
        refused = CounterMetricFamily("kcoord_quota_connections_throttled", "Connections closed unserved for "
                                      "exceeding their address's connection_creation_rate.", labels=["ip"])
        for ip, sensor in list(self.ip_sensors.items()):
            connections.add_metric([ip], sensor.rate.measure(now))
            refused.add_metric([ip], sensor.throttled)
        return (rate, bound, throttle, throttled, connections, refused)


class _Collector(Collector):
    def __init__(self, enforcer: QuotaEnforcer) -> None:
        self.enforcer = enforcer

    def collect(self) -> Iterable[Any]:
        return self.enforcer.families()


_collector: _Collector | None = None


def install_collector(enforcer: QuotaEnforcer) -> None:
    """Exports this broker's quota sensors on /metrics (replacing an earlier broker's in this process)."""
    global _collector
    if _collector is not None:
        REGISTRY.unregister(_collector)
    _collector = _Collector(enforcer)
    REGISTRY.register(_collector)
