"""DeleteRecords (API key 21), v0-2; flexible from v2: move partitions' log start offsets forward
(offset -1 means the high watermark)."""

from protocol.schema import INT16, INT32, INT64, STRING, array, f, message

DeleteRecordsRequest = message(
    "DeleteRecordsRequest",
    [
        f(
            "topics",
            array(
                "Topic",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "Partition",
                        f("partition_index", INT32),
                        f("offset", INT64),
                    ),
                ),
            ),
        ),
        f("timeout_ms", INT32),
    ],
    api_key=21,
    valid="0-2",
    flexible="2+",
)

DeleteRecordsResponse = message(
    "DeleteRecordsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "topics",
            array(
                "TopicResult",
                f("name", STRING),
                f(
                    "partitions",
                    array(
                        "PartitionResult",
                        f("partition_index", INT32),
                        f("low_watermark", INT64),
                        f("error_code", INT16),
                    ),
                ),
            ),
        ),
    ],
    api_key=21,
    valid="0-2",
    flexible="2+",
)
