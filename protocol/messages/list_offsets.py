"""ListOffsets (API key 2), v0-11; flexible from v6.

v0 (which Kafka 4 dropped, KIP-896, and every release from 2.0 to 3.9 served) asks for up to
``max_num_offsets`` offsets per partition and gets them in ``old_style_offsets``; v1+ get one.
"""

from protocol.schema import INT8, INT16, INT32, INT64, STRING, ArrayOf, array, f, message

ListOffsetsRequest = message(
    "ListOffsetsRequest",
    [
        f("replica_id", INT32),
        f("isolation_level", INT8, "2+"),
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
                        f("current_leader_epoch", INT32, "4+", default=-1, ignorable=True),
                        f("timestamp", INT64),
                        f("max_num_offsets", INT32, "0", default=1),
                    ),
                ),
            ),
        ),
        f("timeout_ms", INT32, "10+", ignorable=True),
    ],
    api_key=2,
    valid="0-11",
    flexible="6+",
)

ListOffsetsResponse = message(
    "ListOffsetsResponse",
    [
        f("throttle_time_ms", INT32, "2+", ignorable=True),
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
                        f("error_code", INT16),
                        f("old_style_offsets", ArrayOf(INT64), "0"),
                        f("timestamp", INT64, "1+", default=-1),
                        f("offset", INT64, "1+", default=-1),
                        f("leader_epoch", INT32, "4+", default=-1),
                    ),
                ),
            ),
        ),
    ],
    api_key=2,
    valid="0-11",
    flexible="6+",
)
