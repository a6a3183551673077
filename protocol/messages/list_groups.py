"""ListGroups (API key 16): every group this coordinator owns; flexible from v3."""

from protocol.schema import INT16, INT32, STRING, ArrayOf, array, f, message

ListGroupsRequest = message(
    "ListGroupsRequest",
    [
        f("states_filter", ArrayOf(STRING), "4+"),
        f("types_filter", ArrayOf(STRING), "5+"),
    ],
    api_key=16,
    valid="0-5",
    flexible="3+",
)

ListGroupsResponse = message(
    "ListGroupsResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f("error_code", INT16),
        f(
            "groups",
            array(
                "ListedGroup",
                f("group_id", STRING),
                f("protocol_type", STRING),
                f("group_state", STRING, "4+", ignorable=True),
                f("group_type", STRING, "5+", ignorable=True),
            ),
        ),
    ],
    api_key=16,
    valid="0-5",
    flexible="3+",
)
