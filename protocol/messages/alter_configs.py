"""AlterConfigs (API key 33): replace the whole set of dynamic configs of a resource; flexible from v2."""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, array, f, message

AlterConfigsRequest = message(
    "AlterConfigsRequest",
    [
        f(
            "resources",
            array(
                "Resource",
                f("resource_type", INT8),
                f("resource_name", STRING),
                f(
                    "configs",
                    array(
                        "AlterableConfig",
                        f("name", STRING),
                        f("value", STRING, nullable="0+"),
                    ),
                ),
            ),
        ),
        f("validate_only", BOOL),
    ],
    api_key=33,
    valid="0-2",
    flexible="2+",
)

AlterConfigsResponse = message(
    "AlterConfigsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "responses",
            array(
                "ResourceResponse",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
                f("resource_type", INT8),
                f("resource_name", STRING),
            ),
        ),
    ],
    api_key=33,
    valid="0-2",
    flexible="2+",
)
