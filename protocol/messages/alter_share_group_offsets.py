"""AlterShareGroupOffsets (API key 91, KIP-932): sets the start offset of a share group's share
partitions (the group must be empty). Flexible."""

from protocol.schema import INT16, INT32, INT64, STRING, UUID, array, f, message

AlterShareGroupOffsetsRequest = message(
    "AlterShareGroupOffsetsRequest",
    [
        f("group_id", STRING),
        f(
            "topics",
            array(
                "Topic",
                f("topic_name", STRING),
                f("partitions", array("Partition", f("partition_index", INT32), f("start_offset", INT64))),
            ),
        ),
    ],
    api_key=91,
    valid="0",
    flexible="0+",
)

AlterShareGroupOffsetsResponse = message(
    "AlterShareGroupOffsetsResponse",
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
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ],
    api_key=91,
    valid="0",
    flexible="0+",
)
