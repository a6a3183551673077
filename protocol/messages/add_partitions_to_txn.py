"""AddPartitionsToTxn (API key 24): a transactional producer names the partitions it will write.

v0-3 carry one transaction; v4+ (which Kafka brokers send each other, KIP-890) carry several,
each optionally ``verify_only`` (is the partition already in the transaction?)."""

from protocol.schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, Field, array, f, message


def _topics(name: str, versions: str) -> Field:
    return f(
        name,
        array(
            "Topic",
            f("name", STRING),
            f("partitions", ArrayOf(INT32)),
        ),
        versions,
    )


AddPartitionsToTxnRequest = message(
    "AddPartitionsToTxnRequest",
    [
        f(
            "transactions",
            array(
                "Transaction",
                f("transactional_id", STRING, "4+"),
                f("producer_id", INT64, "4+"),
                f("producer_epoch", INT16, "4+"),
                f("verify_only", BOOL, "4+", default=False),
                _topics("topics", "4+"),
            ),
            "4+",
        ),
        f("v3_and_below_transactional_id", STRING, "0-3"),
        f("v3_and_below_producer_id", INT64, "0-3"),
        f("v3_and_below_producer_epoch", INT16, "0-3"),
        _topics("v3_and_below_topics", "0-3"),
    ],
    api_key=24,
    valid="0-5",
    flexible="3+",
)


def _topic_results(name: str, versions: str) -> Field:
    return f(
        name,
        array(
            "TopicResult",
            f("name", STRING),
            f(
                "results_by_partition",
                array(
                    "PartitionResult",
                    f("partition_index", INT32),
                    f("partition_error_code", INT16),
                ),
            ),
        ),
        versions,
    )


AddPartitionsToTxnResponse = message(
    "AddPartitionsToTxnResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "4+", ignorable=True),
        f(
            "results_by_transaction",
            array(
                "Result",
                f("transactional_id", STRING, "4+"),
                _topic_results("topic_results", "4+"),
            ),
            "4+",
        ),
        _topic_results("results_by_topic_v3_and_below", "0-3"),
    ],
    api_key=24,
    valid="0-5",
    flexible="3+",
)
