"""Key and value schemas of the KIP-848 consumer-group records in ``__consumer_offsets``, as of
Kafka 4.1.

As in ``offsets_log``, each key table declares exactly the version that names its record type
(Kafka 4.x calls it the record's ``apiKey`` and declares the key struct at version 0; the bytes
are the same). Keys are never flexible. Every value is flexible from v0 and has one version, 0:
later fields arrive as tagged fields, as ``metadata_hash`` did in 4.1.

ConsumerGroupPartitionMetadata (type 4) is no longer written from 4.1 (KIP-1101): the group's
subscribed-topic metadata became ``ConsumerGroupMetadataValue.metadata_hash``, and a 4.1
coordinator that loads a group with a type-4 record writes its tombstone. Logs of 3.7-4.0 brokers
still hold it, so it is read.
"""

from protocol.schema import BYTES, INT8, INT32, INT64, STRING, UUID, ArrayOf, array, f, message, struct

ConsumerGroupMetadataKey = message(
    "ConsumerGroupMetadataKey",
    [f("group_id", STRING)],
    valid="3",
)

ConsumerGroupMetadataValue = message(
    "ConsumerGroupMetadataValue",
    [
        f("epoch", INT32, about="The group epoch."),
        f(
            "metadata_hash",
            INT64,
            tag=0,
            default=0,
            about="Hash of the subscribed topics' metadata (4.1, KIP-1101); 0 when not computed.",
        ),
    ],
    valid="0",
    flexible="0+",
)

ConsumerGroupPartitionMetadataKey = message(
    "ConsumerGroupPartitionMetadataKey",
    [f("group_id", STRING)],
    valid="4",
)

ConsumerGroupPartitionMetadataValue = message(
    "ConsumerGroupPartitionMetadataValue",
    [
        f(
            "topics",
            array(
                "TopicMetadata",
                f("topic_id", UUID),
                f("topic_name", STRING),
                f("num_partitions", INT32),
                f(
                    "partition_metadata",
                    array(
                        "PartitionMetadata",
                        f("partition", INT32),
                        f("racks", ArrayOf(STRING)),
                    ),
                    about="Racks per partition; no longer filled from 4.0 (empty).",
                ),
            ),
        ),
    ],
    valid="0",
    flexible="0+",
)

ConsumerGroupMemberMetadataKey = message(
    "ConsumerGroupMemberMetadataKey",
    [f("group_id", STRING), f("member_id", STRING)],
    valid="5",
)

ConsumerGroupMemberMetadataValue = message(
    "ConsumerGroupMemberMetadataValue",
    [
        f("instance_id", STRING, nullable="0+"),
        f("rack_id", STRING, nullable="0+"),
        f("client_id", STRING),
        f("client_host", STRING),
        f("subscribed_topic_names", ArrayOf(STRING), about="Sorted by the writer."),
        f("subscribed_topic_regex", STRING, nullable="0+"),
        f("rebalance_timeout_ms", INT32, default=-1),
        f("server_assignor", STRING, nullable="0+"),
        f(
            "classic_member_metadata",
            struct(
                "ClassicMemberMetadata",
                f("session_timeout_ms", INT32),
                f(
                    "supported_protocols",
                    array(
                        "ClassicProtocol",
                        f("name", STRING),
                        f("metadata", BYTES),
                    ),
                ),
            ),
            nullable="0+",
            tag=0,
            default=None,
            about="Set only for a member that joined with the classic protocol (JoinGroup).",
        ),
    ],
    valid="0",
    flexible="0+",
)

ConsumerGroupTargetAssignmentMetadataKey = message(
    "ConsumerGroupTargetAssignmentMetadataKey",
    [f("group_id", STRING)],
    valid="6",
)

ConsumerGroupTargetAssignmentMetadataValue = message(
    "ConsumerGroupTargetAssignmentMetadataValue",
    [
        f("assignment_epoch", INT32),
        f("assignment_timestamp", INT64, tag=0, default=0, ignorable=True,
          about="When the assignment was computed (4.3, KIP-1263); 0: compute the next one at once."),
    ],
    valid="0",
    flexible="0+",
)

ConsumerGroupTargetAssignmentMemberKey = message(
    "ConsumerGroupTargetAssignmentMemberKey",
    [f("group_id", STRING), f("member_id", STRING)],
    valid="7",
)

ConsumerGroupTargetAssignmentMemberValue = message(
    "ConsumerGroupTargetAssignmentMemberValue",
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

ConsumerGroupCurrentMemberAssignmentKey = message(
    "ConsumerGroupCurrentMemberAssignmentKey",
    [f("group_id", STRING), f("member_id", STRING)],
    valid="8",
)

# One struct for both partition lists, so that both hold instances of the same class
# (``ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions``).
_TOPIC_PARTITIONS = array(
    "TopicPartitions",
    f("topic_id", UUID),
    f("partitions", ArrayOf(INT32)),
)

ConsumerGroupCurrentMemberAssignmentValue = message(
    "ConsumerGroupCurrentMemberAssignmentValue",
    [
        f("member_epoch", INT32),
        f("previous_member_epoch", INT32, about="Accepted once more if the epoch bump was lost."),
        f("state", INT8, about="Kafka's MemberState: 0 stable, 1 unrevoked, 2 unreleased partitions, 127 unknown."),
        f("assigned_partitions", _TOPIC_PARTITIONS),
        f("partitions_pending_revocation", _TOPIC_PARTITIONS),
    ],
    valid="0",
    flexible="0+",
)

ConsumerGroupRegularExpressionKey = message(
    "ConsumerGroupRegularExpressionKey",
    [f("group_id", STRING), f("regular_expression", STRING)],
    valid="16",
)

ConsumerGroupRegularExpressionValue = message(
    "ConsumerGroupRegularExpressionValue",
    [
        f("topics", ArrayOf(STRING), about="The topics the expression matched, sorted by the writer."),
        f("version", INT64, about="Version of the metadata image the expression was resolved against."),
        f("timestamp", INT64, about="When it was resolved."),
    ],
    valid="0",
    flexible="0+",
)
