"""WriteTxnMarkers (API key 27): a transaction coordinator has a partition's owner write COMMIT or
ABORT markers (Kafka's TransactionMarkerChannelManager sends it to partition leaders). kcoord nodes
of a cluster send it to each other; it is not a client API.

v0 was removed in Kafka 4.0; v2 (KIP-1228) adds the transaction version of the marker."""

from protocol.schema import BOOL, INT8, INT16, INT32, INT64, STRING, ArrayOf, array, f, message

WriteTxnMarkersRequest = message(
    "WriteTxnMarkersRequest",
    [
        f(
            "markers",
            array(
                "WritableTxnMarker",
                f("producer_id", INT64),
                f("producer_epoch", INT16),
                f("transaction_result", BOOL),
                f(
                    "topics",
                    array(
                        "WritableTxnMarkerTopic",
                        f("name", STRING),
                        f("partition_indexes", ArrayOf(INT32)),
                    ),
                ),
                f("coordinator_epoch", INT32),
                f("transaction_version", INT8, "2+", default=0, ignorable=True),
            ),
        ),
    ],
    api_key=27,
    valid="0-2",
    flexible="1+",
)

WriteTxnMarkersResponse = message(
    "WriteTxnMarkersResponse",
    [
        f(
            "markers",
            array(
                "WritableTxnMarkerResult",
                f("producer_id", INT64),
                f(
                    "topics",
                    array(
                        "WritableTxnMarkerTopicResult",
                        f("name", STRING),
                        f(
                            "partitions",
                            array(
                                "WritableTxnMarkerPartitionResult",
                                f("partition_index", INT32),
                                f("error_code", INT16),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    ],
    api_key=27,
    valid="0-2",
    flexible="1+",
)
