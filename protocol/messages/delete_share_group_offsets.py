"""DeleteShareGroupOffsets (API key 92, KIP-932): forgets a share group's share state for whole
topics (the group must be empty). Flexible."""

from protocol.schema import INT16, INT32, STRING, UUID, array, f, message

DeleteShareGroupOffsetsRequest = message(
    "DeleteShareGroupOffsetsRequest",
    [
        f("group_id", STRING),
        f("topics", array("Topic", f("topic_name", STRING))),
    ],
    api_key=92,
    valid="0",
    flexible="0+",
)

DeleteShareGroupOffsetsResponse = message(
    "DeleteShareGroupOffsetsResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=None),
        f(
            "responses",
            array(
                "Topic",
                f("topic_name", STRING),
                f("topic_id", UUID),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
            ),
        ),
    ],
    api_key=92,
    valid="0",
    flexible="0+",
)
