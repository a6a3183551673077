"""ReadShareGroupState (API key 84, KIP-932): a share partition's durable state (state epoch,
start offset, state batches) as its share coordinator holds it. Sent between the nodes of a
cluster only. Flexible.
"""

from protocol.schema import INT8, INT16, INT32, INT64, STRING, UUID, array, f, message

ReadShareGroupStateRequest = message(
    "ReadShareGroupStateRequest",
    [
        f("group_id", STRING),
        f("topics", array(
            "ReadStateData",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionData",
                f("partition", INT32),
                f("leader_epoch", INT32),
            )),
        )),
    ],
    api_key=84,
    valid="0",
    flexible="0+",
)

ReadShareGroupStateResponse = message(
    "ReadShareGroupStateResponse",
    [
        f("results", array(
            "ReadStateResult",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionResult",
                f("partition", INT32),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
                f("state_epoch", INT32),
                f("start_offset", INT64),
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
    api_key=84,
    valid="0",
    flexible="0+",
)
