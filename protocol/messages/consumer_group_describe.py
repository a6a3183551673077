"""ConsumerGroupDescribe (API key 69): KIP-848 groups with their epochs, members, and each member's
current and target assignment. Flexible from v0; v1 (KIP-1099) adds each member's type.
"""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, UUID, ArrayOf, array, f, message, struct

ConsumerGroupDescribeRequest = message(
    "ConsumerGroupDescribeRequest",
    [
        f("group_ids", ArrayOf(STRING)),
        f("include_authorized_operations", BOOL),
    ],
    api_key=69,
    valid="0-1",
    flexible="0+",
)

# One struct for both assignment fields of a member, so that both hold instances of the same
# class (``ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment``).
_ASSIGNMENT = struct(
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
)

ConsumerGroupDescribeResponse = message(
    "ConsumerGroupDescribeResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "groups",
            array(
                "DescribedGroup",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
                f("group_id", STRING),
                f("group_state", STRING, about="Empty, Assigning, Reconciling, Stable or Dead; \"\" on error."),
                f("group_epoch", INT32),
                f("assignment_epoch", INT32),
                f("assignor_name", STRING),
                f(
                    "members",
                    array(
                        "Member",
                        f("member_id", STRING),
                        f("instance_id", STRING, nullable="0+", default=None),
                        f("rack_id", STRING, nullable="0+", default=None),
                        f("member_epoch", INT32),
                        f("client_id", STRING),
                        f("client_host", STRING),
                        f("subscribed_topic_names", ArrayOf(STRING)),
                        f("subscribed_topic_regex", STRING, nullable="0+", default=None),
                        f("assignment", _ASSIGNMENT, about="The current assignment."),
                        f("target_assignment", _ASSIGNMENT),
                        f(
                            "member_type",
                            INT8,
                            "1+",
                            default=-1,
                            ignorable=True,
                            about="-1 unknown, 0 a classic-protocol member, 1 a consumer-protocol member.",
                        ),
                    ),
                ),
                f("authorized_operations", INT32, default=-2147483648),
            ),
        ),
    ],
    api_key=69,
    valid="0-1",
    flexible="0+",
)
