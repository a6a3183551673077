"""AddOffsetsToTxn (API key 25): a transaction will commit offsets of a consumer group, so the
group's ``__consumer_offsets`` partition joins the transaction."""

from protocol.schema import INT16, INT32, INT64, STRING, f, message

AddOffsetsToTxnRequest = message(
    "AddOffsetsToTxnRequest",
    [
        f("transactional_id", STRING),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("group_id", STRING),
    ],
    api_key=25,
    valid="0-4",
    flexible="3+",
)

AddOffsetsToTxnResponse = message(
    "AddOffsetsToTxnResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
    ],
    api_key=25,
    valid="0-4",
    flexible="3+",
)
