"""DescribeConfigs (API key 32): topic and broker configuration for admin clients; flexible from v4."""

from protocol.schema import BOOL, INT8, INT16, INT32, STRING, ArrayOf, array, f, message

DescribeConfigsRequest = message(
    "DescribeConfigsRequest",
    [
        f(
            "resources",
            array(
                "Resource",
                f("resource_type", INT8),
                f("resource_name", STRING),
                f("configuration_keys", ArrayOf(STRING), nullable="0+"),
            ),
        ),
        f("include_synonyms", BOOL, "1+", default=False),
        f("include_documentation", BOOL, "3+", default=False),
    ],
    api_key=32,
    valid="0-4",
    flexible="4+",
)

DescribeConfigsResponse = message(
    "DescribeConfigsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "results",
            array(
                "Result",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
                f("resource_type", INT8),
                f("resource_name", STRING),
                f(
                    "configs",
                    array(
                        "ResourceResult",
                        f("name", STRING),
                        f("value", STRING, nullable="0+"),
                        f("read_only", BOOL),
                        f("config_source", INT8, "1+", default=-1, ignorable=True),
                        f("is_default", BOOL, "0"),
                        f("is_sensitive", BOOL),
                        f(
                            "synonyms",
                            array(
                                "Synonym",
                                f("name", STRING, "1+"),
                                f("value", STRING, "1+", nullable="0+"),
                                f("source", INT8, "1+"),
                            ),
                            "1+",
                            ignorable=True,
                        ),
                        f("config_type", INT8, "3+", default=0, ignorable=True),
                        f("documentation", STRING, "3+", nullable="0+", ignorable=True),
                    ),
                ),
            ),
        ),
    ],
    api_key=32,
    valid="0-4",
    flexible="4+",
)
