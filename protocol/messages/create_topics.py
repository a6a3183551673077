"""CreateTopics (API key 19); flexible from v5. Kafka spells two top-level fields in camelCase."""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, UUID, ArrayOf, array, f, message

CreateTopicsRequest = message(
    "CreateTopicsRequest",
    [
        f(
            "topics",
            array(
                "CreatableTopic",
                f("name", STRING),
                f("num_partitions", INT32),
                f("replication_factor", INT16),
                f(
                    "assignments",
                    array(
                        "CreatableReplicaAssignment",
                        f("partition_index", INT32),
                        f("broker_ids", ArrayOf(INT32)),
                    ),
                ),
                f(
                    "configs",
                    array(
                        "CreatableTopicConfig",
                        f("name", STRING),
                        f("value", STRING, nullable="0+"),
                    ),
                ),
            ),
        ),
        f("timeout_ms", INT32, default=60000),
        f("validate_only", BOOL, "1+", default=False),
    ],
    api_key=19,
    valid="0-7",
    flexible="5+",
)

CreateTopicsResponse = message(
    "CreateTopicsResponse",
    [
        f("throttle_time_ms", INT32, "2+", ignorable=True),
        f(
            "topics",
            array(
                "CreatableTopicResult",
                f("name", STRING),
                f("topic_id", UUID, "7+", ignorable=True),
                f("error_code", INT16),
                f("error_message", STRING, "1+", nullable="0+", ignorable=True),
                f("topic_config_error_code", INT16, "5+", tag=0, ignorable=True),
                f("num_partitions", INT32, "5+", default=-1, ignorable=True),
                f("replication_factor", INT16, "5+", default=-1, ignorable=True),
                f(
                    "configs",
                    array(
                        "CreatableTopicConfigs",
                        f("name", STRING, "5+"),
                        f("value", STRING, "5+", nullable="5+"),
                        f("read_only", BOOL, "5+"),
                        f("config_source", INT8, "5+", default=-1, ignorable=True),
                        f("is_sensitive", BOOL, "5+"),
                    ),
                    "5+",
                    nullable="5+",
                    ignorable=True,
                ),
            ),
        ),
    ],
    api_key=19,
    valid="0-7",
    flexible="5+",
)
