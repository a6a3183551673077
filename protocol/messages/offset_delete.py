"""OffsetDelete (API key 47): removes committed offsets of partitions a group no longer consumes."""

from protocol.schema import INT16, INT32, STRING, array, f, message

OffsetDeleteRequest = message(
    "OffsetDeleteRequest",
    [
        f("group_id", STRING),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32),
                    ),
                ),
            ),
        ),
    ],
    api_key=47,
    valid="0",
)

OffsetDeleteResponse = message(
    "OffsetDeleteResponse",
    [
        # Unlike most responses the error code comes before the throttle time.
        f("error_code", INT16),
        f("throttle_time_ms", INT32, ignorable=True),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                    ),
                ),
            ),
        ),
    ],
    api_key=47,
    valid="0",
)
