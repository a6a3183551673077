"""DeleteGroups (API key 42): deletes empty groups and their offsets; flexible from v2; v3 (Kafka
4.4) adds each group's error message to the response, the request unchanged."""

from protocol.schema import INT16, INT32, STRING, ArrayOf, array, f, message

DeleteGroupsRequest = message(
    "DeleteGroupsRequest",
    [
        f("groups_names", ArrayOf(STRING)),
    ],
    api_key=42,
    valid="0-3",
    flexible="2+",
)

DeleteGroupsResponse = message(
    "DeleteGroupsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "results",
            array(
                "DeletableGroupResult",
                f("group_id", STRING),
                f("error_code", INT16),
                f("error_message", STRING, versions="3+", nullable="3+", default=None, ignorable=True),
            ),
        ),
    ],
    api_key=42,
    valid="0-3",
    flexible="2+",
)
