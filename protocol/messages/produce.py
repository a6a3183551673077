"""Produce (API key 0), v0-13; flexible from v9, topics by id from v13.

v0-2, which Kafka 4 dropped (KIP-896), carry message sets of the old formats (magic 0 and 1);
they are up-converted to record batches on arrival.
"""

from protocol.schema import INT16, INT32, INT64, RECORDS, STRING, UUID, array, f, message, struct

ProduceRequest = message(
    "ProduceRequest",
    [
        f("transactional_id", STRING, "3+", nullable="3+", default=None),
        f("acks", INT16),
        f("timeout_ms", INT32),
        f(
            "topic_data",
            array(
                "TopicProduceData",
                f("name", STRING, "0-12", ignorable=True),
                f("topic_id", UUID, "13+", ignorable=True),
                f(
                    "partition_data",
                    array(
                        "PartitionProduceData",
                        f("index", INT32),
                        f("records", RECORDS, nullable="0+"),
                    ),
                ),
            ),
        ),
    ],
    api_key=0,
    valid="0-13",
    flexible="9+",
)

ProduceResponse = message(
    "ProduceResponse",
    [
        f(
            "responses",
            array(
                "TopicProduceResponse",
                f("name", STRING, "0-12", ignorable=True),
                f("topic_id", UUID, "13+", ignorable=True),
                f(
                    "partition_responses",
                    array(
                        "PartitionProduceResponse",
                        f("index", INT32),
                        f("error_code", INT16),
                        f("base_offset", INT64),
                        f("log_append_time_ms", INT64, "2+", default=-1, ignorable=True),
                        f("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                        f(
                            "record_errors",
                            array(
                                "BatchIndexAndErrorMessage",
                                f("batch_index", INT32, "8+"),
                                f("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
                            ),
                            "8+",
                            ignorable=True,
                        ),
                        f("error_message", STRING, "8+", nullable="8+", default=None, ignorable=True),
                        f(
                            "current_leader",
                            struct(
                                "LeaderIdAndEpoch",
                                f("leader_id", INT32, "10+", default=-1),
                                f("leader_epoch", INT32, "10+", default=-1),
                            ),
                            "10+",
                            tag=0,
                        ),
                    ),
                ),
            ),
        ),
        f("throttle_time_ms", INT32, "1+", default=0, ignorable=True),
        f(
            "node_endpoints",
            array(
                "NodeEndpoint",
                f("node_id", INT32, "10+"),
                f("host", STRING, "10+"),
                f("port", INT32, "10+"),
                f("rack", STRING, "10+", nullable="10+", default=None),
            ),
            "10+",
            tag=0,
        ),
    ],
    api_key=0,
    valid="0-13",
    flexible="9+",
)
