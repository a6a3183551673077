"""ListConfigResources (API key 74, Kafka 4.1, KIP-1142): the resources that have configs; v0 listed
client-metrics resources only. Flexible in every version."""

from protocol.schema import INT8, INT16, INT32, STRING, ArrayOf, array, f, message

ListConfigResourcesRequest = message(
    "ListConfigResourcesRequest",
    [
        f("resource_types", ArrayOf(INT8), "1+", about="Empty: every type the broker lists."),
    ],
    api_key=74,
    valid="0-1",
    flexible="0+",
)

ListConfigResourcesResponse = message(
    "ListConfigResourcesResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f(
            "config_resources",
            array(
                "ConfigResource",
                f("resource_name", STRING),
                f("resource_type", INT8, "1+", default=16, ignorable=True),
            ),
        ),
    ],
    api_key=74,
    valid="0-1",
    flexible="0+",
)
