"""AlterReplicaLogDirs (API key 34), v0-2 (Kafka 4 serves v1+); flexible from v2: move
partitions' replicas to another of the broker's log directories."""

from protocol.schema import INT16, INT32, STRING, ArrayOf, array, f, message

AlterReplicaLogDirsRequest = message(
    "AlterReplicaLogDirsRequest",
    [
        f(
            "dirs",
            array(
                "AlterReplicaLogDir",
                f("path", STRING),
                f(
                    "topics",
                    array(
                        "AlterReplicaLogDirTopic",
                        f("name", STRING),
                        f("partitions", ArrayOf(INT32)),
                    ),
                ),
            ),
        ),
    ],
    api_key=34,
    valid="0-2",
    flexible="2+",
)

AlterReplicaLogDirsResponse = message(
    "AlterReplicaLogDirsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "results",
            array(
                "AlterReplicaLogDirTopicResult",
                f("topic_name", STRING),
                f(
                    "partitions",
                    array(
                        "AlterReplicaLogDirPartitionResult",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                    ),
                ),
            ),
        ),
    ],
    api_key=34,
    valid="0-2",
    flexible="2+",
)
