"""DeleteShareGroupState (API key 86, KIP-932): a share partition's state is removed
(DeleteShareGroupOffsets, DeleteGroups, a deleted topic). Sent between the nodes of a cluster
only. Flexible.
"""

from protocol.schema import INT16, INT32, STRING, UUID, array, f, message

DeleteShareGroupStateRequest = message(
    "DeleteShareGroupStateRequest",
    [
        f("group_id", STRING),
        f("topics", array(
            "DeleteStateData",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionData",
                f("partition", INT32),
            )),
        )),
    ],
    api_key=86,
    valid="0",
    flexible="0+",
)

DeleteShareGroupStateResponse = message(
    "DeleteShareGroupStateResponse",
    [
        f("results", array(
            "DeleteStateResult",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionResult",
                f("partition", INT32),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
            )),
        )),
    ],
    api_key=86,
    valid="0",
    flexible="0+",
)
