"""DeleteGroups (API key 42): deletes empty groups and their offsets; flexible from v2."""

from protocol.schema import INT16, INT32, STRING, ArrayOf, array, f, message

DeleteGroupsRequest = message(
    "DeleteGroupsRequest",
    [
        f("groups_names", ArrayOf(STRING)),
    ],
    api_key=42,
    valid="0-2",
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
            ),
        ),
    ],
    api_key=42,
    valid="0-2",
    flexible="2+",
)
