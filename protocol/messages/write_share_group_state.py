"""WriteShareGroupState (API key 85, KIP-932): the share partition's leader writes what changed
(start offset, state batches) to the share coordinator of the key; v1 adds the count of records
whose delivery is complete. Sent between the nodes of a cluster only. Flexible.
"""

from protocol.schema import INT8, INT16, INT32, INT64, STRING, UUID, array, f, message

WriteShareGroupStateRequest = message(
    "WriteShareGroupStateRequest",
    [
        f("group_id", STRING),
        f("topics", array(
            "WriteStateData",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionData",
                f("partition", INT32),
                f("state_epoch", INT32),
                f("leader_epoch", INT32),
                f("start_offset", INT64),
                f("delivery_complete_count", INT32, "1+", ignorable=True, default=-1),
                f("state_batches", array(
                    "StateBatch",
                    f("first_offset", INT64),
                    f("last_offset", INT64),
                    f("delivery_state", INT8),
                    f("delivery_count", INT16),
                )),
            )),
        )),
    ],
    api_key=85,
    valid="0-1",
    flexible="0+",
)

WriteShareGroupStateResponse = message(
    "WriteShareGroupStateResponse",
    [
        f("results", array(
            "WriteStateResult",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionResult",
                f("partition", INT32),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
            )),
        )),
    ],
    api_key=85,
    valid="0-1",
    flexible="0+",
)
