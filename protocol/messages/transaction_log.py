"""Key and value schemas of the records in ``__transaction_state`` (Kafka's TransactionLogKey and
TransactionLogValue). A key is an int16 version (0) and the transactional id; a value is an int16
version and the transaction's metadata; a null value is a tombstone (an expired transactional id).
Kafka 4 writes value version 1 (flexible, with tagged fields) at transactions version 1 and 2, and
version 0 at level 0. A two-phase commit participant's transaction (KIP-939) is told by its timeout,
Integer.MAX_VALUE."""

from protocol.schema import INT8, INT16, INT32, INT64, STRING, ArrayOf, array, f, message

TransactionLogKey = message(
    "TransactionLogKey",
    [
        f("transactional_id", STRING),
    ],
    valid="0",
)

TransactionLogValue = message(
    "TransactionLogValue",
    [
        f("producer_id", INT64),
        f("previous_producer_id", INT64, "1+", tag=0, default=-1),
        f("next_producer_id", INT64, "1+", tag=1, default=-1),
        f("producer_epoch", INT16),
        # Kafka 4.4 declares it (KIP-939) and never sets it: read, and written only if set.
        f("next_producer_epoch", INT16, "1+", tag=3, default=-1),
        f("transaction_timeout_ms", INT32),
        f("transaction_status", INT8),
        f(
            "transaction_partitions",
            array(
                "PartitionsSchema",
                f("topic", STRING),
                f("partition_ids", ArrayOf(INT32)),
            ),
            nullable="0+",
        ),
        f("transaction_last_update_timestamp_ms", INT64),
        f("transaction_start_timestamp_ms", INT64),
        f("client_transaction_version", INT16, "1+", tag=2, default=0),
    ],
    valid="0-1",
    flexible="1+",
)
