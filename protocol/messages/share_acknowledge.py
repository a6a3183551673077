"""ShareAcknowledge (API key 79, KIP-932): a share-group member acknowledges records it acquired
(accept, release, reject; v2 adds renew) without fetching more, within its share session.
v1 is the first version Kafka 4.x serves. Flexible.
"""

from protocol.schema import BOOL, INT8, INT16, INT32, INT64, STRING, UUID, ArrayOf, array, f, message, struct

ShareAcknowledgeRequest = message(
    "ShareAcknowledgeRequest",
    [
        f("group_id", STRING, nullable="0+", default=None),
        f("member_id", STRING, nullable="0+"),
        f("share_session_epoch", INT32),
        f("is_renew_ack", BOOL, "2+", default=False),
        f(
            "topics",
            array(
                "AcknowledgeTopic",
                f("topic_id", UUID),
                f(
                    "partitions",
                    array(
                        "AcknowledgePartition",
                        f("partition_index", INT32),
                        f(
                            "acknowledgement_batches",
                            array(
                                "AcknowledgementBatch",
                                f("first_offset", INT64),
                                f("last_offset", INT64),
                                f("acknowledge_types", ArrayOf(INT8)),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    ],
    api_key=79,
    valid="1-2",
    flexible="0+",
)

ShareAcknowledgeResponse = message(
    "ShareAcknowledgeResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=None),
        f("acquisition_lock_timeout_ms", INT32, "2+", ignorable=True),
        f(
            "responses",
            array(
                "TopicResponse",
                f("topic_id", UUID),
                f(
                    "partitions",
                    array(
                        "PartitionData",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, nullable="0+", default=None),
                        f(
                            "current_leader",
                            struct(
                                "LeaderIdAndEpoch",
                                f("leader_id", INT32),
                                f("leader_epoch", INT32),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        f(
            "node_endpoints",
            array(
                "NodeEndpoint",
                f("node_id", INT32),
                f("host", STRING),
                f("port", INT32),
                f("rack", STRING, nullable="0+", default=None),
            ),
        ),
    ],
    api_key=79,
    valid="1-2",
    flexible="0+",
)
