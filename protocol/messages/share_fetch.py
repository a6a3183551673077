"""ShareFetch (API key 78, KIP-932): a share-group member fetches records it acquires for a limited
time, and may piggy-back acknowledgements of records it acquired before. Share sessions (like
fetch sessions) carry the partitions between requests: epoch 0 opens one, -1 closes it.
v1 is the first version Kafka 4.x serves; v2 (KIP-1206, KIP-1222) adds the acquire mode and
renew acknowledgements. Flexible.
"""

from protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    array,
    f,
    message,
    struct,
)

_ACK_BATCH = array(
    "AcknowledgementBatch",
    f("first_offset", INT64),
    f("last_offset", INT64),
    f("acknowledge_types", ArrayOf(INT8), about="0 gap, 1 accept, 2 release, 3 reject, 4 renew; one for the "
      "whole batch or one per offset."),
)

ShareFetchRequest = message(
    "ShareFetchRequest",
    [
        f("group_id", STRING, nullable="0+", default=None),
        f("member_id", STRING, nullable="0+"),
        f("share_session_epoch", INT32),
        f("max_wait_ms", INT32),
        f("min_bytes", INT32),
        f("max_bytes", INT32, default=0x7FFFFFFF),
        f("max_records", INT32, "1+"),
        f("batch_size", INT32, "1+"),
        f("share_acquire_mode", INT8, "2+", default=0, ignorable=True),
        f("is_renew_ack", BOOL, "2+", default=False),
        f(
            "topics",
            array(
                "FetchTopic",
                f("topic_id", UUID),
                f(
                    "partitions",
                    array(
                        "FetchPartition",
                        f("partition_index", INT32),
                        f("partition_max_bytes", INT32, "0"),
                        f("acknowledgement_batches", _ACK_BATCH),
                    ),
                ),
            ),
        ),
        f(
            "forgotten_topics_data",
            array(
                "ForgottenTopic",
                f("topic_id", UUID),
                f("partitions", ArrayOf(INT32)),
            ),
        ),
    ],
    api_key=78,
    valid="1-2",
    flexible="0+",
)

ShareFetchResponse = message(
    "ShareFetchResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=None),
        f("acquisition_lock_timeout_ms", INT32, "1+"),
        f(
            "responses",
            array(
                "ShareFetchableTopicResponse",
                f("topic_id", UUID),
                f(
                    "partitions",
                    array(
                        "PartitionData",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, nullable="0+", default=None),
                        f("acknowledge_error_code", INT16),
                        f("acknowledge_error_message", STRING, nullable="0+", default=None),
                        f(
                            "current_leader",
                            struct(
                                "LeaderIdAndEpoch",
                                f("leader_id", INT32),
                                f("leader_epoch", INT32),
                            ),
                        ),
                        f("records", RECORDS, nullable="0"),
                        f(
                            "acquired_records",
                            array(
                                "AcquiredRecords",
                                f("first_offset", INT64),
                                f("last_offset", INT64),
                                f("delivery_count", INT16),
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
    api_key=78,
    valid="1-2",
    flexible="0+",
)
