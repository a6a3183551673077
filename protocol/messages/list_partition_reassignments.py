"""ListPartitionReassignments (API key 46, KIP-455): the reassignments in progress."""

from protocol.schema import INT16, INT32, STRING, ArrayOf, array, f, message

ListPartitionReassignmentsRequest = message(
    "ListPartitionReassignmentsRequest",
    [
        f("timeout_ms", INT32, default=60000),
        f(
            "topics",
            array(
                "Topics",
                f("name", STRING),
                f("partition_indexes", ArrayOf(INT32)),
            ),
            nullable="0+",
            default=None,
            about="The partitions to list, or null for every reassignment.",
        ),
    ],
    api_key=46,
    valid="0",
    flexible="0+",
)

ListPartitionReassignmentsResponse = message(
    "ListPartitionReassignmentsResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f(
            "topics",
            array(
                "OngoingTopicReassignment",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "OngoingPartitionReassignment",
                        f("partition_index", INT32),
                        f("replicas", ArrayOf(INT32)),
                        f("adding_replicas", ArrayOf(INT32)),
                        f("removing_replicas", ArrayOf(INT32)),
                    ),
                ),
            ),
        ),
    ],
    api_key=46,
    valid="0",
    flexible="0+",
)
