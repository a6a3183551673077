"""DescribeGroups (API key 15): state, protocol and members of classic groups; flexible from v5."""

from protocol.schema import BOOL, BYTES, INT16, INT32, STRING, ArrayOf, array, f, message

DescribeGroupsRequest = message(
    "DescribeGroupsRequest",
    [
        f("groups", ArrayOf(STRING)),
        f("include_authorized_operations", BOOL, "3+"),
    ],
    api_key=15,
    valid="0-6",
    flexible="5+",
)

DescribeGroupsResponse = message(
    "DescribeGroupsResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f(
            "groups",
            array(
                "DescribedGroup",
                f("error_code", INT16),
                f("error_message", STRING, "6+", nullable="6+", default=None),
                f("group_id", STRING),
                f("group_state", STRING),
                f("protocol_type", STRING),
                f("protocol_data", STRING),
                f(
                    "members",
                    array(
                        "DescribedGroupMember",
                        f("member_id", STRING),
                        f("group_instance_id", STRING, "4+", nullable="4+", default=None, ignorable=True),
                        f("client_id", STRING),
                        f("client_host", STRING),
                        f("member_metadata", BYTES),
                        f("member_assignment", BYTES),
                    ),
                ),
                f("authorized_operations", INT32, "3+", default=-2147483648),
            ),
        ),
    ],
    api_key=15,
    valid="0-6",
    flexible="5+",
)
