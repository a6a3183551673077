"""Fetch (API key 1), v0-18; flexible from v12, topics by id from v13.

v0-3, which Kafka 4 dropped (KIP-896), are served to clients that read only the old message
formats: their records are down-converted (``protocol.legacy_records``).
"""

from protocol.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    array,
    f,
    message,
    struct,
)

FetchRequest = message(
    "FetchRequest",
    [
        f("cluster_id", STRING, "12+", nullable="12+", tag=0, default=None, ignorable=True),
        f("replica_id", INT32, "0-14", default=-1),
        f(
            "replica_state",
            struct(
                "ReplicaState",
                f("replica_id", INT32, "15+", default=-1),
                f("replica_epoch", INT64, "15+", default=-1),
            ),
            "15+",
            tag=1,
        ),
        f("max_wait_ms", INT32),
        f("min_bytes", INT32),
        f("max_bytes", INT32, "3+", default=2147483647, ignorable=True),
        f("isolation_level", INT8, "4+", default=0, ignorable=True),
        f("session_id", INT32, "7+", default=0, ignorable=True),
        f("session_epoch", INT32, "7+", default=-1, ignorable=True),
        f(
            "topics",
            array(
                "Topic",
                f("topic", STRING, "0-12", ignorable=True),
                f("topic_id", UUID, "13+", ignorable=True),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition", INT32),
                        f("current_leader_epoch", INT32, "9+", default=-1, ignorable=True),
                        f("fetch_offset", INT64),
                        f("last_fetched_epoch", INT32, "12+", default=-1),
                        f("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                        f("partition_max_bytes", INT32),
                        f("replica_directory_id", UUID, "17+", tag=0, ignorable=True),
                        f("high_watermark", INT64, "18+", tag=1, default=9223372036854775807, ignorable=True),
                    ),
                ),
            ),
        ),
        f(
            "forgotten_topics_data",
            array(
                "ForgottenTopic",
                f("topic", STRING, "7-12", ignorable=True),
                f("topic_id", UUID, "13+", ignorable=True),
                f("partitions", ArrayOf(INT32), "7+"),
            ),
            "7+",
        ),
        f("rack_id", STRING, "11+", default="", ignorable=True),
    ],
    api_key=1,
    valid="0-18",
    flexible="12+",
)

FetchResponse = message(
    "FetchResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f("error_code", INT16, "7+", ignorable=True),
        f("session_id", INT32, "7+", default=0),
        f(
            "responses",
            array(
                "FetchableTopicResponse",
                f("topic", STRING, "0-12", ignorable=True),
                f("topic_id", UUID, "13+", ignorable=True),
                f(
                    "partitions",
                    array(
                        "PartitionData",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("high_watermark", INT64),
                        f("last_stable_offset", INT64, "4+", default=-1, ignorable=True),
                        f("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                        f(
                            "diverging_epoch",
                            struct(
                                "EpochEndOffset",
                                f("epoch", INT32, "12+", default=-1),
                                f("end_offset", INT64, "12+", default=-1),
                            ),
                            "12+",
                            tag=0,
                        ),
                        f(
                            "current_leader",
                            struct(
                                "LeaderIdAndEpoch",
                                f("leader_id", INT32, "12+", default=-1),
                                f("leader_epoch", INT32, "12+", default=-1),
                            ),
                            "12+",
                            tag=1,
                        ),
                        f(
                            "snapshot_id",
                            struct(
                                "SnapshotId",
                                f("end_offset", INT64, default=-1),
                                f("epoch", INT32, default=-1),
                            ),
                            "12+",
                            tag=2,
                        ),
                        f(
                            "aborted_transactions",
                            array(
                                "AbortedTransaction",
                                f("producer_id", INT64, "4+"),
                                f("first_offset", INT64, "4+"),
                            ),
                            "4+",
                            nullable="4+",
                            ignorable=True,
                        ),
                        f("preferred_read_replica", INT32, "11+", default=-1),
                        f("records", RECORDS, nullable="0+"),
                    ),
                ),
            ),
        ),
        f(
            "node_endpoints",
            array(
                "NodeEndpoint",
                f("node_id", INT32, "16+"),
                f("host", STRING, "16+"),
                f("port", INT32, "16+"),
                f("rack", STRING, "16+", nullable="16+", default=None),
            ),
            "16+",
            tag=0,
        ),
    ],
    api_key=1,
    valid="0-18",
    flexible="12+",
)
