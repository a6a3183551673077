"""DescribeTopicPartitions (API key 75, KIP-966): a topic's partitions page by page, with their
eligible leader replicas; what `kafka-topics --describe` asks a Kafka 4 broker."""

from protocol.schema import BOOL, INT16, INT32, STRING, UUID, ArrayOf, array, f, message, struct

DescribeTopicPartitionsRequest = message(
    "DescribeTopicPartitionsRequest",
    [
        f("topics", array("TopicRequest", f("name", STRING, about="The topic name.")),
          about="The topics to fetch details for."),
        f("response_partition_limit", INT32, default=2000,
          about="The maximum number of partitions included in the response."),
        f(
            "cursor",
            struct(
                "Cursor",
                f("topic_name", STRING, about="The name for the first topic to process."),
                f("partition_index", INT32, about="The partition index to start with."),
            ),
            nullable="0+",
            default=None,
            about="The first topic and partition index to fetch details for.",
        ),
    ],
    api_key=75,
    valid="0",
    flexible="0+",
)

DescribeTopicPartitionsResponse = message(
    "DescribeTopicPartitionsResponse",
    [
        f("throttle_time_ms", INT32, ignorable=True),
        f(
            "topics",
            array(
                "Topic",
                f("error_code", INT16),
                f("name", STRING, nullable="0+"),
                f("topic_id", UUID, ignorable=True),
                f("is_internal", BOOL, default=False, ignorable=True),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("error_code", INT16),
                        f("partition_index", INT32),
                        f("leader_id", INT32),
                        f("leader_epoch", INT32, default=-1, ignorable=True),
                        f("replica_nodes", ArrayOf(INT32)),
                        f("isr_nodes", ArrayOf(INT32)),
                        f("eligible_leader_replicas", ArrayOf(INT32), nullable="0+", default=None,
                          about="The new eligible leader replicas otherwise."),
                        f("last_known_elr", ArrayOf(INT32), nullable="0+", default=None,
                          about="The last known ELR."),
                        f("offline_replicas", ArrayOf(INT32), ignorable=True),
                    ),
                ),
                f("topic_authorized_operations", INT32, default=-2147483648),
            ),
        ),
        f(
            "next_cursor",
            struct(
                "Cursor",
                f("topic_name", STRING),
                f("partition_index", INT32),
            ),
            nullable="0+",
            default=None,
            about="The next topic and partition index to fetch details for.",
        ),
    ],
    api_key=75,
    valid="0",
    flexible="0+",
)
