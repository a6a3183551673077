"""Metadata (API key 3): brokers, topics and partition leaders; flexible from v9.

In v0 an empty topic list means every topic; from v1 that is spelled as a null list."""

from protocol.schema import BOOL, INT16, INT32, STRING, UUID, ArrayOf, array, f, message

MetadataRequest = message(
    "MetadataRequest",
    [
        f(
            "topics",
            array(
                "Topic",
                f("topic_id", UUID, "10+", ignorable=True),
                f("name", STRING, nullable="10+"),
            ),
            nullable="1+",
        ),
        f("allow_auto_topic_creation", BOOL, "4+", default=True),
        f("include_cluster_authorized_operations", BOOL, "8-10"),
        f("include_topic_authorized_operations", BOOL, "8+"),
    ],
    api_key=3,
    valid="0-13",
    flexible="9+",
)

MetadataResponse = message(
    "MetadataResponse",
    [
        f("throttle_time_ms", INT32, "3+", ignorable=True),
        f(
            "brokers",
            array(
                "Broker",
                f("node_id", INT32),
                f("host", STRING),
                f("port", INT32),
                f("rack", STRING, "1+", nullable="1+", default=None, ignorable=True),
            ),
        ),
        f("cluster_id", STRING, "2+", nullable="2+", default=None, ignorable=True),
        f("controller_id", INT32, "1+", default=-1, ignorable=True),
        f(
            "topics",
            array(
                "Topic",
                f("error_code", INT16),
                f("name", STRING, nullable="12+"),
                f("topic_id", UUID, "10+", ignorable=True),
                f("is_internal", BOOL, "1+", default=False, ignorable=True),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("error_code", INT16),
                        f("partition_index", INT32),
                        f("leader_id", INT32),
                        f("leader_epoch", INT32, "7+", default=-1, ignorable=True),
                        f("replica_nodes", ArrayOf(INT32)),
                        f("isr_nodes", ArrayOf(INT32)),
                        f("offline_replicas", ArrayOf(INT32), "5+", ignorable=True),
                    ),
                ),
                f("topic_authorized_operations", INT32, "8+", default=-2147483648),
            ),
        ),
        f("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
        f("error_code", INT16, "13+", ignorable=True),
    ],
    api_key=3,
    valid="0-13",
    flexible="9+",
)
