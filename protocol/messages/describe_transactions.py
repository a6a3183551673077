"""DescribeTransactions (API key 65): the state of transactional ids, for operators."""

from protocol.schema import INT16, INT32, INT64, STRING, ArrayOf, array, f, message

DescribeTransactionsRequest = message(
    "DescribeTransactionsRequest",
    [
        f("transactional_ids", ArrayOf(STRING)),
    ],
    api_key=65,
    valid="0",
    flexible="0+",
)

DescribeTransactionsResponse = message(
    "DescribeTransactionsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "transaction_states",
            array(
                "TransactionState",
                f("error_code", INT16),
                f("transactional_id", STRING),
                f("transaction_state", STRING),
                f("transaction_timeout_ms", INT32),
                f("transaction_start_time_ms", INT64),
                f("producer_id", INT64),
                f("producer_epoch", INT16),
                f(
                    "topics",
                    array(
                        "TopicData",
                        f("topic", STRING),
                        f("partitions", ArrayOf(INT32)),
                    ),
                ),
            ),
        ),
    ],
    api_key=65,
    valid="0",
    flexible="0+",
)
