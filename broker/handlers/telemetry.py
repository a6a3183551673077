"""GetTelemetrySubscriptions and PushTelemetry (KIP-714): clients learn which of their metrics to
push and push them; the broker keeps the last push of each client instance and exports it on
/metrics (broker/telemetry/service.py)."""

from __future__ import annotations

from broker.network.router import Request
from broker.observability import logs
from broker.telemetry.otlp import OtlpError, metric_points
from broker.telemetry.service import TelemetryService
from protocol.errors import DecodeError, ErrorCode
from protocol.messages.get_telemetry_subscriptions import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
)
from protocol.messages.push_telemetry import PushTelemetryRequest, PushTelemetryResponse
from protocol.record_compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, decompress

# Offered to clients in Kafka's order of preference.
ACCEPTED_COMPRESSION = [ZSTD, LZ4, GZIP, SNAPPY]


def _selectors(req: Request[GetTelemetrySubscriptionsRequest] | Request[PushTelemetryRequest]) -> dict[str, str]:
    conn = req.conn
    selectors = {"client_id": req.client_id, "client_source_address": req.client_host,
                 "client_source_port": str(conn.client_port)}
    name, version = conn.software
    if name:
        selectors.update(client_software_name=name, client_software_version=version)
    return selectors


class TelemetryApis:
    def __init__(self, service: TelemetryService) -> None:
        self.service = service

    def get_subscriptions(self, req: Request[GetTelemetrySubscriptionsRequest]) -> None:
        # Cumulative sums, not Kafka's deltas: the pushed values are exported as they are, and
        # Prometheus wants totals.
        inst = self.service.instance(req.body.client_instance_id, _selectors(req))
        inst.last_get_ms = self.service.clock()
        req.reply.set(GetTelemetrySubscriptionsResponse(
            error_code=ErrorCode.NONE, client_instance_id=inst.instance_id, subscription_id=inst.subscription_id,
            accepted_compression_types=ACCEPTED_COMPRESSION, push_interval_ms=inst.interval_ms,
            telemetry_max_bytes=self.service.max_bytes, delta_temporality=False,
            requested_metrics=list(inst.metrics)))

    def push(self, req: Request[PushTelemetryRequest]) -> None:
        req.reply.set(PushTelemetryResponse(error_code=self._push(req)))

    def _push(self, req: Request[PushTelemetryRequest]) -> int:
        body = req.body
        if body.client_instance_id == bytes(16):
            return ErrorCode.INVALID_REQUEST
        service = self.service
        inst = service.instance(body.client_instance_id, _selectors(req))
        if body.subscription_id != inst.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        now = service.clock()
        if not body.terminating and inst.last_push_ms > inst.last_get_ms and now - inst.last_push_ms < inst.interval_ms:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        inst.last_push_ms = now
        if len(body.metrics) > service.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        if body.compression_type not in (NONE, *ACCEPTED_COMPRESSION):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        try:
            data = decompress(body.compression_type, body.metrics) if body.compression_type != NONE \
                else bytes(body.metrics)
            points = metric_points(data)
        except (DecodeError, OtlpError) as exc:
            logs.warn("telemetry.bad_push", client_id=req.client_id, error=str(exc)[:200])
            return ErrorCode.INVALID_RECORD
        if inst.metrics and "" not in inst.metrics:
            points = [p for p in points if p.name.startswith(inst.metrics)]
        elif not inst.metrics:
            points = []
        # A terminating client's last push stays exported until the instance is forgotten.
        inst.points = points
        logs.debug("telemetry.pushed", client_id=req.client_id, points=len(points), size=len(data))
        return ErrorCode.NONE
