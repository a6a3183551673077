"""Key and value schemas of the KIP-1071 streams-group records in ``__consumer_offsets``, as of
Kafka 4.4 (kafka-group-coordinator's ``StreamsGroup*`` specs).

Each key table declares the one version that names its record type, as ``offsets_log`` and
``offsets_log_consumer_groups`` do (Kafka declares the key struct at version 0 and writes the
record type, its ``apiKey``, before it: the same bytes). Keys are never flexible; every value is
flexible from v0 and has the one version 0, later fields being tagged fields of v0.

StreamsGroupPartitionMetadata (18) and StreamsGroupTargetAssignmentResolvedTopicIds (24) are not
written by 4.4 for the groups kcoord serves and are not declared here.
"""

from protocol.schema import INT8, INT16, INT32, INT64, STRING, UINT16, ArrayOf, array, f, message, struct

StreamsGroupMetadataKey = message("StreamsGroupMetadataKey", [f("group_id", STRING)], valid="17")

StreamsGroupMetadataValue = message(
    "StreamsGroupMetadataValue",
    [
        f("epoch", INT32, about="The group epoch."),
        f("metadata_hash", INT64, about="Hash of every topic the topology names."),
        f("validated_topology_epoch", INT32, tag=0, default=-1),
        f(
            "last_assignment_configs",
            array("LastAssignmentConfig", f("key", STRING), f("value", STRING)),
            nullable="0+",
            tag=1,
            default=None,
        ),
        f("stored_description_topology_epoch", INT32, tag=2, default=-1),
        f("failed_description_topology_epoch", INT32, tag=3, default=-1),
    ],
    valid="0",
    flexible="0+",
)

StreamsGroupTopologyKey = message("StreamsGroupTopologyKey", [f("group_id", STRING)], valid="23")

_TOPIC_INFO = array(
    "TopicInfo",
    f("name", STRING),
    f("partitions", INT32),
    f("replication_factor", INT16),
    f("topic_configs", array("TopicConfig", f("key", STRING), f("value", STRING))),
)

StreamsGroupTopologyValue = message(
    "StreamsGroupTopologyValue",
    [
        f("epoch", INT32),
        f(
            "subtopologies",
            array(
                "Subtopology",
                f("subtopology_id", STRING),
                f("source_topics", ArrayOf(STRING)),
                f("source_topic_regex", ArrayOf(STRING)),
                f("state_changelog_topics", _TOPIC_INFO),
                f("repartition_sink_topics", ArrayOf(STRING)),
                f("repartition_source_topics", _TOPIC_INFO),
                f(
                    "copartition_groups",
                    array(
                        "CopartitionGroup",
                        f("source_topics", ArrayOf(INT16)),
                        f("source_topic_regex", ArrayOf(INT16)),
                        f("repartition_source_topics", ArrayOf(INT16)),
                    ),
                ),
            ),
        ),
    ],
    valid="0",
    flexible="0+",
)

StreamsGroupMemberMetadataKey = message(
    "StreamsGroupMemberMetadataKey", [f("group_id", STRING), f("member_id", STRING)], valid="19")

_KEY_VALUE = array("KeyValue", f("key", STRING), f("value", STRING))

StreamsGroupMemberMetadataValue = message(
    "StreamsGroupMemberMetadataValue",
    [
        f("instance_id", STRING, nullable="0+"),
        f("rack_id", STRING, nullable="0+"),
        f("client_id", STRING),
        f("client_host", STRING),
        f("rebalance_timeout_ms", INT32, default=-1),
        f("topology_epoch", INT32),
        f("process_id", STRING),
        f("user_endpoint", struct("Endpoint", f("host", STRING), f("port", UINT16)), nullable="0+", default=None),
        f("client_tags", _KEY_VALUE),
    ],
    valid="0",
    flexible="0+",
)

StreamsGroupTargetAssignmentMetadataKey = message(
    "StreamsGroupTargetAssignmentMetadataKey", [f("group_id", STRING)], valid="20")

StreamsGroupTargetAssignmentMetadataValue = message(
    "StreamsGroupTargetAssignmentMetadataValue",
    [
        f("assignment_epoch", INT32),
        f("assignment_timestamp", INT64, tag=0, default=0, ignorable=True,
          about="When the assignment was computed (4.3, KIP-1263)."),
    ],
    valid="0",
    flexible="0+",
)

StreamsGroupTargetAssignmentMemberKey = message(
    "StreamsGroupTargetAssignmentMemberKey", [f("group_id", STRING), f("member_id", STRING)], valid="21")

_TARGET_TASK_IDS = array("TaskIds", f("subtopology_id", STRING), f("partitions", ArrayOf(INT32)))

StreamsGroupTargetAssignmentMemberValue = message(
    "StreamsGroupTargetAssignmentMemberValue",
    [
        f("active_tasks", _TARGET_TASK_IDS),
        f("standby_tasks", _TARGET_TASK_IDS),
        f("warmup_tasks", _TARGET_TASK_IDS),
    ],
    valid="0",
    flexible="0+",
)

StreamsGroupCurrentMemberAssignmentKey = message(
    "StreamsGroupCurrentMemberAssignmentKey", [f("group_id", STRING), f("member_id", STRING)], valid="22")

_CURRENT_TASK_IDS = array(
    "TaskIds",
    f("subtopology_id", STRING),
    f("partitions", ArrayOf(INT32)),
    f("assignment_epochs", ArrayOf(INT32), nullable="0+", tag=0, default=None,
      about="Per partition, the epoch it was assigned at (active tasks only)."),
)

StreamsGroupCurrentMemberAssignmentValue = message(
    "StreamsGroupCurrentMemberAssignmentValue",
    [
        f("member_epoch", INT32),
        f("previous_member_epoch", INT32),
        f("state", INT8, about="0 stable, 1 unrevoked tasks, 2 unreleased tasks, 3 unknown."),
        f("active_tasks", _CURRENT_TASK_IDS),
        f("standby_tasks", _CURRENT_TASK_IDS),
        f("warmup_tasks", _CURRENT_TASK_IDS),
        f("active_tasks_pending_revocation", _CURRENT_TASK_IDS),
        f("standby_tasks_pending_revocation", _CURRENT_TASK_IDS),
        f("warmup_tasks_pending_revocation", _CURRENT_TASK_IDS),
    ],
    valid="0",
    flexible="0+",
)
