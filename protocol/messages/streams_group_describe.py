"""StreamsGroupDescribe (API key 89): KIP-1071 streams groups with their epochs, topology and
members, each member's process, endpoint and current and target tasks. Flexible from v0; v1
(KIP-1331, KIP-1357) adds the full topology description, its status and the assignor's name.
"""

from protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    ArrayOf,
    array,
    f,
    message,
    struct,
)

StreamsGroupDescribeRequest = message(
    "StreamsGroupDescribeRequest",
    [
        f("group_ids", ArrayOf(STRING)),
        f("include_authorized_operations", BOOL),
        f("include_topology_description", BOOL, "1+", default=False),
    ],
    api_key=89,
    valid="0-1",
    flexible="0+",
)

_KEY_VALUE = array("KeyValue", f("key", STRING), f("value", STRING))
_TOPIC_INFO = array(
    "TopicInfo",
    f("name", STRING),
    f("partitions", INT32),
    f("replication_factor", INT16),
    f("topic_configs", _KEY_VALUE),
)
_TASK_IDS = array("TaskIds", f("subtopology_id", STRING), f("partitions", ArrayOf(INT32)))
# One struct for both assignment fields of a member (both then hold the same class).
_ASSIGNMENT = struct(
    "Assignment",
    f("active_tasks", _TASK_IDS),
    f("standby_tasks", _TASK_IDS),
    f("warmup_tasks", _TASK_IDS),
)
_TASK_OFFSET = array("TaskOffset", f("subtopology_id", STRING), f("partition", INT32), f("offset", INT64))
_NODE_FIELDS = (
    f("name", STRING, "1+"),
    f("node_type", INT8, "1+", about="1 source, 2 processor, 3 sink."),
    f("source_topics", ArrayOf(STRING), "1+"),
    f("sink_topic", STRING, "1+", nullable="1+", default=None),
    f("stores", ArrayOf(STRING), "1+"),
    f("successors", ArrayOf(STRING), "1+"),
)

_NODE = struct("TopologyDescriptionNode", *_NODE_FIELDS)

StreamsGroupDescribeResponse = message(
    "StreamsGroupDescribeResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "groups",
            array(
                "DescribedGroup",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
                f("group_id", STRING),
                f("group_state", STRING, about="Empty, NotReady, Assigning, Reconciling, Stable or Dead."),
                f("group_epoch", INT32),
                f("assignment_epoch", INT32),
                f(
                    "topology",
                    struct(
                        "Topology",
                        f("epoch", INT32),
                        f(
                            "subtopologies",
                            array(
                                "Subtopology",
                                f("subtopology_id", STRING),
                                f("source_topics", ArrayOf(STRING)),
                                f("repartition_sink_topics", ArrayOf(STRING)),
                                f("state_changelog_topics", _TOPIC_INFO),
                                f("repartition_source_topics", _TOPIC_INFO),
                            ),
                            nullable="0+",
                            default=None,
                            about="Null while the topology is not configured (topics missing or mis-partitioned).",
                        ),
                    ),
                    nullable="0+",
                    default=None,
                ),
                f(
                    "members",
                    array(
                        "Member",
                        f("member_id", STRING),
                        f("member_epoch", INT32),
                        f("instance_id", STRING, nullable="0+", default=None),
                        f("rack_id", STRING, nullable="0+", default=None),
                        f("client_id", STRING),
                        f("client_host", STRING),
                        f("topology_epoch", INT32),
                        f("process_id", STRING),
                        f("user_endpoint", struct("Endpoint", f("host", STRING), f("port", UINT16)),
                          nullable="0+", default=None),
                        f("client_tags", array("KeyValue", f("key", STRING), f("value", STRING))),
                        f("task_offsets", _TASK_OFFSET),
                        f("task_end_offsets", _TASK_OFFSET),
                        f("assignment", _ASSIGNMENT, about="The current assignment."),
                        f("target_assignment", _ASSIGNMENT),
                        f("is_classic", BOOL),
                    ),
                ),
                f("authorized_operations", INT32, default=-2147483648),
                f(
                    "topology_description",
                    struct(
                        "TopologyDescription",
                        f("subtopologies", array("TopologyDescriptionSubtopology",
                                                 f("subtopology_id", STRING, "1+"),
                                                 f("nodes", array("TopologyDescriptionNode", *_NODE_FIELDS), "1+")),
                          "1+"),
                        f("global_stores", array("TopologyDescriptionGlobalStore",
                                                 f("source", _NODE, "1+"),
                                                 f("processor", _NODE, "1+")),
                          "1+"),
                    ),
                    "1+",
                    nullable="1+",
                    default=None,
                ),
                f("topology_description_status", INT8, "1+", default=0,
                  about="0 not requested, 1 not stored, 2 error, 3 available."),
                f("assignor_name", STRING, "1+", nullable="1+", default=None, ignorable=True),
            ),
        ),
    ],
    api_key=89,
    valid="0-1",
    flexible="0+",
)
