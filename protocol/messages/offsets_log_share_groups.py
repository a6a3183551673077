"""Key and value schemas of the KIP-932 share-group records in ``__consumer_offsets``, as Kafka
4.4 writes them (record types 10 to 15; type 9, ShareGroupPartitionMetadata, was removed before
share groups left early access, and 4.4 does not define it).

As in ``offsets_log_consumer_groups``, each key table declares exactly the version that names its
record type; keys are never flexible; every value has the one version 0, flexible.
"""

from protocol.schema import INT8, INT32, INT64, STRING, UUID, ArrayOf, array, f, message

ShareGroupMemberMetadataKey = message(
    "ShareGroupMemberMetadataKey",
    [f("group_id", STRING), f("member_id", STRING)],
    valid="10",
)

ShareGroupMemberMetadataValue = message(
    "ShareGroupMemberMetadataValue",
    [
        f("rack_id", STRING, nullable="0+"),
        f("client_id", STRING),
        f("client_host", STRING),
        f("subscribed_topic_names", ArrayOf(STRING)),
    ],
    valid="0",
    flexible="0+",
)

ShareGroupMetadataKey = message(
    "ShareGroupMetadataKey",
    [f("group_id", STRING)],
    valid="11",
)

ShareGroupMetadataValue = message(
    "ShareGroupMetadataValue",
    [
        f("epoch", INT32, about="The group epoch."),
        f("metadata_hash", INT64, about="Hash of the subscribed topics' metadata."),
    ],
    valid="0",
    flexible="0+",
)

ShareGroupTargetAssignmentMetadataKey = message(
    "ShareGroupTargetAssignmentMetadataKey",
    [f("group_id", STRING)],
    valid="12",
)

ShareGroupTargetAssignmentMetadataValue = message(
    "ShareGroupTargetAssignmentMetadataValue",
    [
        f("assignment_epoch", INT32),
        f("assignment_timestamp", INT64, tag=0, default=0, ignorable=True),
    ],
    valid="0",
    flexible="0+",
)

ShareGroupTargetAssignmentMemberKey = message(
    "ShareGroupTargetAssignmentMemberKey",
    [f("group_id", STRING), f("member_id", STRING)],
    valid="13",
)

ShareGroupTargetAssignmentMemberValue = message(
    "ShareGroupTargetAssignmentMemberValue",
    [
        f(
            "topic_partitions",
            array(
                "TopicPartition",
                f("topic_id", UUID),
                f("partitions", ArrayOf(INT32)),
            ),
        ),
    ],
    valid="0",
    flexible="0+",
)

ShareGroupCurrentMemberAssignmentKey = message(
    "ShareGroupCurrentMemberAssignmentKey",
    [f("group_id", STRING), f("member_id", STRING)],
    valid="14",
)

ShareGroupCurrentMemberAssignmentValue = message(
    "ShareGroupCurrentMemberAssignmentValue",
    [
        f("member_epoch", INT32),
        f("previous_member_epoch", INT32),
        f("state", INT8, about="The member's state; 0 stable (a share member has nothing to revoke)."),
        f(
            "assigned_partitions",
            array(
                "TopicPartitions",
                f("topic_id", UUID),
                f("partitions", ArrayOf(INT32)),
            ),
        ),
    ],
    valid="0",
    flexible="0+",
)

# One struct for both topic lists, so that both hold instances of the same class.
_TOPIC_PARTITIONS_INFO = array(
    "TopicPartitionsInfo",
    f("topic_id", UUID),
    f("topic_name", STRING),
    f("partitions", ArrayOf(INT32)),
)

ShareGroupStatePartitionMetadataKey = message(
    "ShareGroupStatePartitionMetadataKey",
    [f("group_id", STRING)],
    valid="15",
)

ShareGroupStatePartitionMetadataValue = message(
    "ShareGroupStatePartitionMetadataValue",
    [
        f(
            "initializing_topics",
            _TOPIC_PARTITIONS_INFO,
        ),
        f(
            "initialized_topics",
            _TOPIC_PARTITIONS_INFO,
        ),
        f(
            "deleting_topics",
            array(
                "TopicInfo",
                f("topic_id", UUID),
                f("topic_name", STRING),
            ),
        ),
    ],
    valid="0",
    flexible="0+",
)
