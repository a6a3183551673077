"""ListTransactions (API key 66): transactional ids known to the coordinator, with filters."""

from protocol.schema import INT16, INT32, INT64, STRING, ArrayOf, array, f, message

ListTransactionsRequest = message(
    "ListTransactionsRequest",
    [
        f("state_filters", ArrayOf(STRING)),
        f("producer_id_filters", ArrayOf(INT64)),
        f("duration_filter", INT64, "1+", default=-1),
        f("transactional_id_pattern", STRING, "2+", nullable="2+", default=None),
    ],
    api_key=66,
    valid="0-2",
    flexible="0+",
)

ListTransactionsResponse = message(
    "ListTransactionsResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("unknown_state_filters", ArrayOf(STRING)),
        f(
            "transaction_states",
            array(
                "TransactionState",
                f("transactional_id", STRING),
                f("producer_id", INT64),
                f("transaction_state", STRING),
            ),
        ),
    ],
    api_key=66,
    valid="0-2",
    flexible="0+",
)
