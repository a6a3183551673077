"""LeaveGroup (API key 13): v0-2 remove one member; v3+ remove a batch (KIP-345)."""

from protocol.schema import INT16, INT32, STRING, array, f, message

LeaveGroupRequest = message(
    "LeaveGroupRequest",
    [
        f("group_id", STRING),
        f("member_id", STRING, "0-2"),
        f(
            "members",
            array(
                "MemberIdentity",
                f("member_id", STRING, "3+"),
                f("group_instance_id", STRING, "3+", nullable="3+", default=None),
                f("reason", STRING, "5+", nullable="5+", default=None, ignorable=True),
            ),
            "3+",
        ),
    ],
    api_key=13,
    valid="0-5",
    flexible="4+",
)

LeaveGroupResponse = message(
    "LeaveGroupResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f("error_code", INT16),
        f(
            "members",
            array(
                "MemberResponse",
                f("member_id", STRING, "3+"),
                f("group_instance_id", STRING, "3+", nullable="3+"),
                f("error_code", INT16, "3+"),
            ),
            "3+",
        ),
    ],
    api_key=13,
    valid="0-5",
    flexible="4+",
)
