"""InitializeShareGroupState (API key 83, KIP-932): a share partition's state starts afresh at a
state epoch and start offset (a share group's first use of a partition, or an offset reset).
Sent between the nodes of a cluster only, to the share coordinator of the key. Flexible.
"""

from protocol.schema import INT16, INT32, INT64, STRING, UUID, array, f, message

InitializeShareGroupStateRequest = message(
    "InitializeShareGroupStateRequest",
    [
        f("group_id", STRING),
        f("topics", array(
            "InitializeStateData",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionData",
                f("partition", INT32),
                f("state_epoch", INT32),
                f("start_offset", INT64),
            )),
        )),
    ],
    api_key=83,
    valid="0",
    flexible="0+",
)

InitializeShareGroupStateResponse = message(
    "InitializeShareGroupStateResponse",
    [
        f("results", array(
            "InitializeStateResult",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionResult",
                f("partition", INT32),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
            )),
        )),
    ],
    api_key=83,
    valid="0",
    flexible="0+",
)
