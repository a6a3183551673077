"""DescribeQuorum (API key 55, KIP-595/KIP-853): the voters and observers of the metadata log's
quorum. v2 adds directory ids, error messages and the voters' listeners."""

from protocol.schema import INT16, INT32, INT64, STRING, UINT16, UUID, array, f, message

DescribeQuorumRequest = message(
    "DescribeQuorumRequest",
    [
        f(
            "topics",
            array(
                "TopicData",
                f("topic_name", STRING),
                f("partitions", array("PartitionData", f("partition_index", INT32))),
            ),
        ),
    ],
    api_key=55,
    valid="0-2",
    flexible="0+",
)

# Kafka's common struct: both the voters and the observers of a partition.
_REPLICA_STATE = array(
    "ReplicaState",
    f("replica_id", INT32),
    f("replica_directory_id", UUID, "2+"),
    f("log_end_offset", INT64),
    f("last_fetch_timestamp", INT64, "1+", default=-1, ignorable=True),
    f("last_caught_up_timestamp", INT64, "1+", default=-1, ignorable=True),
)

DescribeQuorumResponse = message(
    "DescribeQuorumResponse",
    [
        f("error_code", INT16),
        f("error_message", STRING, "2+", nullable="2+", ignorable=True),
        f(
            "topics",
            array(
                "TopicData",
                f("topic_name", STRING),
                f(
                    "partitions",
                    array(
                        "PartitionData",
                        f("partition_index", INT32),
                        f("error_code", INT16),
                        f("error_message", STRING, "2+", nullable="2+", ignorable=True),
                        f("leader_id", INT32),
                        f("leader_epoch", INT32),
                        f("high_watermark", INT64),
                        f("current_voters", _REPLICA_STATE),
                        f("observers", _REPLICA_STATE),
                    ),
                ),
            ),
        ),
        f(
            "nodes",
            array(
                "Node",
                f("node_id", INT32, "2+"),
                f(
                    "listeners",
                    array(
                        "Listener",
                        f("name", STRING, "2+"),
                        f("host", STRING, "2+"),
                        f("port", UINT16, "2+"),
                    ),
                    "2+",
                ),
            ),
            "2+",
        ),
    ],
    api_key=55,
    valid="0-2",
    flexible="0+",
)
