"""GetTelemetrySubscriptions (API key 71, KIP-714): a client asks which of its metrics the broker
wants pushed, how often, and how compressed; a zero client instance id asks for a new one."""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, UUID, ArrayOf, f, message

GetTelemetrySubscriptionsRequest = message(
    "GetTelemetrySubscriptionsRequest",
    [
        f("client_instance_id", UUID),
    ],
    api_key=71,
    valid="0",
    flexible="0+",
)


GetTelemetrySubscriptionsResponse = message(
    "GetTelemetrySubscriptionsResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("client_instance_id", UUID),
        f("subscription_id", INT32),
        f("accepted_compression_types", ArrayOf(INT8)),
        f("push_interval_ms", INT32),
        f("telemetry_max_bytes", INT32),
        f("delta_temporality", BOOL),
        f("requested_metrics", ArrayOf(STRING)),
    ],
    api_key=71,
    valid="0",
    flexible="0+",
)
