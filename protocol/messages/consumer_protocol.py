"""The consumer embedded protocol: the opaque bytes a consumer puts in JoinGroup's protocol
metadata (its subscription) and the leader puts in SyncGroup's assignments.

Each blob starts with an int16 version that this table does not include; ``protocol.payloads.consumer_protocol``
reads and writes whole blobs.
"""

from protocol.schema import BYTES, INT32, STRING, ArrayOf, array, f, message

ConsumerProtocolSubscription = message(
    "ConsumerProtocolSubscription",
    [
        f("topics", ArrayOf(STRING)),
        f("user_data", BYTES, nullable="0+", default=None),
        f(
            "owned_partitions",
            array(
                "TopicPartition",
                f("topic", STRING, "1+"),
                f("partitions", ArrayOf(INT32), "1+"),
            ),
            "1+",
            ignorable=True,
        ),
        f("generation_id", INT32, "2+", default=-1, ignorable=True),
        f("rack_id", STRING, "3+", nullable="3+", default=None, ignorable=True),
    ],
    valid="0-3",
)

ConsumerProtocolAssignment = message(
    "ConsumerProtocolAssignment",
    [
        f(
            "assigned_partitions",
            array(
                "TopicPartition",
                f("topic", STRING),
                f("partitions", ArrayOf(INT32)),
            ),
        ),
        f("user_data", BYTES, nullable="0+", default=None),
    ],
    valid="0-3",
)
