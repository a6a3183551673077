"""JoinGroup (API key 11): the first phase of the classic rebalance protocol; flexible from v6.

v0 has no rebalance timeout (the broker uses the session timeout); v4+ may answer
MEMBER_ID_REQUIRED; v5 adds static membership; v7 adds the protocol type to the response."""

from protocol.schema import BOOL, BYTES, INT16, INT32, STRING, array, f, message

JoinGroupRequest = message(
    "JoinGroupRequest",
    [
        f("group_id", STRING),
        f("session_timeout_ms", INT32),
        f("rebalance_timeout_ms", INT32, "1+", default=-1, ignorable=True),
        f("member_id", STRING),
        f("group_instance_id", STRING, "5+", nullable="5+", default=None),
        f("protocol_type", STRING),
        f(
            "protocols",
            array(
                "Protocol",
                f("name", STRING),
                f("metadata", BYTES),
            ),
        ),
        f("reason", STRING, "8+", nullable="8+", default=None, ignorable=True),
    ],
    api_key=11,
    valid="0-9",
    flexible="6+",
)

JoinGroupResponse = message(
    "JoinGroupResponse",
    [
        f("throttle_time_ms", INT32, "2+", ignorable=True),
        f("error_code", INT16),
        f("generation_id", INT32, default=-1),
        f("protocol_type", STRING, "7+", nullable="7+", default=None, ignorable=True),
        f(
            "protocol_name",
            STRING,
            nullable="7+",
            about='The selected protocol; before v7 a response without one carries "" (null is not encodable).',
        ),
        f("leader", STRING),
        f("skip_assignment", BOOL, "9+", default=False),
        f("member_id", STRING),
        f(
            "members",
            array(
                "Member",
                f("member_id", STRING),
                f("group_instance_id", STRING, "5+", nullable="5+", default=None, ignorable=True),
                f("metadata", BYTES),
            ),
            about="The group's members and their protocol metadata: filled only in the leader's response.",
        ),
    ],
    api_key=11,
    valid="0-9",
    flexible="6+",
)
