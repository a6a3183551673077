"""ShareGroupDescribe (API key 77, KIP-932): share groups with their epochs and members, each
member with its assignment. Only v1 exists in Kafka 4.x. Flexible.
"""

from protocol.schema import BOOL, INT16, INT32, STRING, UUID, ArrayOf, array, f, message, struct

ShareGroupDescribeRequest = message(
    "ShareGroupDescribeRequest",
    [
        f("group_ids", ArrayOf(STRING)),
        f("include_authorized_operations", BOOL),
    ],
    api_key=77,
    valid="1",
    flexible="0+",
)

ShareGroupDescribeResponse = message(
    "ShareGroupDescribeResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "groups",
            array(
                "DescribedGroup",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
                f("group_id", STRING),
                f("group_state", STRING, about="Empty, Stable or Dead; \"\" on error."),
                f("group_epoch", INT32),
                f("assignment_epoch", INT32),
                f("assignor_name", STRING),
                f(
                    "members",
                    array(
                        "Member",
                        f("member_id", STRING),
                        f("rack_id", STRING, nullable="0+", default=None),
                        f("member_epoch", INT32),
                        f("client_id", STRING),
                        f("client_host", STRING),
                        f("subscribed_topic_names", ArrayOf(STRING)),
                        f(
                            "assignment",
                            struct(
                                "Assignment",
                                f(
                                    "topic_partitions",
                                    array(
                                        "TopicPartitions",
                                        f("topic_id", UUID),
                                        f("topic_name", STRING),
                                        f("partitions", ArrayOf(INT32)),
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
                f("authorized_operations", INT32, default=-2147483648),
            ),
        ),
    ],
    api_key=77,
    valid="1",
    flexible="0+",
)
