"""DescribeLogDirs (API key 35), v1-5 (as Kafka 4; v0 has the same fields); flexible from v2: each
log directory with the size of the partitions it holds, and (v4+) the volume's total and usable
bytes."""

from protocol.schema import BOOL, INT16, INT32, INT64, STRING, ArrayOf, array, f, message

DescribeLogDirsRequest = message(
    "DescribeLogDirsRequest",
    [
        f(
            "topics",
            array(
                "DescribableLogDirTopic",
                f("topic", STRING),
                f("partitions", ArrayOf(INT32)),
            ),
            nullable="0+",
        ),
    ],
    api_key=35,
    valid="1-5",
    flexible="2+",
)

DescribeLogDirsResponse = message(
    "DescribeLogDirsResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16, "3+", ignorable=True),
        f(
            "results",
            array(
                "Result",
                f("error_code", INT16),
                f("log_dir", STRING),
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
                                f("partition_size", INT64),
                                f("offset_lag", INT64),
                                f("is_future_key", BOOL),
                            ),
                        ),
                    ),
                ),
                f("total_bytes", INT64, "4+", default=-1, ignorable=True),
                f("usable_bytes", INT64, "4+", default=-1, ignorable=True),
                f("is_cordoned", BOOL, "5+", default=False, ignorable=True),
            ),
        ),
    ],
    api_key=35,
    valid="1-5",
    flexible="2+",
)
