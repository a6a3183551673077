"""DescribeShareGroupOffsets (API key 90, KIP-932): each share partition's start offset (the
first record not yet acknowledged or archived) for the groups asked. v1 adds the lag. Flexible."""

from protocol.schema import INT16, INT32, INT64, STRING, UUID, ArrayOf, array, f, message

DescribeShareGroupOffsetsRequest = message(
    "DescribeShareGroupOffsetsRequest",
    [
        f(
            "groups",
            array(
                "Group",
                f("group_id", STRING),
                f(
                    "topics",
                    array("Topic", f("topic_name", STRING), f("partitions", ArrayOf(INT32))),
                    nullable="0+",
                    about="Null: every topic partition the group has share state for.",
                ),
            ),
        ),
    ],
    api_key=90,
    valid="0-1",
    flexible="0+",
)

DescribeShareGroupOffsetsResponse = message(
    "DescribeShareGroupOffsetsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "groups",
            array(
                "Group",
                f("group_id", STRING),
                f(
                    "topics",
                    array(
                        "Topic",
                        f("topic_name", STRING),
                        f("topic_id", UUID),
                        f(
                            "partitions",
                            array(
                                "Partition",
                                f("partition_index", INT32),
                                f("start_offset", INT64),
                                f("leader_epoch", INT32),
                                f("lag", INT64, "1+", default=-1, ignorable=True),
                                f("error_code", INT16),
                                f("error_message", STRING, nullable="0+", default=None),
                            ),
                        ),
                    ),
                ),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
            ),
        ),
    ],
    api_key=90,
    valid="0-1",
    flexible="0+",
)
