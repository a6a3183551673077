"""AlterClientQuotas (API key 49): per entity (user, client-id, ip; a null name is the default
entity) quota values to set or remove; ``validate_only`` checks without changing anything."""

from protocol.schema import BOOL, FLOAT64, INT16, INT32, STRING, array, f, message

AlterClientQuotasRequest = message(
    "AlterClientQuotasRequest",
    [
        f(
            "entries",
            array(
                "EntryData",
                f("entity", array("EntityData", f("entity_type", STRING), f("entity_name", STRING, nullable="0+"))),
                f("ops", array("OpData", f("key", STRING), f("value", FLOAT64), f("remove", BOOL))),
            ),
        ),
        f("validate_only", BOOL),
    ],
    api_key=49,
    valid="0-1",
    flexible="1+",
)


AlterClientQuotasResponse = message(
    "AlterClientQuotasResponse",
    [
        f("throttle_time_ms", INT32),
        f(
            "entries",
            array(
                "EntryData",
                f("error_code", INT16),
                f("error_message", STRING, nullable="0+"),
                f("entity", array("EntityData", f("entity_type", STRING), f("entity_name", STRING, nullable="0+"))),
            ),
        ),
    ],
    api_key=49,
    valid="0-1",
    flexible="1+",
)
