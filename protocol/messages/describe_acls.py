"""DescribeAcls (API key 29): the ACLs matching a filter, grouped by resource pattern.

Resource, pattern, operation and permission types are Kafka's int8 codes (broker/security/acl_model.py
names them)."""

from protocol.schema import INT8, INT16, INT32, STRING, array, f, message

DescribeAclsRequest = message(
    "DescribeAclsRequest",
    [
        f("resource_type_filter", INT8),
        f("resource_name_filter", STRING, nullable="0+"),
        f("pattern_type_filter", INT8, "1+", default=3),
        f("principal_filter", STRING, nullable="0+"),
        f("host_filter", STRING, nullable="0+"),
        f("operation", INT8),
        f("permission_type", INT8),
    ],
    api_key=29,
    valid="0-3",
    flexible="2+",
)


DescribeAclsResponse = message(
    "DescribeAclsResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f(
            "resources",
            array(
                "Resource",
                f("resource_type", INT8),
                f("resource_name", STRING),
                f("pattern_type", INT8, "1+", default=3),
                f(
                    "acls",
                    array(
                        "AclDescription",
                        f("principal", STRING),
                        f("host", STRING),
                        f("operation", INT8),
                        f("permission_type", INT8),
                    ),
                ),
            ),
        ),
    ],
    api_key=29,
    valid="0-3",
    flexible="2+",
)
