"""Heartbeat (API key 12): a member's liveness signal; flexible from v4."""

from protocol.schema import INT16, INT32, STRING, f, message

HeartbeatRequest = message(
    "HeartbeatRequest",
    [
        f("group_id", STRING),
        f("generation_id", INT32),
        f("member_id", STRING),
        f("group_instance_id", STRING, "3+", nullable="3+", default=None),
    ],
    api_key=12,
    valid="0-4",
    flexible="4+",
)

HeartbeatResponse = message(
    "HeartbeatResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f("error_code", INT16),
    ],
    api_key=12,
    valid="0-4",
    flexible="4+",
)
