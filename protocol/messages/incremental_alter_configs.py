"""IncrementalAlterConfigs (API key 44): set, delete, append to or subtract from single configs of a
resource (KIP-339); flexible from v1."""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, array, f, message

IncrementalAlterConfigsRequest = message(
    "IncrementalAlterConfigsRequest",
    [
        f(
            "resources",
            array(
                "AlterConfigsResource",
                f("resource_type", INT8),
                f("resource_name", STRING),
                f(
                    "configs",
                    array(
                        "AlterableConfig",
                        f("name", STRING),
                        f("config_operation", INT8, about="0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT."),
                        f("value", STRING, nullable="0+"),
                    ),
                ),
            ),
        ),
        f("validate_only", BOOL),
    ],
    api_key=44,
    valid="0-1",
    flexible="1+",
)

IncrementalAlterConfigsResponse = message(
    "IncrementalAlterConfigsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "responses",
            array(
                "AlterConfigsResourceResponse",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
                f("resource_type", INT8),
                f("resource_name", STRING),
            ),
        ),
    ],
    api_key=44,
    valid="0-1",
    flexible="1+",
)
