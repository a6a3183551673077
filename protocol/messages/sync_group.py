"""SyncGroup (API key 14): the leader hands out assignments and every member collects its own."""

from protocol.schema import BYTES, INT16, INT32, STRING, array, f, message

SyncGroupRequest = message(
    "SyncGroupRequest",
    [
        f("group_id", STRING),
        f("generation_id", INT32),
        f("member_id", STRING),
        f("group_instance_id", STRING, "3+", nullable="3+", default=None),
        f("protocol_type", STRING, "5+", nullable="5+", default=None, ignorable=True),
        f("protocol_name", STRING, "5+", nullable="5+", default=None, ignorable=True),
        f(
            "assignments",
            array(
                "Assignment",
                f("member_id", STRING),
                f("assignment", BYTES),
            ),
        ),
    ],
    api_key=14,
    valid="0-5",
    flexible="4+",
)

SyncGroupResponse = message(
    "SyncGroupResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f("error_code", INT16),
        f("protocol_type", STRING, "5+", nullable="5+", default=None, ignorable=True),
        f("protocol_name", STRING, "5+", nullable="5+", default=None, ignorable=True),
        f("assignment", BYTES),
    ],
    api_key=14,
    valid="0-5",
    flexible="4+",
)
