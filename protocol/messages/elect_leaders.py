"""ElectLeaders (API key 43): elect the preferred (or an unclean) leader of partitions; flexible
from v2. v1 adds the election type and a top-level error."""

from protocol.schema import INT8, INT16, INT32, STRING, ArrayOf, array, f, message

ElectLeadersRequest = message(
    "ElectLeadersRequest",
    [
        f("election_type", INT8, "1+", about="0 elects the preferred replica, 1 the first live replica."),
        f(
            "topic_partitions",
            array(
                "TopicPartitions",
                f("topic", STRING),
                f("partitions", ArrayOf(INT32)),
            ),
            nullable="0+",
            about="The partitions to elect leaders of; null for every partition.",
        ),
        f("timeout_ms", INT32, default=60000),
    ],
    api_key=43,
    valid="0-2",
    flexible="2+",
)

ElectLeadersResponse = message(
    "ElectLeadersResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "1+"),
        f(
            "replica_election_results",
            array(
                "ReplicaElectionResult",
                f("topic", STRING),
                f(
                    "partition_result",
                    array(
                        "PartitionResult",
                        f("partition_id", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, nullable="0+"),
                    ),
                ),
            ),
        ),
    ],
    api_key=43,
    valid="0-2",
    flexible="2+",
)
