"""TxnOffsetCommit (API key 28): offsets committed inside a transaction, sent to the group
coordinator; they take effect when the transaction's COMMIT marker reaches the group's partition.

v5 (transactions version 2, KIP-890) is declared but not served."""

from protocol.schema import INT16, INT32, INT64, STRING, array, f, message

TxnOffsetCommitRequest = message(
    "TxnOffsetCommitRequest",
    [
        f("transactional_id", STRING),
        f("group_id", STRING),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("generation_id", INT32, "3+", default=-1),
        f("member_id", STRING, "3+", default=""),
        f("group_instance_id", STRING, "3+", nullable="3+", default=None),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32),
                        f("committed_offset", INT64),
                        f("committed_leader_epoch", INT32, "2+", default=-1, ignorable=True),
                        f("committed_metadata", STRING, nullable="0+"),
                    ),
                ),
            ),
        ),
    ],
    api_key=28,
    valid="0-5",
    flexible="3+",
)

TxnOffsetCommitResponse = message(
    "TxnOffsetCommitResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                    ),
                ),
            ),
        ),
    ],
    api_key=28,
    valid="0-5",
    flexible="3+",
)
