"""DescribeProducers (API key 61), v0, flexible: the active idempotent and transactional
producers of partitions (KIP-664), what ``kafka-transactions describe-producers`` shows."""

from protocol.schema import INT16, INT32, INT64, STRING, ArrayOf, array, f, message

DescribeProducersRequest = message(
    "DescribeProducersRequest",
    [
        f(
            "topics",
            array(
                "TopicRequest",
                f("name", STRING),
                f("partition_indexes", ArrayOf(INT32)),
            ),
        ),
    ],
    api_key=61,
    valid="0",
    flexible="0+",
)

DescribeProducersResponse = message(
    "DescribeProducersResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "topics",
            array(
                "TopicResponse",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "PartitionResponse",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, nullable="0+", default=None),
                        f(
                            "active_producers",
                            array(
                                "ProducerState",
                                f("producer_id", INT64),
                                f("producer_epoch", INT32),
                                f("last_sequence", INT32, default=-1),
                                f("last_timestamp", INT64, default=-1),
                                f("coordinator_epoch", INT32),
                                f("current_txn_start_offset", INT64, default=-1),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    ],
    api_key=61,
    valid="0",
    flexible="0+",
)
