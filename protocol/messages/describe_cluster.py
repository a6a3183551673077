"""DescribeCluster (API key 60): the brokers and controller as admin clients see them."""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, array, f, message

DescribeClusterRequest = message(
    "DescribeClusterRequest",
    [
        f("include_cluster_authorized_operations", BOOL),
        f("endpoint_type", INT8, "1+", default=1),
        f("include_fenced_brokers", BOOL, "2+"),
    ],
    api_key=60,
    valid="0-2",
    flexible="0+",
)

DescribeClusterResponse = message(
    "DescribeClusterResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+", default=None),
        f("endpoint_type", INT8, "1+", default=1),
        f("cluster_id", STRING),
        f("controller_id", INT32, default=-1),
        f(
            "brokers",
            array(
                "Broker",
                f("broker_id", INT32),
                f("host", STRING),
                f("port", INT32),
                f("rack", STRING, nullable="0+", default=None),
                f("is_fenced", BOOL, "2+"),
            ),
        ),
        f("cluster_authorized_operations", INT32, default=-2147483648),
    ],
    api_key=60,
    valid="0-2",
    flexible="0+",
)
