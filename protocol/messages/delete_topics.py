"""DeleteTopics (API key 20); flexible from v4. v6 names topics by name or id."""

from protocol.schema import INT16, INT32, STRING, UUID, ArrayOf, array, f, message

DeleteTopicsRequest = message(
    "DeleteTopicsRequest",
    [
        f(
            "topics",
            array(
                "DeleteTopicState",
                f("name", STRING, "6+", nullable="6+", default=None),
                f("topic_id", UUID, "6+"),
            ),
            "6+",
        ),
        f("topic_names", ArrayOf(STRING), "0-5", ignorable=True),
        f("timeout_ms", INT32),
    ],
    api_key=20,
    valid="0-6",
    flexible="4+",
)

DeleteTopicsResponse = message(
    "DeleteTopicsResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f(
            "responses",
            array(
                "DeletableTopicResult",
                f("name", STRING, nullable="6+"),
                f("topic_id", UUID, "6+", ignorable=True),
                f("error_code", INT16),
                f("error_message", STRING, "5+", nullable="5+", default=None, ignorable=True),
            ),
        ),
    ],
    api_key=20,
    valid="0-6",
    flexible="4+",
)
