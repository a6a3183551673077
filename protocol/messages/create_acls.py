"""CreateAcls (API key 30): ACL bindings to add, one result each.

Resource, pattern, operation and permission types are Kafka's int8 codes (broker/security/acl_model.py
names them)."""

from protocol.schema import INT8, INT16, INT32, STRING, array, f, message

CreateAclsRequest = message(
    "CreateAclsRequest",
    [
        f(
            "creations",
            array(
                "AclCreation",
                f("resource_type", INT8),
                f("resource_name", STRING),
                f("resource_pattern_type", INT8, "1+", default=3),
                f("principal", STRING),
                f("host", STRING),
                f("operation", INT8),
                f("permission_type", INT8),
            ),
        ),
    ],
    api_key=30,
    valid="0-3",
    flexible="2+",
)


CreateAclsResponse = message(
    "CreateAclsResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "results",
            array(
                "AclCreationResult",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
            ),
        ),
    ],
    api_key=30,
    valid="0-3",
    flexible="2+",
)
