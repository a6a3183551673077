"""TxnOffsetCommit (API key 28): offsets committed inside a transaction, sent to the group
coordinator; they take effect when the transaction's COMMIT marker reaches the group's partition.

v5 is a client of transactions version 2 (KIP-890 part 2: the broker adds the group's offsets
partition to the transaction); v6 names topics by id (KIP-1319) and tells a stale member epoch and
an unknown group as OffsetCommit v9+ does."""

from protocol.schema import INT16, INT32, INT64, STRING, UUID, array, f, message

TxnOffsetCommitRequest = message(
    "TxnOffsetCommitRequest",
    [
        f("transactional_id", STRING),
        f("group_id", STRING),
        f("producer_id", INT64),
        f("producer_epoch", INT16),
        f("generation_id_or_member_epoch", INT32, "3+", default=-1),
        f("member_id", STRING, "3+", default=""),
        f("group_instance_id", STRING, "3+", nullable="3+", default=None),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING, "0-5", ignorable=True),
                f("topic_id", UUID, "6+", ignorable=True),
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
    valid="0-6",
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
                f("name", STRING, "0-5", ignorable=True),
                f("topic_id", UUID, "6+", ignorable=True),
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
    valid="0-6",
    flexible="3+",
)
