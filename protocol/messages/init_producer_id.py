"""InitProducerId (API key 22): a producer id and epoch for idempotent or transactional producers.

v6 (two-phase commit, KIP-939) is still marked unstable in Kafka 4.3."""

from protocol.schema import BOOL, INT16, INT32, INT64, STRING, f, message

InitProducerIdRequest = message(
    "InitProducerIdRequest",
    [
        f("transactional_id", STRING, nullable="0+"),
        f("transaction_timeout_ms", INT32),
        f("producer_id", INT64, "3+", default=-1),
        f("producer_epoch", INT16, "3+", default=-1),
        f("enable2_pc", BOOL, "6+", default=False),
        f("keep_prepared_txn", BOOL, "6+", default=False),
    ],
    api_key=22,
    valid="0-6",
    flexible="2+",
)

InitProducerIdResponse = message(
    "InitProducerIdResponse",
    [
        f("throttle_time_ms", INT32, ignorable=True),
        f("error_code", INT16),
        f("producer_id", INT64, default=-1),
        f("producer_epoch", INT16),
        f("ongoing_txn_producer_id", INT64, "6+", default=-1),
        f("ongoing_txn_producer_epoch", INT16, "6+", default=-1),
    ],
    api_key=22,
    valid="0-6",
    flexible="2+",
)
