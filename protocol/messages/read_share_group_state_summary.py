"""ReadShareGroupStateSummary (API key 87, KIP-932): a share partition's state epoch, leader
epoch and start offset without its batches (DescribeShareGroupOffsets); v1 adds the count of
records whose delivery is complete. Sent between the nodes of a cluster only. Flexible.
"""

from protocol.schema import INT16, INT32, INT64, STRING, UUID, array, f, message

ReadShareGroupStateSummaryRequest = message(
    "ReadShareGroupStateSummaryRequest",
    [
        f("group_id", STRING),
        f("topics", array(
            "ReadStateSummaryData",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionData",
                f("partition", INT32),
                f("leader_epoch", INT32),
            )),
        )),
    ],
    api_key=87,
    valid="0-1",
    flexible="0+",
)

ReadShareGroupStateSummaryResponse = message(
    "ReadShareGroupStateSummaryResponse",
    [
        f("results", array(
            "ReadStateSummaryResult",
            f("topic_id", UUID),
            f("partitions", array(
                "PartitionResult",
                f("partition", INT32),
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+", default=None),
                f("state_epoch", INT32),
                f("leader_epoch", INT32),
                f("start_offset", INT64),
                f("delivery_complete_count", INT32, "1+", ignorable=True, default=-1),
            )),
        )),
    ],
    api_key=87,
    valid="0-1",
    flexible="0+",
)
