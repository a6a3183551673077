"""DescribeClientQuotas (API key 48): the quotas of the entities (user, client-id, ip) that match a
filter. A component matches its entity type exactly (0, with a name), the default entity (1) or
any named entity (2); ``strict`` excludes entities with entity types the filter does not name."""

from protocol.schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, array, f, message

DescribeClientQuotasRequest = message(
    "DescribeClientQuotasRequest",
    [
        f(
            "components",
            array(
                "ComponentData",
                f("entity_type", STRING),
                f("match_type", INT8),
                f("match", STRING, nullable="0+"),
            ),
        ),
        f("strict", BOOL),
    ],
    api_key=48,
    valid="0-1",
    flexible="1+",
)


DescribeClientQuotasResponse = message(
    "DescribeClientQuotasResponse",
    [
        f("throttle_time_ms", INT32),
        f("error_code", INT16),
        f("error_message", STRING, nullable="0+"),
        f(
            "entries",
            array(
                "EntryData",
                f("entity", array("EntityData", f("entity_type", STRING), f("entity_name", STRING, nullable="0+"))),
                f("values", array("ValueData", f("key", STRING), f("value", FLOAT64))),
            ),
            nullable="0+",
        ),
    ],
    api_key=48,
    valid="0-1",
    flexible="1+",
)
