"""OffsetFetch (API key 9); flexible from v6.

v0-7 fetch for one group; v8+ fetch for several groups at once; v10 names topics by id."""

from protocol.schema import BOOL, INT16, INT32, INT64, STRING, UUID, ArrayOf, array, f, message

OffsetFetchRequest = message(
    "OffsetFetchRequest",
    [
        f("group_id", STRING, "0-7"),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING, "0-7"),
                f("partition_indexes", ArrayOf(INT32), "0-7"),
            ),
            "0-7",
            nullable="2-7",
        ),
        f(
            "groups",
            array(
                "Group",
                f("group_id", STRING, "8+"),
                f("member_id", STRING, "9+", nullable="9+", default=None, ignorable=True),
                f("member_epoch", INT32, "9+", default=-1, ignorable=True),
                f(
                    "topics",
                    array(
                        "Topics",
                        f("name", STRING, "8-9", ignorable=True),
                        f("topic_id", UUID, "10+", ignorable=True),
                        f("partition_indexes", ArrayOf(INT32), "8+"),
                    ),
                    "8+",
                    nullable="8+",
                ),
            ),
            "8+",
        ),
        f("require_stable", BOOL, "7+", default=False),
    ],
    api_key=9,
    valid="0-10",
    flexible="6+",
)

OffsetFetchResponse = message(
    "OffsetFetchResponse",
    [
        f("throttle_time_ms", INT32, "3+", ignorable=True),
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING, "0-7"),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32, "0-7"),
                        f("committed_offset", INT64, "0-7"),
                        f("committed_leader_epoch", INT32, "5-7", default=-1, ignorable=True),
                        f("metadata", STRING, "0-7", nullable="0-7"),
                        f("error_code", INT16, "0-7"),
                    ),
                    "0-7",
                ),
            ),
            "0-7",
        ),
        f(
            "error_code",
            INT16,
            "2-7",
            default=0,
            ignorable=True,
            about="The group-level error; v0-1 have none and repeat it on every partition instead.",
        ),
        f(
            "groups",
            array(
                "Group",
                f("group_id", STRING, "8+"),
                f(
                    "topics",
                    array(
                        "Topics",
                        f("name", STRING, "8-9", ignorable=True),
                        f("topic_id", UUID, "10+", ignorable=True),
                        f(
                            "partitions",
                            array(
                                "Partitions",
                                f("partition_index", INT32, "8+"),
                                f("committed_offset", INT64, "8+"),
                                f("committed_leader_epoch", INT32, "8+", default=-1, ignorable=True),
                                f("metadata", STRING, "8+", nullable="8+"),
                                f("error_code", INT16, "8+"),
                            ),
                            "8+",
                        ),
                    ),
                    "8+",
                ),
                f("error_code", INT16, "8+", default=0),
            ),
            "8+",
        ),
    ],
    api_key=9,
    valid="0-10",
    flexible="6+",
)
