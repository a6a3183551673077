"""FindCoordinator (API key 10): which broker coordinates a group (or transaction).

v0-3 ask for a single key; v4+ batch several keys and answer per key (KIP-699)."""

from protocol.schema import INT8, INT16, INT32, STRING, ArrayOf, array, f, message

FindCoordinatorRequest = message(
    "FindCoordinatorRequest",
    [
        f("key", STRING, "0-3"),
        f("key_type", INT8, "1+", default=0),
        f("coordinator_keys", ArrayOf(STRING), "4+"),
    ],
    api_key=10,
    valid="0-6",
    flexible="3+",
)

FindCoordinatorResponse = message(
    "FindCoordinatorResponse",
    [
        f("throttle_time_ms", INT32, "1+", ignorable=True),
        f("error_code", INT16, "0-3"),
        f("error_message", STRING, "1-3", nullable="1-3", ignorable=True),
        f("node_id", INT32, "0-3"),
        f("host", STRING, "0-3"),
        f("port", INT32, "0-3"),
        f(
            "coordinators",
            array(
                "Coordinator",
                f("key", STRING, "4+"),
                f("node_id", INT32, "4+"),
                f("host", STRING, "4+"),
                f("port", INT32, "4+"),
                f("error_code", INT16, "4+"),
                f("error_message", STRING, "4+", nullable="4+", ignorable=True),
            ),
            "4+",
        ),
    ],
    api_key=10,
    valid="0-6",
    flexible="3+",
)
