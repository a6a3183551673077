"""PushTelemetry (API key 72, KIP-714): a client's metrics as OpenTelemetry MetricsData (protobuf),
compressed with ``compression_type`` (Kafka's record compression codes)."""

from protocol.schema import BOOL, BYTES, INT8, INT16, INT32, UUID, f, message

PushTelemetryRequest = message(
    "PushTelemetryRequest",
    [
        f("client_instance_id", UUID),
        f("subscription_id", INT32),
        f("terminating", BOOL),
        f("compression_type", INT8),
        f("metrics", BYTES),
    ],
    api_key=72,
    valid="0",
    flexible="0+",
)


PushTelemetryResponse = message(
    "PushTelemetryResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
    ],
    api_key=72,
    valid="0",
    flexible="0+",
)
