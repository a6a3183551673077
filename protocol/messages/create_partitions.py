"""CreatePartitions (API key 37); flexible from v2. v1 is v0; v3 may answer THROTTLING_QUOTA_EXCEEDED."""

from protocol.schema import BOOL, INT16, INT32, STRING, ArrayOf, array, f, message

CreatePartitionsRequest = message(
    "CreatePartitionsRequest",
    [
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING, about="The topic name."),
                f("count", INT32, about="The new partition count."),
                f(
                    "assignments",
                    array(
                        "Assignment",
                        f("broker_ids", ArrayOf(INT32), about="The assigned broker ids."),
                    ),
                    nullable="0+",
                    about="The replicas of each new partition, or null to let the broker place them.",
                ),
            ),
        ),
        f("timeout_ms", INT32),
        f("validate_only", BOOL),
    ],
    api_key=37,
    valid="0-3",
    flexible="2+",
)

CreatePartitionsResponse = message(
    "CreatePartitionsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "results",
            array(
                "TopicResult",
                f("name", STRING),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
            ),
        ),
    ],
    api_key=37,
    valid="0-3",
    flexible="2+",
)
