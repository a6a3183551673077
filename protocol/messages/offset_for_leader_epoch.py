"""OffsetForLeaderEpoch (API key 23), v0-4 (Kafka 4 serves v2+); flexible from v4: where a leader
epoch ended, which consumers ask after a leader change to detect a truncated log (KIP-320)."""

from protocol.schema import INT16, INT32, INT64, STRING, array, f, message

OffsetForLeaderEpochRequest = message(
    "OffsetForLeaderEpochRequest",
    [
        f("replica_id", INT32, "3+", default=-2, ignorable=True),
        f(
            "topics",
            array(
                "OffsetForLeaderTopic",
                f("topic", STRING),
                f(
                    "partitions",
                    array(
                        "OffsetForLeaderPartition",
                        f("partition", INT32),
                        f("current_leader_epoch", INT32, "2+", default=-1, ignorable=True),
                        f("leader_epoch", INT32),
                    ),
                ),
            ),
        ),
    ],
    api_key=23,
    valid="0-4",
    flexible="4+",
)

OffsetForLeaderEpochResponse = message(
    "OffsetForLeaderEpochResponse",
    [
        f("throttle_time_ms", INT32, "2+", ignorable=True),
        f(
            "topics",
            array(
                "OffsetForLeaderTopicResult",
                f("topic", STRING),
                f(
                    "partitions",
                    array(
                        "EpochEndOffset",
                        f("error_code", INT16),
                        f("partition", INT32),
                        f("leader_epoch", INT32, "1+", default=-1, ignorable=True),
                        f("end_offset", INT64, default=-1),
                    ),
                ),
            ),
        ),
    ],
    api_key=23,
    valid="0-4",
    flexible="4+",
)
