"""OffsetCommit (API key 8); flexible from v8.

v1 carries a per-partition commit timestamp, v2-4 a retention time; v10 names topics by id."""

from protocol.schema import INT16, INT32, INT64, STRING, UUID, array, f, message

OffsetCommitRequest = message(
    "OffsetCommitRequest",
    [
        f("group_id", STRING),
        f("generation_id_or_member_epoch", INT32, "1+", default=-1, ignorable=True),
        f("member_id", STRING, "1+", ignorable=True),
        f("group_instance_id", STRING, "7+", nullable="7+", default=None),
        f("retention_time_ms", INT64, "2-4", default=-1, ignorable=True),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING, "0-9", ignorable=True),
                f("topic_id", UUID, "10+", ignorable=True),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32),
                        f("committed_offset", INT64),
                        f("committed_leader_epoch", INT32, "6+", default=-1, ignorable=True),
                        f("commit_timestamp", INT64, "1", default=-1),
                        f("committed_metadata", STRING, nullable="0+"),
                    ),
                ),
            ),
        ),
    ],
    api_key=8,
    valid="0-10",
    flexible="8+",
)

OffsetCommitResponse = message(
    "OffsetCommitResponse",
    [
        f("throttle_time_ms", INT32, "3+", ignorable=True),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING, "0-9", ignorable=True),
                f("topic_id", UUID, "10+", ignorable=True),
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
    api_key=8,
    valid="0-10",
    flexible="8+",
)
