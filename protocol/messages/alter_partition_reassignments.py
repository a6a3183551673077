"""AlterPartitionReassignments (API key 45, KIP-455): move partitions to other replicas, or cancel a
move (null replicas). v1 adds whether the replication factor may change (KIP-860)."""

from protocol.schema import BOOL, INT16, INT32, STRING, ArrayOf, array, f, message

AlterPartitionReassignmentsRequest = message(
    "AlterPartitionReassignmentsRequest",
    [
        f("timeout_ms", INT32, default=60000),
        f("allow_replication_factor_change", BOOL, "1+", default=True),
        f(
            "topics",
            array(
                "ReassignableTopic",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "ReassignablePartition",
                        f("partition_index", INT32),
                        f("replicas", ArrayOf(INT32), nullable="0+", default=None,
                          about="The new replicas, or null to cancel a pending reassignment."),
                    ),
                ),
            ),
        ),
    ],
    api_key=45,
    valid="0-1",
    flexible="0+",
)

AlterPartitionReassignmentsResponse = message(
    "AlterPartitionReassignmentsResponse",
    [
        f("throttle_time_ms", INT32),
        f("allow_replication_factor_change", BOOL, "1+", default=True, ignorable=True),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f(
            "responses",
            array(
                "ReassignableTopicResponse",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "ReassignablePartitionResponse",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, nullable="0+"),
                    ),
                ),
            ),
        ),
    ],
    api_key=45,
    valid="0-1",
    flexible="0+",
)
