"""EndTxn (API key 26): commit or abort the producer's transaction.

v5 (transactions version 2, KIP-890: the epoch rises with every transaction) is not served."""

from protocol.schema import BOOL, INT16, INT32, INT64, STRING, f, message

EndTxnRequest = message(
    "EndTxnRequest",
    [
        f("transactional_id", STRING),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("committed", BOOL),
    ],
    api_key=26,
    valid="0-5",
    flexible="3+",
)

EndTxnResponse = message(
    "EndTxnResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("producer_id", INT64, "5+", default=-1, ignorable=True),
        f("producer_epoch", INT16, "5+", default=-1, ignorable=True),
    ],
    api_key=26,
    valid="0-5",
    flexible="3+",
)
